package rebootpolicy

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

var throttleStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rolling is a Deployment restarted at stamp (by owner) whose rollout has
// not finished; rolledOut is the same Deployment once it has.
func rolling(name, owner string, stamp time.Time) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 2,
			Annotations: map[string]string{autorebootv1alpha1.RestartIDAnnotation: owner + "/abc"}},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: podTemplateWithStamp(stamp)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2},
	}
}

func rolledOut(d *appsv1.Deployment) *appsv1.Deployment {
	d = d.DeepCopy()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
	return d
}

func podTemplateWithStamp(stamp time.Time) (t corev1.PodTemplateSpec) {
	t.Annotations = map[string]string{autorebootv1alpha1.RestartedAtAnnotation: restartStamp(stamp)}
	return t
}

func owner(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: name}
}

func TestThrottleBoundsRestartsInProgress(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(2, fc)
	a, b := owner("a"), owner("b")
	if got := th.Admit(a, 2, 0); got != 2 {
		t.Fatalf("a got %d of 2 with a limit of 2", got)
	}
	if th.Waiting(a) {
		t.Fatal("a is queued although it got what it wanted")
	}
	d1, d2 := rolling("d1", "a", fc.Now()), rolling("d2", "a", fc.Now())
	th.Started(a, d1, fc.Now())
	th.Started(a, d2, fc.Now())
	if got := th.Admit(b, 1, 0); got != 0 || !th.Waiting(b) {
		t.Fatalf("b got %d while 2 are in progress (waiting=%v)", got, th.Waiting(b))
	}
	// An update that does not finish the rollout frees nothing.
	th.observe(d1)
	if th.InProgress() != 2 {
		t.Fatalf("in progress = %d", th.InProgress())
	}
	// d1 done: the slot goes to b, who waited, not to a, who asks again.
	th.observe(rolledOut(d1))
	if _, woken := th.wake[b]; !woken {
		t.Fatal("the waiting policy was not woken when a slot freed up")
	}
	if got := th.Admit(a, 1, 0); got != 0 {
		t.Fatalf("a jumped the queue: got %d", got)
	}
	if got := th.Admit(b, 1, 0); got != 1 {
		t.Fatalf("b got %d", got)
	}
	if th.Waiting(b) {
		t.Fatal("b still queued after getting what it wanted")
	}
}

func TestThrottleSharesSlotsRoundRobin(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(3, fc)
	big, small1, small2 := owner("big"), owner("small1"), owner("small2")
	// Everything is taken; three policies queue up.
	th.Admit(owner("x"), 3, 0)
	for i, n := range []string{"x1", "x2", "x3"} {
		th.Started(owner("x"), rolling(n, "x", fc.Now()), fc.Now().Add(time.Duration(i)))
	}
	for _, o := range []types.NamespacedName{big, small1, small2} {
		want := 1
		if o == big {
			want = 10
		}
		if got := th.Admit(o, want, 0); got != 0 {
			t.Fatalf("%s got %d with no free slot", o, got)
		}
	}
	// All three slots free up at once: one each, not three to the first.
	for _, n := range []string{"x1", "x2", "x3"} {
		th.forget(rolling(n, "x", fc.Now()))
	}
	if got := th.Admit(big, 10, 0); got != 1 {
		t.Fatalf("big got %d of 3 free slots, want its round-robin share 1", got)
	}
	if got := th.Admit(small2, 1, 0); got != 1 {
		t.Fatalf("small2 got %d", got)
	}
	if got := th.Admit(small1, 1, 0); got != 1 {
		t.Fatalf("small1 got %d", got)
	}
}

func TestThrottlePerPolicyLimit(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(0, fc) // no manager-wide limit
	p := owner("p")
	if got := th.Admit(p, 20, 1); got != 1 {
		t.Fatalf("maxConcurrent 1: got %d", got)
	}
	d := rolling("d00", "p", fc.Now())
	th.Started(p, d, fc.Now())
	if got := th.Admit(p, 19, 1); got != 0 {
		t.Fatalf("the next one started while the previous is rolling out: %d", got)
	}
	if th.Waiting(p) {
		t.Fatal("a policy held by its own limit waits in the manager-wide queue")
	}
	th.observe(rolledOut(d))
	if _, woken := th.wake[p]; !woken {
		t.Fatal("the policy was not woken when its rollout finished")
	}
	if got := th.Admit(p, 19, 1); got != 1 {
		t.Fatalf("after the rollout: got %d", got)
	}
}

func TestThrottleReservationsCountUntilStartedOrCancelled(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(1, fc)
	if got := th.Admit(owner("a"), 1, 0); got != 1 {
		t.Fatal("no slot")
	}
	// The patch is on its way: nobody else gets the slot.
	if got := th.Admit(owner("b"), 1, 0); got != 0 {
		t.Fatal("a reserved slot was handed out twice")
	}
	th.Cancel(owner("a"), 1) // the patch failed
	if got := th.Admit(owner("b"), 1, 0); got != 1 {
		t.Fatal("a cancelled reservation was not given back")
	}
}

// A new manager learns what its predecessor left rolling from the
// workloads themselves, so a killed leader's successor keeps the limit.
func TestThrottleRebuildsFromTheWorkloads(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(1, fc)
	old := rolling("d", "prev", fc.Now().Add(-time.Minute))
	th.observe(old)
	if th.InProgress() != 1 {
		t.Fatal("a rollout of our restart was not counted")
	}
	if got := th.Admit(owner("other"), 1, 0); got != 0 {
		t.Fatal("the limit ignores a restart made before this manager started")
	}
	// A rollout that never ends holds its slot for the rollout timeout only.
	fc.Step(defaultRolloutTimeout)
	if got := th.Admit(owner("other"), 1, 0); got != 1 {
		t.Fatal("a stuck rollout holds its slot forever")
	}
	// A finished rollout, or one not restarted by us, is not counted.
	th2 := NewThrottle(1, fc)
	th2.observe(rolledOut(rolling("d", "prev", fc.Now())))
	foreign := rolling("e", "x", fc.Now())
	delete(foreign.Annotations, autorebootv1alpha1.RestartIDAnnotation)
	th2.observe(foreign)
	if th2.InProgress() != 0 {
		t.Fatalf("in progress = %d", th2.InProgress())
	}
}

func TestThrottleIgnoresAnOlderCopy(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(1, fc)
	before := rolledOut(rolling("d", "a", fc.Now().Add(-time.Hour)))
	th.Admit(owner("a"), 1, 0)
	th.Started(owner("a"), before, fc.Now())
	// The informer still shows the object before the patch: done, but
	// with the old stamp. That is not the end of this restart.
	th.observe(before)
	if th.InProgress() != 1 {
		t.Fatal("a copy from before the patch ended the restart")
	}
}

func TestRolloutDone(t *testing.T) {
	d := rolling("d", "a", throttleStart)
	if rolloutDone(d) {
		t.Fatal("an old pod left: not done")
	}
	if !rolloutDone(rolledOut(d)) {
		t.Fatal("rolled out and available: done")
	}
	notObserved := rolledOut(d)
	notObserved.Status.ObservedGeneration = 1
	if rolloutDone(notObserved) {
		t.Fatal("the controller has not seen the template yet: not done")
	}
	gaveUp := d.DeepCopy()
	gaveUp.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	if !rolloutDone(gaveUp) {
		t.Fatal("a Deployment past its progress deadline holds its slot")
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, UpdatedReplicas: 2, AvailableReplicas: 2, CurrentRevision: "a", UpdateRevision: "b"}}
	if rolloutDone(sts) {
		t.Fatal("StatefulSet between revisions: not done")
	}
	sts.Status.CurrentRevision = "b"
	if !rolloutDone(sts) {
		t.Fatal("StatefulSet on one revision: done")
	}
	ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 2}}
	if rolloutDone(ds) {
		t.Fatal("DaemonSet with an unavailable pod: not done")
	}
}

// A waiter that asks again (its safety requeue) keeps its place in line.
func TestThrottleWaiterKeepsItsPlace(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(1, fc)
	th.Admit(owner("x"), 1, 0)
	d := rolling("d", "x", fc.Now())
	th.Started(owner("x"), d, fc.Now())
	th.Admit(owner("first"), 1, 0)
	th.Admit(owner("second"), 1, 0)
	th.Admit(owner("first"), 1, 0) // asks again while nothing is free
	th.observe(rolledOut(d))
	if got := th.Admit(owner("second"), 1, 0); got != 0 {
		t.Fatal("the second in line overtook the first")
	}
	if got := th.Admit(owner("first"), 1, 0); got != 1 {
		t.Fatal("the first in line lost its place by asking again")
	}
	// A waiter that stops asking loses its place after waiterTTL.
	th2 := NewThrottle(1, fc)
	th2.Admit(owner("x"), 1, 0)
	th2.Started(owner("x"), d, fc.Now())
	th2.Admit(owner("gone"), 1, 0)
	fc.Step(waiterTTL / 2)
	th2.Admit(owner("here"), 1, 0)
	fc.Step(waiterTTL / 2)
	th2.forget(d)
	if got := th2.Admit(owner("here"), 1, 0); got != 1 {
		t.Fatal("a waiter that stopped asking still holds its place")
	}
}
