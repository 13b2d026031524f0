package rebootpolicy

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// refsPolicy is a referenced trigger that reads nothing on a timer within
// a test (an hour's period): what it sees comes from the ConfigMap watch
// and the target watch.
func refsPolicy() autorebootv1alpha1.Policy {
	return autorebootv1alpha1.Policy{Name: "refs", Trigger: autorebootv1alpha1.Trigger{
		Referenced: &autorebootv1alpha1.ReferencedTrigger{PeriodSeconds: 3600}}}
}

func envFromKey(cm, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: key}}}
}

func createConfigMap(t *testing.T, ns, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := k8s.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func setData(t *testing.T, ns, name, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			return err
		}
		cm.Data[key] = value
		return k8s.Update(context.Background(), &cm)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// createReferencingTarget creates a rolled-out Deployment whose container
// has env.
func createReferencingTarget(t *testing.T, ns, name string, env ...corev1.EnvVar) *appsv1.Deployment {
	t.Helper()
	dep := newDeployment(ns, name)
	dep.Spec.Template.Spec.Containers[0].Env = env
	if err := k8s.Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	markRolledOut(t, dep)
	return dep
}

// trackedTargets waits until the referenced policy has a baseline for n
// targets and returns it.
func trackedTargets(t *testing.T, ns, name string, n int) []autorebootv1alpha1.ReferencedTargetStatus {
	t.Helper()
	var out []autorebootv1alpha1.ReferencedTargetStatus
	NewWithT(t).Eventually(func(g Gomega) {
		rbp := getRBP(t, ns, name)
		g.Expect(rbp.Status.Policies).To(HaveLen(1))
		ps := rbp.Status.Policies[0]
		g.Expect(ps.LastResult).To(Equal(autorebootv1alpha1.ResultSuccess), "policy %+v", ps)
		g.Expect(ps.Targets).To(HaveLen(n))
		for _, ts := range ps.Targets {
			g.Expect(ts.Fingerprint).To(HavePrefix("h1."))
		}
		out = ps.Targets
	}, timeout, interval).Should(Succeed())
	return out
}

// observed is how many observations the policy's worker has published.
func observed(ns, name, policy string) uint64 {
	return workers.Snapshot(types.NamespacedName{Namespace: ns, Name: name})[policy].Observed
}

func deploymentStamp(t *testing.T, ns, name string) string {
	t.Helper()
	var d appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		t.Fatal(err)
	}
	return restartedAt(&d)
}

func TestReferencedKeyChangeRestartsUnreferencedKeyDoesNot(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "refs-key")
	createConfigMap(t, ns, "app", map[string]string{"used": "1", "unused": "a"})
	createReferencingTarget(t, ns, "web", envFromKey("app", "used"))
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), refsPolicy()))).To(Succeed())
	trackedTargets(t, ns, "rbp", 1)

	// An unreferenced key: the watch wakes the worker, which reads the
	// ConfigMap and sees nothing that matters.
	before := observed(ns, "rbp", "refs")
	setData(t, ns, "app", "unused", "b")
	g.Eventually(func() uint64 { return observed(ns, "rbp", "refs") }, timeout, interval).Should(BeNumerically(">", before))
	g.Expect(deploymentStamp(t, ns, "web")).To(BeEmpty(), "a change of an unreferenced key restarted the target")
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(BeZero())

	// The referenced key: one restart.
	setData(t, ns, "app", "used", "2")
	g.Eventually(func() string { return deploymentStamp(t, ns, "web") }, timeout, interval).ShouldNot(BeEmpty())
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	// The fire and its restart in one event.
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement("policy refs fired: Deployment web: ConfigMap app: key used changed; restarted Deployment web (policies: refs (ConfigMap app: key used changed))"))
}

func TestReferencedNewVolumeReferenceStartsTracking(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "refs-volume")
	createConfigMap(t, ns, "a", map[string]string{"used": "1"})
	createConfigMap(t, ns, "b", map[string]string{"file.conf": "x"})
	createReferencingTarget(t, ns, "web", envFromKey("a", "used"))
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), refsPolicy()))).To(Succeed())
	first := trackedTargets(t, ns, "rbp", 1)[0]

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var d appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "b"}}}}}
		return k8s.Update(ctx, &d)
	})).To(Succeed())
	// A new reference is a new baseline, not a restart (the template
	// change rolls the pods by itself).
	g.Eventually(func(g Gomega) {
		ts := getRBP(t, ns, "rbp").Status.Policies[0].Targets
		g.Expect(ts).To(HaveLen(1))
		g.Expect(ts[0].References).NotTo(Equal(first.References))
	}, timeout, interval).Should(Succeed())
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(BeZero())
	markRolledOut(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})

	setData(t, ns, "b", "file.conf", "y")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
}

func TestReferencedSettleDelayMergesThreeEdits(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "refs-settle")
	createConfigMap(t, ns, "app", map[string]string{"used": "0"})
	createReferencingTarget(t, ns, "web", envFromKey("app", "used"))
	rbp := newRBP(ns, "rbp", webTarget(), refsPolicy())
	rbp.Spec.SettleDelay = &metav1.Duration{Duration: 4 * time.Second}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	trackedTargets(t, ns, "rbp", 1)

	for i := 1; i <= 3; i++ {
		setData(t, ns, "app", "used", fmt.Sprint(i))
	}
	// Pending and settling, visible in status.
	g.Eventually(func(g Gomega) {
		st := getRBP(t, ns, "rbp").Status
		g.Expect(st.PendingRestarts).To(Equal(int32(1)))
		g.Expect(st.NextRestartTime).NotTo(BeNil())
		g.Expect(condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionReady).Reason).To(Equal(autorebootv1alpha1.ReasonSettling))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	// All three edits were merged: nothing is left pending.
	g.Eventually(func(g Gomega) {
		st := getRBP(t, ns, "rbp").Status
		g.Expect(st.PendingRestarts).To(BeZero())
		g.Expect(st.Policies[0].Targets[0].PendingTrigger).To(BeFalse())
	}, timeout, interval).Should(Succeed())
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(Equal(int64(1)))
}

func TestReferencedFireOutsideTheWindowRestartsAtTheOpening(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "refs-window")
	createConfigMap(t, ns, "app", map[string]string{"used": "0"})
	createReferencingTarget(t, ns, "web", envFromKey("app", "used"))
	rbp := newRBP(ns, "rbp", webTarget(), refsPolicy())
	// Opens 8 s from now (UTC wall clock; a window wrapping past midnight
	// works the same) and stays open for an hour.
	opening := time.Now().UTC().Add(8 * time.Second).Truncate(time.Second)
	rbp.Spec.RestartSchedule = &weeklyv1alpha1.Schedule{TimeZone: "UTC", Windows: []weeklyv1alpha1.Window{{
		From: opening.Format("15:04:05"), To: opening.Add(time.Hour).Format("15:04:05")}}}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	trackedTargets(t, ns, "rbp", 1)

	setData(t, ns, "app", "used", "1")
	g.Eventually(func() string {
		return condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionReady).Reason
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonOutsideWindow))
	g.Expect(getRBP(t, ns, "rbp").Status.NextRestartTime.Time.Equal(opening)).To(BeTrue(), "nextRestartTime %v, want %s",
		getRBP(t, ns, "rbp").Status.NextRestartTime, opening)
	g.Eventually(func() string { return deploymentStamp(t, ns, "web") }, timeout, interval).ShouldNot(BeEmpty())
	at, err := time.Parse(time.RFC3339, deploymentStamp(t, ns, "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at.Before(opening)).To(BeFalse(), "restarted at %s, before the window opened at %s", at, opening)
}

// A time zone the CRD's pattern accepts but no time zone database knows is
// a condition from the first reconcile (the same reason NSScaler gives),
// and fixing it clears it.
func TestUnknownTimeZoneIsAnInvalidScheduleCondition(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "refs-badzone")
	createConfigMap(t, ns, "app", map[string]string{"used": "0"})
	createReferencingTarget(t, ns, "web", envFromKey("app", "used"))
	rbp := newRBP(ns, "rbp", webTarget(), refsPolicy())
	rbp.Spec.RestartSchedule = &weeklyv1alpha1.Schedule{TimeZone: "Europe/Atlantis", Windows: []weeklyv1alpha1.Window{{From: "00:00", To: "24:00"}}}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionTrue, autorebootv1alpha1.ReasonInvalidSchedule}))
		g.Expect(c.Message).To(ContainSubstring(`restartSchedule.timeZone "Europe/Atlantis" is not a known IANA time zone`))
	}, timeout, interval).Should(Succeed())

	updateRBP(t, ns, "rbp", func(r *autorebootv1alpha1.RebootPolicy) { r.Spec.RestartSchedule.TimeZone = "Atlantic/Reykjavik" })
	g.Eventually(func() string {
		return condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded).Reason
	}, timeout, interval).ShouldNot(Equal(autorebootv1alpha1.ReasonInvalidSchedule))
}

// rolloutSim plays the Deployment controller of a namespace: a Deployment
// whose generation is ahead of its observed generation is rolling out;
// after hold polls the rollout finishes. It records how many rolled out at
// once and every restartedAt stamp each Deployment had.
type rolloutSim struct {
	ns         string
	hold       int
	maxRolling int
	seen       map[string]int
	stamps     map[string][]string
}

func newRolloutSim(ns string, hold int) *rolloutSim {
	return &rolloutSim{ns: ns, hold: hold, seen: map[string]int{}, stamps: map[string][]string{}}
}

// step is one poll; it returns how many Deployments were restarted so far.
func (s *rolloutSim) step(g Gomega) int {
	var list appsv1.DeploymentList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(s.ns))).To(Succeed())
	rolling := 0
	for i := range list.Items {
		d := &list.Items[i]
		if st := restartedAt(d); st != "" {
			if prev := s.stamps[d.Name]; len(prev) == 0 || prev[len(prev)-1] != st {
				s.stamps[d.Name] = append(prev, st)
			}
		}
		if d.Status.ObservedGeneration >= d.Generation {
			continue
		}
		rolling++
		if s.seen[d.Name]++; s.seen[d.Name] >= s.hold {
			n := *d.Spec.Replicas
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
			if k8s.Status().Update(context.Background(), d) == nil {
				delete(s.seen, d.Name)
			}
		}
	}
	s.maxRolling = max(s.maxRolling, rolling)
	return len(s.stamps)
}

// run polls until every one of n Deployments was restarted and rolled out.
func (s *rolloutSim) run(t *testing.T, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(s.step(g)).To(Equal(n))
		g.Expect(s.seen).To(BeEmpty())
	}, 3*timeout, 50*time.Millisecond).Should(Succeed())
}

func (s *rolloutSim) expectEachOnce(t *testing.T, n int) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(s.stamps).To(HaveLen(n))
	for name, st := range s.stamps {
		g.Expect(st).To(HaveLen(1), "%s was restarted %d times: %v", name, len(st), st)
	}
}

// createFleet creates n rolled-out Deployments (tier=front) that all
// reference the ConfigMap shared by envFrom.
func createFleet(t *testing.T, ns string, n int) {
	t.Helper()
	createConfigMap(t, ns, "shared", map[string]string{"v": "0"})
	for i := range n {
		dep := newDeployment(ns, fmt.Sprintf("d%02d", i))
		dep.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}
		if err := k8s.Create(context.Background(), dep); err != nil {
			t.Fatal(err)
		}
		markRolledOut(t, dep)
	}
}

func fleetTarget() autorebootv1alpha1.TargetRef {
	return autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "front"}}}
}

func TestReferencedSelectorMaxConcurrentOneRestartsOneAfterAnother(t *testing.T) {
	const n = 20
	g := NewWithT(t)
	ns := createNamespace(t, "refs-fleet")
	createFleet(t, ns, n)
	rbp := newRBP(ns, "rbp", fleetTarget(), refsPolicy())
	rbp.Spec.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: ptr.To[int32](1)}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	trackedTargets(t, ns, "rbp", n)

	sim := newRolloutSim(ns, 2)
	setData(t, ns, "shared", "v", "1")
	sim.run(t, n)
	g.Expect(sim.maxRolling).To(Equal(1), "two Deployments rolled out at once")
	sim.expectEachOnce(t, n)
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(n)))
	g.Expect(getRBP(t, ns, "rbp").Status.PendingRestarts).To(BeZero())
}
