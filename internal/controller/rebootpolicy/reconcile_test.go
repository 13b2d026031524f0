package rebootpolicy

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/probe/probetest"
)

// writeLog records the order of writes the reconciler makes.
type writeLog struct {
	mu     sync.Mutex
	writes []string
	// conflicts status writes are refused with a Conflict.
	conflicts int
	// eventsAtPatch is how many events the recorder held at each target
	// patch.
	eventsAtPatch []int
}

// refuse reports whether the next status write is refused.
func (l *writeLog) refuse() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conflicts == 0 {
		return false
	}
	l.conflicts--
	return true
}

func (l *writeLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, s)
}

func (l *writeLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

type reconcileFixture struct {
	r   *Reconciler
	c   client.Client
	log *writeLog
	fc  *clocktesting.FakeClock
	req ctrl.Request
	// seen are the events drained from the fake recorder so far.
	seen []string
}

// newStatusWriterFor is a fresh status writer (a new leader's).
func newStatusWriterFor(c client.Client) *status.Writer { return status.NewWriter(c, c, FieldManager) }

func newReconcileFixture(t *testing.T, f *probetest.Probers, objs ...client.Object) *reconcileFixture {
	t.Helper()
	wl := &writeLog{}
	rec := events.NewFakeRecorder(100)
	c := fake.NewClientBuilder().WithScheme(testScheme()).
		WithStatusSubresource(&autorebootv1alpha1.RebootPolicy{}).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				wl.add("patch " + obj.GetName())
				wl.mu.Lock()
				wl.eventsAtPatch = append(wl.eventsAtPatch, len(rec.Events))
				wl.mu.Unlock()
				return c.Patch(ctx, obj, p, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				rbp := obj.(*autorebootv1alpha1.RebootPolicy)
				pending := "idle"
				if pendingFromStatus(rbp).any() {
					pending = "pending"
				}
				if wl.refuse() {
					wl.add("status refused")
					return apierrors.NewConflict(autorebootv1alpha1.GroupVersion.WithResource("rebootpolicies").GroupResource(), obj.GetName(), errors.New("stale"))
				}
				wl.add("status " + pending)
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	w, fc := probetest.StartWorkers(t, f, NewMetrics())
	r := &Reconciler{Client: c, Status: status.NewWriter(c, c, FieldManager), Events: status.Events{Recorder: rec},
		Clock: fc, Workers: w, Metrics: NewMetrics(), Throttle: NewThrottle(0, fc), requests: newRequestLog()}
	return &reconcileFixture{r: r, c: c, log: wl, fc: fc,
		req: ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "rbp"}}}
}

func testScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	return scheme
}

func (fx *reconcileFixture) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := fx.r.Reconcile(context.Background(), fx.req)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (fx *reconcileFixture) rbp(t *testing.T) *autorebootv1alpha1.RebootPolicy {
	t.Helper()
	var rbp autorebootv1alpha1.RebootPolicy
	if err := fx.c.Get(context.Background(), fx.req.NamespacedName, &rbp); err != nil {
		t.Fatal(err)
	}
	return &rbp
}

func (fx *reconcileFixture) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := fx.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func probePolicy() *autorebootv1alpha1.RebootPolicy {
	return &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rbp", UID: "uid-1", Generation: 1},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target:             autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			MinRestartInterval: &metav1.Duration{Duration: time.Minute},
			Policies: []autorebootv1alpha1.Policy{{Name: "health", Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(1)}},
				PeriodSeconds:    1,
				FailureThreshold: 1,
			}}}},
		},
	}
}

// rolledOutDeployment is a finished rollout of 2 replicas.
func rolledOutDeployment(created time.Time) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 1, CreationTimestamp: metav1.NewTime(created)},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2},
	}
}

func TestFireIsPersistedBeforeTheTargetIsPatched(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("health", fail)
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fx := newReconcileFixture(t, f, probePolicy(), rolledOutDeployment(created))
	fx.reconcile(t) // starts the worker
	for !fx.r.Workers.Snapshot(fx.req.NamespacedName)["health"].Unacked {
		probetest.Tick(t, fx.fc, fx.r.Workers, fx.req.NamespacedName, "health")
	}
	before := len(fx.log.get())
	fx.reconcile(t)
	got := fx.log.get()[before:]
	want := []string{"status pending", "patch web", "status idle"}
	if len(got) != len(want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("writes = %v, want %v", got, want)
		}
	}
	d := fx.deployment(t)
	if d.Annotations[autorebootv1alpha1.RestartIDAnnotation] == "" || d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] == "" {
		t.Fatalf("target not annotated: %v %v", d.Annotations, d.Spec.Template.Annotations)
	}
	if st := fx.rbp(t).Status; st.RestartCount != 1 {
		t.Fatalf("restartCount = %d", st.RestartCount)
	}
}

// The events of a fire are sent once a status write holding it succeeded,
// after the restart patch: a write refused as stale reports nothing (the
// retry finds the same transition and reports it, once).
func TestFireEventsFollowTheWriteThatRecordsThem(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("health", fail)
	fx := newReconcileFixture(t, f, probePolicy(), rolledOutDeployment(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)))
	fx.reconcile(t) // starts the worker
	for !fx.r.Workers.Snapshot(fx.req.NamespacedName)["health"].Unacked {
		probetest.Tick(t, fx.fc, fx.r.Workers, fx.req.NamespacedName, "health")
	}
	drainEvents(fx)
	fx.log.mu.Lock()
	fx.log.conflicts = 1
	fx.log.mu.Unlock()
	if res := fx.reconcile(t); res.RequeueAfter <= 0 {
		t.Fatal("a refused status write was not retried")
	}
	if hasEvent(fx, autorebootv1alpha1.EventTriggered) || hasEvent(fx, autorebootv1alpha1.EventProbeFailed) {
		t.Fatalf("events for a fire whose status write was refused: %v", fx.seen)
	}
	fx.seen = nil
	fx.reconcile(t)
	// Failed, fired and restarted in one pass: the policy's one event is a
	// warning telling all three, the target's tells its restart.
	if n, m := countEvents(fx, autorebootv1alpha1.EventTriggered), countEvents(fx, autorebootv1alpha1.EventProbeFailed); n != 0 || m != 0 {
		t.Fatalf("Triggered %d, ProbeFailed %d times, want them folded into Restarted: %v", n, m, fx.seen)
	}
	want := []string{
		"Normal Restarted restarted by RebootPolicy " + fx.req.Name + " (policies: health)",
		"Warning Restarted policy health fired on a failed probe: " + fx.rbp(t).Status.Policies[0].Message + "; restarted Deployment web (policies: health)",
	}
	if !slices.Equal(drainEvents(fx), want) {
		t.Fatalf("events\n got %q\nwant %q", fx.seen, want)
	}
	fx.log.mu.Lock()
	defer fx.log.mu.Unlock()
	if len(fx.log.eventsAtPatch) != 1 || fx.log.eventsAtPatch[0] != 0 {
		t.Fatalf("events queued at the restart patch: %v, want none", fx.log.eventsAtPatch)
	}
}

// pendingPolicy is a RebootPolicy whose status holds a pending trigger, as a
// leader that died right after persisting it leaves it.
func pendingPolicy(triggered time.Time) *autorebootv1alpha1.RebootPolicy {
	rbp := probePolicy()
	at := metav1.NewTime(triggered)
	rbp.Status.Policies = []autorebootv1alpha1.PolicyStatus{{Name: "health", LastResult: fail, PendingTrigger: true, LastTriggerTime: &at}}
	return rbp
}

func TestSuccessorRecognisesARestartWhoseStatusWasLost(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the fake clock's start
	cases := []struct {
		name        string
		restartID   func(rbp *autorebootv1alpha1.RebootPolicy) string
		wantPatched bool
		wantCount   int64
	}{
		{"patched for this trigger in the trigger's second: done, counted once", restartID, false, 1},
		{"patched for an older trigger in the same second: cooldown, still pending", func(*autorebootv1alpha1.RebootPolicy) string { return "rbp/older" }, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := probetest.NewProbers()
			f.SetResults("health", ok)
			triggered := now.Add(-2 * time.Second)
			rbp := pendingPolicy(triggered)
			dep := rolledOutDeployment(now.Add(-time.Hour))
			dep.Annotations = map[string]string{autorebootv1alpha1.RestartIDAnnotation: tc.restartID(rbp)}
			dep.Spec.Template.Annotations = map[string]string{autorebootv1alpha1.RestartedAtAnnotation: triggered.Format(time.RFC3339)}
			fx := newReconcileFixture(t, f, rbp, dep)
			rv := fx.deployment(t).ResourceVersion
			res := fx.reconcile(t)
			patched := fx.deployment(t).ResourceVersion != rv
			st := fx.rbp(t).Status
			if patched != tc.wantPatched || st.RestartCount != tc.wantCount {
				t.Fatalf("patched=%v restartCount=%d, want %v %d", patched, st.RestartCount, tc.wantPatched, tc.wantCount)
			}
			_, pending := pendingSince(st.Policies)
			if tc.wantCount == 1 && pending {
				t.Fatal("trigger still pending after its restart was recognised")
			}
			if tc.wantCount == 0 && (!pending || res.RequeueAfter <= 0) {
				t.Fatalf("trigger dropped or not rescheduled: pending=%v requeue=%s", pending, res.RequeueAfter)
			}
			// A second reconcile changes nothing more.
			fx.reconcile(t)
			if st2 := fx.rbp(t).Status; st2.RestartCount != tc.wantCount {
				t.Fatalf("restartCount moved to %d", st2.RestartCount)
			}
		})
	}
}

func TestPendingTriggerWaitsForAPausedTarget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	dep := rolledOutDeployment(now.Add(-time.Hour))
	dep.Spec.Paused = true
	fx := newReconcileFixture(t, f, pendingPolicy(now.Add(-time.Second)), dep)
	fx.reconcile(t)
	if _, pending := pendingSince(fx.rbp(t).Status.Policies); !pending {
		t.Fatal("trigger dropped while the target is paused")
	}
	if fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] != "" {
		t.Fatal("paused target was patched")
	}
	d := fx.deployment(t)
	d.Spec.Paused = false
	if err := fx.c.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	fx.reconcile(t)
	st := fx.rbp(t).Status
	if _, pending := pendingSince(st.Policies); pending || st.RestartCount != 1 {
		t.Fatalf("after resume: pending=%v restartCount=%d", pending, st.RestartCount)
	}
	if fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] == "" {
		t.Fatal("resumed target not restarted")
	}
}

func TestPendingTriggerWaitsForAMissingTarget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	fx := newReconcileFixture(t, f, pendingPolicy(now.Add(-10*time.Second)))
	fx.reconcile(t)
	rbp := fx.rbp(t)
	if _, pending := pendingSince(rbp.Status.Policies); !pending {
		t.Fatal("trigger dropped while no target exists")
	}
	if c := conditionOf(rbp, autorebootv1alpha1.ConditionDegraded); c == nil || c.Reason != autorebootv1alpha1.ReasonTargetNotFound {
		t.Fatalf("Degraded = %+v, want TargetNotFound", c)
	}
	// A workload created after the trigger already runs fresh pods: the
	// trigger is done without a restart.
	if err := fx.c.Create(context.Background(), rolledOutDeployment(now.Add(-5*time.Second))); err != nil {
		t.Fatal(err)
	}
	fx.reconcile(t)
	st := fx.rbp(t).Status
	if _, pending := pendingSince(st.Policies); pending || st.RestartCount != 0 {
		t.Fatalf("after the target appeared: pending=%v restartCount=%d", pending, st.RestartCount)
	}
	if fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] != "" {
		t.Fatal("a target created after the trigger was restarted")
	}
}

func conditionOf(rbp *autorebootv1alpha1.RebootPolicy, typ string) *metav1.Condition {
	for i := range rbp.Status.Conditions {
		if rbp.Status.Conditions[i].Type == typ {
			return &rbp.Status.Conditions[i]
		}
	}
	return nil
}

// Two restarts at the same clock reading must still change the pod
// template, or the second rolls nothing.
func TestSecondRestartInTheSameInstantChangesTheTemplate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the fake clock's start
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := pendingPolicy(now)
	rbp.Spec.MinRestartInterval = &metav1.Duration{}
	dep := rolledOutDeployment(now.Add(-time.Hour))
	dep.Annotations = map[string]string{autorebootv1alpha1.RestartIDAnnotation: "rbp/an-earlier-trigger"}
	dep.Spec.Template.Annotations = map[string]string{autorebootv1alpha1.RestartedAtAnnotation: restartStamp(now)}
	fx := newReconcileFixture(t, f, rbp, dep)
	fx.reconcile(t)
	got := fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
	if got == restartStamp(now) {
		t.Fatalf("restartedAt unchanged (%s): the second restart would roll nothing", got)
	}
	if st := fx.rbp(t).Status; st.RestartCount != 1 {
		t.Fatalf("restartCount = %d", st.RestartCount)
	}
}

func TestRestartStampKeepsSubSeconds(t *testing.T) {
	a := time.Date(2026, 1, 1, 0, 0, 1, 100, time.UTC)
	b := a.Add(400 * time.Millisecond)
	if restartStamp(a) == restartStamp(b) {
		t.Fatalf("two restarts in one second share the stamp %s", restartStamp(a))
	}
	back, err := time.Parse(time.RFC3339, restartStamp(b))
	if err != nil || !back.Equal(b) {
		t.Fatalf("stamp %s does not parse back as RFC 3339: %v %v", restartStamp(b), back, err)
	}
}

// The cooldown on the injected clock: a trigger within minRestartInterval
// waits exactly the rest of it, then restarts once.
func TestCooldownWaitsTheRestOfTheIntervalOnTheInjectedClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the fake clock's start
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	dep := rolledOutDeployment(now.Add(-time.Hour))
	lastRestart := now.Add(-20 * time.Second)
	dep.Spec.Template.Annotations = map[string]string{autorebootv1alpha1.RestartedAtAnnotation: lastRestart.Format(time.RFC3339Nano)}
	fx := newReconcileFixture(t, f, pendingPolicy(now.Add(-time.Second)), dep)
	res := fx.reconcile(t)
	if res.RequeueAfter != 40*time.Second {
		t.Fatalf("requeue after %s, want the 40s left of the 1m cooldown", res.RequeueAfter)
	}
	if got := fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; got != lastRestart.Format(time.RFC3339Nano) {
		t.Fatalf("restarted within the cooldown: %s", got)
	}
	fx.fc.Step(39 * time.Second)
	if res := fx.reconcile(t); res.RequeueAfter != time.Second {
		t.Fatalf("one second before the end: requeue after %s", res.RequeueAfter)
	}
	fx.fc.Step(time.Second)
	fx.reconcile(t)
	got, err := time.Parse(time.RFC3339Nano, fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation])
	if err != nil || !got.Equal(lastRestart.Add(time.Minute)) {
		t.Fatalf("restarted at %s (%v), want exactly when the cooldown ended, %s", got, err, lastRestart.Add(time.Minute))
	}
	if st := fx.rbp(t).Status; st.RestartCount != 1 {
		t.Fatalf("restartCount = %d", st.RestartCount)
	}
}

// Setup's status writer (status.NewReporting, by Name) and the target
// patches (FieldManager) must write as one field manager.
func TestFieldManagerIsTheKits(t *testing.T) {
	if FieldManager != status.FieldOwner(Name) || FieldManager != "runbook-rebootpolicy" {
		t.Errorf("field manager %q, want status.FieldOwner(%q) = runbook-rebootpolicy", FieldManager, Name)
	}
}
