package rebootpolicy

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	rbpcontroller "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
)

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
)

// healthServer answers 200 until failing is set, then 500. All health
// servers share the suite's one external server, the only probe address
// the manager allows besides the databases (see TestMain).
type healthServer struct {
	prefix  string
	failing atomic.Bool
	hits    atomic.Int64
}

func newHealthServer(t *testing.T) *healthServer {
	h := &healthServer{}
	h.prefix = external.handle(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.hits.Add(1)
		if h.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	return h
}

func (h *healthServer) probe(path string, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: external.get(h.prefix + path)},
		PeriodSeconds:    1,
		TimeoutSeconds:   1,
		FailureThreshold: failureThreshold,
	}
}

func newRBP(ns, name string, target autorebootv1alpha1.TargetRef, policies ...autorebootv1alpha1.Policy) *autorebootv1alpha1.RebootPolicy {
	return &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target:             target,
			Policies:           policies,
			MinRestartInterval: &metav1.Duration{Duration: 0},
		},
	}
}

// createRBP creates rbp and deletes it when the test ends (envtest has no
// namespace controller, so deleting the namespace would leave it running).
func createRBP(t *testing.T, rbp *autorebootv1alpha1.RebootPolicy) error {
	t.Helper()
	if err := k8s.Create(context.Background(), rbp); err != nil {
		return err
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rbp) })
	return nil
}

// updateRBP changes the spec, retrying on conflicts with status writes.
func updateRBP(t *testing.T, ns, name string, change func(*autorebootv1alpha1.RebootPolicy)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := getRBP(t, ns, name)
		change(cur)
		return k8s.Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func workerKeysOf(ns, name string) []string {
	var out []string
	for _, k := range workers.Keys() {
		if strings.HasPrefix(k, ns+"/"+name+"/") {
			out = append(out, k)
		}
	}
	return out
}

func TestWorkerLifecycleFollowsTheObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "lifecycle")
	srv := newHealthServer(t)
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	markRolledOut(t, dep)
	rbp := newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		autorebootv1alpha1.Policy{Name: "a", Trigger: autorebootv1alpha1.Trigger{Probe: srv.probe("/a", 3)}},
		autorebootv1alpha1.Policy{Name: "b", Trigger: autorebootv1alpha1.Trigger{Probe: srv.probe("/b", 3)}},
	)
	g.Expect(createRBP(t, rbp)).To(Succeed())
	g.Eventually(func() []string { return workerKeysOf(ns, "rbp") }, timeout, interval).Should(HaveLen(2))
	before := workerKeysOf(ns, "rbp")
	g.Eventually(func() string {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}, timeout, interval).Should(Equal("True/Reconciled"))

	// Update policy b only: a's worker keeps its key (same hash), b's changes.
	updateRBP(t, ns, "rbp", func(r *autorebootv1alpha1.RebootPolicy) { r.Spec.Policies[1].Trigger.Probe.HTTPGet.Path = "/b2" })
	g.Eventually(func() bool {
		keys := workerKeysOf(ns, "rbp")
		return len(keys) == 2 && keys[0] == before[0] && keys[1] != before[1]
	}, timeout, interval).Should(BeTrue(), "only b's worker restarts")

	// Remove policy a from the spec: its worker stops.
	updateRBP(t, ns, "rbp", func(r *autorebootv1alpha1.RebootPolicy) { r.Spec.Policies = r.Spec.Policies[1:] })
	g.Eventually(func() []string { return workerKeysOf(ns, "rbp") }, timeout, interval).Should(HaveLen(1))
	g.Eventually(func() int { return len(getRBP(t, ns, "rbp").Status.Policies) }, timeout, interval).Should(Equal(1))

	// Suspend stops every worker; resume starts them again.
	updateRBP(t, ns, "rbp", func(r *autorebootv1alpha1.RebootPolicy) { r.Spec.Suspend = true })
	g.Eventually(func() []string { return workerKeysOf(ns, "rbp") }, timeout, interval).Should(BeEmpty())
	g.Eventually(func() string {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return c.Reason
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonSuspended))
	updateRBP(t, ns, "rbp", func(r *autorebootv1alpha1.RebootPolicy) { r.Spec.Suspend = false })
	g.Eventually(func() []string { return workerKeysOf(ns, "rbp") }, timeout, interval).Should(HaveLen(1))

	// Delete stops the workers.
	g.Expect(k8s.Delete(ctx, getRBP(t, ns, "rbp"))).To(Succeed())
	g.Eventually(func() []string { return workerKeysOf(ns, "rbp") }, timeout, interval).Should(BeEmpty())
}

func TestSteadyProbesWriteNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "steady")
	srv := newHealthServer(t)
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	markRolledOut(t, dep)
	rbp := newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		autorebootv1alpha1.Policy{Name: "a", Trigger: autorebootv1alpha1.Trigger{Probe: srv.probe("/", 3)}})
	g.Expect(createRBP(t, rbp)).To(Succeed())
	g.Eventually(func() string { return policyResult(t, ns, "rbp", "a") }, timeout, interval).Should(Equal(autorebootv1alpha1.ResultSuccess))
	rv := getRBP(t, ns, "rbp").ResourceVersion
	hits := srv.hits.Load()
	// Probes keep running every second, the object is not written.
	g.Eventually(func() int64 { return srv.hits.Load() }, timeout, interval).Should(BeNumerically(">=", hits+4))
	g.Expect(getRBP(t, ns, "rbp").ResourceVersion).To(Equal(rv), "status written although nothing changed")
}

func policyResult(t *testing.T, ns, name, policy string) string {
	for _, ps := range getRBP(t, ns, name).Status.Policies {
		if ps.Name == policy {
			return ps.LastResult
		}
	}
	return ""
}

func TestTwoPoliciesOnTwoTargetsAreIndependent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "independent")
	srvA, srvB := newHealthServer(t), newHealthServer(t)
	for _, name := range []string{"a", "b"} {
		dep := newDeployment(ns, name)
		g.Expect(k8s.Create(ctx, dep)).To(Succeed())
		markRolledOut(t, dep)
	}
	g.Expect(createRBP(t, newRBP(ns, "rbp-a", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "a"},
		autorebootv1alpha1.Policy{Name: "health", Trigger: autorebootv1alpha1.Trigger{Probe: srvA.probe("/", 2)}}))).To(Succeed())
	g.Expect(createRBP(t, newRBP(ns, "rbp-b", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "b"},
		autorebootv1alpha1.Policy{Name: "health", Trigger: autorebootv1alpha1.Trigger{Probe: srvB.probe("/", 2)}}))).To(Succeed())
	g.Eventually(func() string { return policyResult(t, ns, "rbp-a", "health") + policyResult(t, ns, "rbp-b", "health") }, timeout, interval).
		Should(Equal("SuccessSuccess"))

	srvA.failing.Store(true)
	depA := &appsv1.Deployment{}
	g.Eventually(func() string {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, depA)).To(Succeed())
		return restartedAt(depA)
	}, timeout, interval).ShouldNot(BeEmpty())
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp-a").Status.RestartCount }, timeout, interval).Should(BeNumerically(">=", 1))
	// The fire is told by its own Triggered event or, when the restart
	// followed in the same pass, by the Restarted one.
	g.Eventually(func() []string { return eventNotes(ns, "rbp-a", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement(HaveSuffix("restarted Deployment a (policies: health)")))
	g.Expect(append(eventNotes(ns, "rbp-a", autorebootv1alpha1.EventTriggered), eventNotes(ns, "rbp-a", autorebootv1alpha1.EventRestarted)...)).To(
		ContainElement(ContainSubstring("policy health fired")))
	g.Eventually(func() []string { return eventReasons(ns, "a") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventRestarted))

	depB := &appsv1.Deployment{}
	g.Consistently(func() string {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, depB)).To(Succeed())
		return restartedAt(depB)
	}, 3*time.Second, interval).Should(BeEmpty(), "b restarted by a's failure")
	g.Expect(getRBP(t, ns, "rbp-b").Status.RestartCount).To(BeZero())
	g.Expect(policyResult(t, ns, "rbp-b", "health")).To(Equal(autorebootv1alpha1.ResultSuccess))
}

// watchPolicy fires when the ConfigMap's data changes.
func watchPolicy(cm string) autorebootv1alpha1.Policy {
	return autorebootv1alpha1.Policy{Name: "config", Trigger: autorebootv1alpha1.Trigger{
		Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: cm, PeriodSeconds: 1}}}
}

func waitBaseline(t *testing.T, ns, name string) {
	NewWithT(t).Eventually(func() string {
		for _, ps := range getRBP(t, ns, name).Status.Policies {
			return ps.Fingerprint
		}
		return ""
	}, timeout, interval).ShouldNot(BeEmpty())
}

func changeConfigMap(t *testing.T, ns, name, value string) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": value}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		return
	}
	cm.Data = map[string]string{"k": value}
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
}

func TestRestartPatchPerKind(t *testing.T) {
	for _, tc := range []struct {
		kind autorebootv1alpha1.TargetKind
		obj  func(ns string) client.Object
	}{
		{autorebootv1alpha1.KindDeployment, func(ns string) client.Object { return newDeployment(ns, "target") }},
		{autorebootv1alpha1.KindStatefulSet, func(ns string) client.Object { return newStatefulSet(ns, "target") }},
		{autorebootv1alpha1.KindDaemonSet, func(ns string) client.Object { return newDaemonSet(ns, "target") }},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := createNamespace(t, "patch-"+strings.ToLower(string(tc.kind)))
			obj := tc.obj(ns)
			g.Expect(k8s.Create(ctx, obj)).To(Succeed())
			markRolledOut(t, obj)
			changeConfigMap(t, ns, "settings", "v1")
			g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: tc.kind, Name: "target"}, watchPolicy("settings")))).To(Succeed())
			waitBaseline(t, ns, "rbp")
			before := tc.obj(ns)
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), before)).To(Succeed())
			g.Expect(restartedAt(before)).To(BeEmpty(), "restarted on the baseline")

			changeConfigMap(t, ns, "settings", "v2")
			after := tc.obj(ns)
			g.Eventually(func() string {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), after)).To(Succeed())
				return restartedAt(after)
			}, timeout, interval).ShouldNot(BeEmpty())
			_, err := time.Parse(time.RFC3339, restartedAt(after))
			g.Expect(err).NotTo(HaveOccurred())

			// The patch touched only the annotation, under our field manager.
			g.Expect(after.GetGeneration()).To(Equal(before.GetGeneration() + 1))
			var managers []string
			for _, mf := range after.GetManagedFields() {
				managers = append(managers, mf.Manager)
				if mf.Manager == rbpcontroller.FieldManager {
					g.Expect(mf.FieldsV1.GetRawString()).To(ContainSubstring(autorebootv1alpha1.RestartedAtAnnotation))
					g.Expect(mf.FieldsV1.GetRawString()).NotTo(ContainSubstring("containers"))
				}
			}
			g.Expect(managers).To(ContainElement(rbpcontroller.FieldManager))
			g.Expect(templateWithoutRestart(after)).To(Equal(templateWithoutRestart(before)))

			// Status follows the patch in the same reconcile.
			g.Eventually(func(g Gomega) {
				st := getRBP(t, ns, "rbp").Status
				g.Expect(st.RestartCount).To(Equal(int64(1)))
				g.Expect(st.LastRestartTime).NotTo(BeNil())
				g.Expect(st.Policies[0].LastTriggerTime).NotTo(BeNil())
				g.Expect(st.Policies[0].PendingTrigger).To(BeFalse())
			}, timeout, interval).Should(Succeed())
		})
	}
}

func templateWithoutRestart(obj client.Object) corev1.PodTemplateSpec {
	var tmpl corev1.PodTemplateSpec
	switch o := obj.(type) {
	case *appsv1.Deployment:
		tmpl = *o.Spec.Template.DeepCopy()
	case *appsv1.StatefulSet:
		tmpl = *o.Spec.Template.DeepCopy()
	case *appsv1.DaemonSet:
		tmpl = *o.Spec.Template.DeepCopy()
	}
	delete(tmpl.Annotations, autorebootv1alpha1.RestartedAtAnnotation)
	if len(tmpl.Annotations) == 0 {
		tmpl.Annotations = nil
	}
	return tmpl
}

func TestPausedDeploymentIsNotRestarted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "paused")
	dep := newDeployment(ns, "web")
	dep.Spec.Paused = true
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	markRolledOut(t, dep)
	changeConfigMap(t, ns, "settings", "v1")
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, watchPolicy("settings")))).To(Succeed())
	g.Eventually(func() string {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}, timeout, interval).Should(Equal("True/" + autorebootv1alpha1.ReasonTargetPaused))
	waitBaseline(t, ns, "rbp")
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() []string { return eventReasons(ns, "rbp") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventRestartSkipped))
	g.Eventually(func() []string { return eventReasons(ns, "web") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventRestartSkipped))
	cur := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), cur)).To(Succeed())
	g.Expect(restartedAt(cur)).To(BeEmpty())
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(BeZero())
	// The trigger is remembered, not dropped: resuming the rollout restarts
	// the Deployment once.
	g.Expect(getRBP(t, ns, "rbp").Status.Policies[0].PendingTrigger).To(BeTrue())
	g.Expect(k8s.Patch(ctx, cur, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`)))).To(Succeed())
	markRolledOut(t, cur)
	g.Eventually(func() string {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), cur)).To(Succeed())
		return restartedAt(cur)
	}, timeout, interval).ShouldNot(BeEmpty())
	g.Eventually(func() bool { return getRBP(t, ns, "rbp").Status.Policies[0].PendingTrigger }, timeout, interval).Should(BeFalse())
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(Equal(int64(1)))
	g.Expect(cur.Annotations[autorebootv1alpha1.RestartIDAnnotation]).To(HavePrefix("rbp/"))
}

func TestOnDeleteStatefulSetIsNotRestarted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "ondelete")
	sts := newStatefulSet(ns, "db")
	sts.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	g.Expect(k8s.Create(ctx, sts)).To(Succeed())
	markRolledOut(t, sts)
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindStatefulSet, Name: "db"}, watchPolicy("settings")))).To(Succeed())
	g.Eventually(func() string {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded)
		if c == nil {
			return ""
		}
		return c.Reason
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonTargetOnDelete))
}

func TestCooldownDefersAndRemembersTheTrigger(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "cooldown")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	markRolledOut(t, dep)
	changeConfigMap(t, ns, "settings", "v1")
	rbp := newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, watchPolicy("settings"))
	rbp.Spec.MinRestartInterval = &metav1.Duration{Duration: 5 * time.Second}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	waitBaseline(t, ns, "rbp")
	// Restarted a moment ago: the cooldown of 5s is running (the exact
	// arithmetic is a fake-clock unit test; here the real controller shows
	// the trigger kept and acted on once).
	last := time.Now().UTC().Truncate(time.Second)
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
	dep.Spec.Template.Annotations = map[string]string{autorebootv1alpha1.RestartedAtAnnotation: last.Format(time.RFC3339)}
	g.Expect(k8s.Update(ctx, dep)).To(Succeed())
	markRolledOut(t, dep)
	changeConfigMap(t, ns, "settings", "v2")
	// The trigger is pending, not lost, and the target is untouched.
	g.Eventually(func() bool {
		st := getRBP(t, ns, "rbp").Status
		return st.Policies[0].PendingTrigger
	}, timeout, interval).Should(BeTrue())
	c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(autorebootv1alpha1.ReasonRestartPending))
	cur := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), cur)).To(Succeed())
	g.Expect(restartedAt(cur)).To(Equal(last.Format(time.RFC3339)))
	// After the cooldown the remembered trigger restarts the target once.
	g.Eventually(func() string {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), cur)).To(Succeed())
		return restartedAt(cur)
	}, timeout, interval).ShouldNot(Equal(last.Format(time.RFC3339)))
	at, err := time.Parse(time.RFC3339, restartedAt(cur))
	g.Expect(err).NotTo(HaveOccurred())
	// last is truncated to the second, so before the real last restart.
	g.Expect(at.Sub(last)).To(BeNumerically(">=", 5*time.Second), "restarted within the cooldown")
	g.Eventually(func() bool { return getRBP(t, ns, "rbp").Status.Policies[0].PendingTrigger }, timeout, interval).Should(BeFalse())
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(Equal(int64(1)))
}

func TestProgressingRolloutDefersTheRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "progress")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	// No markRolledOut: the rollout has not finished.
	changeConfigMap(t, ns, "settings", "v1")
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, watchPolicy("settings")))).To(Succeed())
	waitBaseline(t, ns, "rbp")
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() bool { return getRBP(t, ns, "rbp").Status.Policies[0].PendingTrigger }, timeout, interval).Should(BeTrue())
	cur := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), cur)).To(Succeed())
	g.Expect(restartedAt(cur)).To(BeEmpty())
	// The rollout completes: the target watch brings the restart.
	markRolledOut(t, dep)
	g.Eventually(func() string {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), cur)).To(Succeed())
		return restartedAt(cur)
	}, timeout, interval).ShouldNot(BeEmpty())
}

func TestProblemsBecomeConditions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "conditions")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	markRolledOut(t, dep)
	target := autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}
	cases := []struct {
		name   string
		rbp    *autorebootv1alpha1.RebootPolicy
		reason string
	}{
		{"exec", newRBP(ns, "exec", target, autorebootv1alpha1.Policy{Name: "script", Trigger: autorebootv1alpha1.Trigger{
			Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "reboot"}}}}}}),
			autorebootv1alpha1.ReasonExecNotAllowed},
		{"secret", newRBP(ns, "secret", target, autorebootv1alpha1.Policy{Name: "db", Trigger: autorebootv1alpha1.Trigger{
			SQL: &autorebootv1alpha1.SQLTrigger{Driver: autorebootv1alpha1.DriverMySQL, Query: "SELECT 1", PeriodSeconds: 1, TimeoutSeconds: 1,
				DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "missing", Key: "dsn"}}}}),
			autorebootv1alpha1.ReasonSecretNotUsable},
		{"target", newRBP(ns, "target", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "nope"}, watchPolicy("settings")),
			autorebootv1alpha1.ReasonTargetNotFound},
		{"metadata", newRBP(ns, "metadata", target, autorebootv1alpha1.Policy{Name: "imds", Trigger: autorebootv1alpha1.Trigger{
			Probe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt(80)}}}}}),
			autorebootv1alpha1.ReasonAddressNotAllowed},
		{"watched", newRBP(ns, "watched", target, watchPolicy("no-such-configmap")), autorebootv1alpha1.ReasonWatchedNotFound},
	}
	for _, tc := range cases {
		g.Expect(createRBP(t, tc.rbp)).To(Succeed(), tc.name)
	}
	for _, tc := range cases {
		g.Eventually(func() string {
			c := condition(getRBP(t, ns, tc.rbp.Name), autorebootv1alpha1.ConditionDegraded)
			if c == nil {
				return ""
			}
			return string(c.Status) + "/" + c.Reason
		}, timeout, interval).Should(Equal("True/"+tc.reason), tc.name)
		r := getRBP(t, ns, tc.rbp.Name)
		g.Expect(r.Status.ObservedGeneration).To(Equal(r.Generation))
		c := condition(r, autorebootv1alpha1.ConditionReady)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	}
	// The exec policy has no worker at all: nothing runs.
	g.Expect(workerKeysOf(ns, "exec")).To(BeEmpty())
	g.Expect(slices.ContainsFunc(workers.Keys(), func(k string) bool { return strings.HasPrefix(k, ns+"/exec/") })).To(BeFalse())
}

func TestSelectorRestartsEveryMatchingWorkload(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "selector")
	for _, name := range []string{"a", "b", "other"} {
		dep := newDeployment(ns, name)
		if name == "other" {
			dep.Labels = map[string]string{"tier": "back"}
		}
		g.Expect(k8s.Create(ctx, dep)).To(Succeed())
		markRolledOut(t, dep)
	}
	changeConfigMap(t, ns, "settings", "v1")
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "front"}}}, watchPolicy("settings")))).To(Succeed())
	waitBaseline(t, ns, "rbp")
	changeConfigMap(t, ns, "settings", "v2")
	for _, name := range []string{"a", "b"} {
		dep := &appsv1.Deployment{}
		g.Eventually(func() string {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep)).To(Succeed())
			return restartedAt(dep)
		}, timeout, interval).ShouldNot(BeEmpty(), name)
	}
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(2)))
	other := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other"}, other)).To(Succeed())
	g.Expect(restartedAt(other)).To(BeEmpty(), "a workload outside the selector was restarted")
}
