package nsscaler

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestParkToNLeavesSmallWorkloadsAlone: with parkedReplicas 2, of
// Deployments at 5, 2 and 1 only the 5 is written (parked to 2, 5
// recorded); the others are neither written nor recorded, and a restore
// brings the 5 back and leaves the others as they are.
func TestParkToNLeavesSmallWorkloadsAlone(t *testing.T) {
	requests := &requestLog{}
	startManager(t, managerOptions{requests: requests})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "parkto")
	for d, r := range map[string]int32{"five": 5, "two": 2, "one": 1} {
		createDeployment(t, ns, d, ptr.To(r))
	}
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, ParkedReplicas: 2})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "five")).To(Equal(state{Replicas: 2, Annotation: parkedBy(name, 5)}))
		s := getScaler(g, name)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ParkedReplicas).To(Equal(int32(2)))
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(1)))
		g.Expect(s.Status.AtOrBelowParkedReplicas).To(Equal(int32(2)))
		g.Expect(s.Status.Done).To(BeTrue())
		st, reason := conditionReason(s, scalingv1alpha1.ConditionParked)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonParkedReplicasRunning}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "two")).To(Equal(state{Replicas: 2}))
	g.Expect(deploymentState(g, ns, "one")).To(Equal(state{Replicas: 1}))
	g.Expect(requests.writes("/namespaces/" + ns + "/")).To(Equal([]string{"PATCH /apis/apps/v1/namespaces/" + ns + "/deployments/five"}))

	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "five")).To(Equal(state{Replicas: 5}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "two")).To(Equal(state{Replicas: 2}))
	g.Expect(deploymentState(g, ns, "one")).To(Equal(state{Replicas: 1}))
	g.Expect(requests.writes("/namespaces/"+ns+"/")).To(HaveLen(2), "one park and one restore, both of five")
}

// TestParkedReplicasChangedWhileParked: changing parkedReplicas re-parks
// each parked workload to the new count with one write, keeps its record,
// restores it when the new count reaches its record, and never makes it
// contested; the final restore is exact.
func TestParkedReplicasChangedWhileParked(t *testing.T) {
	requests := &requestLog{}
	startManager(t, managerOptions{requests: requests})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "parkto-change")
	createDeployment(t, ns, "web", ptr.To[int32](5))
	createStatefulSet(t, ns, "db", 3)
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, ParkedReplicas: 2})
	webWrites := func() int { return len(requests.writes("/namespaces/" + ns + "/deployments/web")) }
	expect := func(n int32, web, db state, writes int) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			g.Expect(deploymentState(g, ns, "web")).To(Equal(web))
			g.Expect(statefulSetState(g, ns, "db")).To(Equal(db))
			s := getScaler(g, name)
			g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
			g.Expect(s.Status.ParkedReplicas).To(Equal(n))
			g.Expect(s.Status.ContestedWorkloads).To(BeZero())
		}, timeout, poll).Should(Succeed())
		g.Expect(webWrites()).To(Equal(writes), "writes of web: %v", requests.writes("/namespaces/"+ns+"/"))
	}
	expect(2, state{Replicas: 2, Annotation: parkedBy(name, 5)}, state{Replicas: 2, Annotation: parkedBy(name, 3)}, 1)

	for i, step := range []struct {
		n       int32
		web, db state
	}{
		{0, state{Replicas: 0, Annotation: parkedBy(name, 5)}, state{Replicas: 0, Annotation: parkedBy(name, 3)}},
		{4, state{Replicas: 4, Annotation: parkedBy(name, 5)}, state{Replicas: 3}}, // db's record 3 ≤ 4: restored
		{1, state{Replicas: 1, Annotation: parkedBy(name, 5)}, state{Replicas: 1, Annotation: parkedBy(name, 3)}},
		{0, state{Replicas: 0, Annotation: parkedBy(name, 5)}, state{Replicas: 0, Annotation: parkedBy(name, 3)}},
	} {
		updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.ParkedReplicas = step.n })
		expect(step.n, step.web, step.db, i+2)
	}
	// Settled: no reconcile writes anything more.
	settled := len(requests.writes("/namespaces/" + ns + "/"))
	g.Consistently(func() []string { return requests.writes("/namespaces/" + ns + "/")[settled:] }, "1s", poll).Should(BeEmpty())

	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 5}))
		g.Expect(statefulSetState(g, ns, "db")).To(Equal(state{Replicas: 3}))
	}, timeout, poll).Should(Succeed())
}

// passTime sets the fake clock to t until check holds: a timer the
// controller arranges for t just after the first SetTime fires on the next.
func passTime(g Gomega, clk *clocktesting.FakeClock, at time.Time, check func(Gomega)) {
	g.Eventually(func(g Gomega) {
		clk.SetTime(at)
		check(g)
	}, timeout, poll).Should(Succeed())
}

// TestGracePeriodParksNewWorkloadsOnceOldEnough: a Deployment created a
// minute ago (by the fake clock) is left running under a 10 minute grace
// period, counted in status, and parked when the clock reaches its tenth
// minute — without anything else happening.
func TestGracePeriodParksNewWorkloadsOnceOldEnough(t *testing.T) {
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "grace")
	created := createDeployment(t, ns, "young", ptr.To[int32](3)).CreationTimestamp.Time
	g.Expect(created.IsZero()).To(BeFalse())
	clk := clocktesting.NewFakeClock(created.Add(time.Minute))
	requests := &requestLog{}
	startManager(t, managerOptions{clock: clk, requests: requests})
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, GracePeriod: &metav1.Duration{Duration: 10 * time.Minute}})
	until := created.Add(10 * time.Minute)

	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		g.Expect(s.Status.WorkloadsInGrace).To(Equal(int32(1)))
		g.Expect(s.Status.InGrace).To(HaveLen(1))
		g.Expect(s.Status.InGrace[0].Namespace).To(Equal(ns))
		g.Expect(s.Status.InGrace[0].Workloads).To(Equal(int32(1)))
		g.Expect(s.Status.InGrace[0].Until.Time.Equal(until)).To(BeTrue(), "until %s, want %s", s.Status.InGrace[0].Until, until)
		g.Expect(s.Status.GracePeriod).To(Equal(&metav1.Duration{Duration: 10 * time.Minute}))
		g.Expect(s.Status.Done).To(BeFalse())
		st, reason := conditionReason(s, scalingv1alpha1.ConditionParked)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionFalse, scalingv1alpha1.ReasonWorkloadsInGrace}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "young")).To(Equal(state{Replicas: 3}))
	g.Expect(requests.writes("/namespaces/" + ns + "/")).To(BeEmpty())

	// Halfway: still young.
	clk.SetTime(created.Add(5 * time.Minute))
	g.Consistently(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "young")).To(Equal(state{Replicas: 3}))
	}, "1s", poll).Should(Succeed())

	passTime(g, clk, until, func(g Gomega) {
		g.Expect(deploymentState(g, ns, "young")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		s := getScaler(g, name)
		g.Expect(s.Status.WorkloadsInGrace).To(BeZero())
		g.Expect(s.Status.InGrace).To(BeEmpty())
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(1)))
	})
	expectNamespaceEvents(g, name, scalingv1alpha1.EventNamespaceParked, ns)
}

// TestGraceOfAFutureCreationTimestampIsBounded: with the manager's clock
// five minutes behind the apiserver's, a creationTimestamp five minutes
// ahead is believed under a 10 minute grace period (the workload waits
// until its own tenth minute, 15 minutes of the manager's time: at most
// twice the grace period) and not believed under a 2 minute one (parked
// at once).
func TestGraceOfAFutureCreationTimestampIsBounded(t *testing.T) {
	g := NewWithT(t)
	pa, a, long := oneNamespace(t, "grace-future")
	pb, b, short := oneNamespace(t, "grace-future-short")
	created := createDeployment(t, a, "web", ptr.To[int32](3)).CreationTimestamp.Time
	createDeployment(t, b, "web", ptr.To[int32](3))
	clk := clocktesting.NewFakeClock(created.Add(-5 * time.Minute))
	startManager(t, managerOptions{clock: clk})
	createScaler(t, long, scalingv1alpha1.NSScalerSpec{NamespacePrefix: pa, GracePeriod: &metav1.Duration{Duration: 10 * time.Minute}})
	createScaler(t, short, scalingv1alpha1.NSScalerSpec{NamespacePrefix: pb, GracePeriod: &metav1.Duration{Duration: 2 * time.Minute}})

	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, b, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(short, 3)}))
		g.Expect(getScaler(g, short).Status.WorkloadsInGrace).To(BeZero())
		s := getScaler(g, long)
		g.Expect(s.Status.InGrace).To(HaveLen(1))
		g.Expect(s.Status.InGrace[0].Until.Time.Equal(created.Add(10 * time.Minute))).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 3}))

	passTime(g, clk, created.Add(10*time.Minute), func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(long, 3)}))
	})
}

// TestParkToNRestoresExactlyAfterRestartMidPark stops a slow manager in the
// middle of parking 200 Deployments (1 to 5 replicas) to 2, checks that
// each is untouched or parked to 2 with its original recorded — and that
// none at 2 or fewer was written —, lets a new manager finish, and restores
// every one exactly.
func TestParkToNRestoresExactlyAfterRestartMidPark(t *testing.T) {
	g := NewWithT(t)
	const n = 2
	f := newFleet(t, testenv.RandomName("crash-n"), 10, 20, func(i, j int) int32 { return int32((i*20+j)%5 + 1) })
	above := 0
	for _, r := range f.original {
		if r > n {
			above++
		}
	}

	first := startManager(t, managerOptions{writeConcurrency: 1, writeQPS: 20})
	createScaler(t, f.scaler, scalingv1alpha1.NSScalerSpec{NamespacePrefix: f.prefix(), ParkedReplicas: n})
	g.Eventually(f.annotated, timeout, poll).Should(BeNumerically(">=", 20))
	first.stop(t)

	parked := 0
	for _, d := range f.list(g) {
		key := client.ObjectKeyFromObject(&d)
		ann, ok := d.Annotations[nsscontroller.AnnotationOriginal]
		if !ok {
			g.Expect(*d.Spec.Replicas).To(Equal(f.original[key]), "%s scaled without its original recorded", key)
			continue
		}
		parked++
		g.Expect(f.original[key]).To(BeNumerically(">", n), "%s at or below parkedReplicas was written", key)
		g.Expect(*d.Spec.Replicas).To(Equal(int32(n)), "%s annotated but not parked to %d", key, n)
		g.Expect(ann).To(Equal(parkedBy(f.scaler, f.original[key])), "%s", key)
	}
	g.Expect(parked).To(BeNumerically("<", above), "the first manager finished the park before it was stopped")
	t.Logf("first manager stopped after parking %d of %d Deployments above %d", parked, above, n)

	startManager(t, managerOptions{})
	g.Eventually(func(g Gomega) {
		for _, d := range f.list(g) {
			key := client.ObjectKeyFromObject(&d)
			if f.original[key] <= n {
				g.Expect(d.Annotations).NotTo(HaveKey(nsscontroller.AnnotationOriginal), "%s", key)
				g.Expect(*d.Spec.Replicas).To(Equal(f.original[key]), "%s", key)
				continue
			}
			g.Expect(*d.Spec.Replicas).To(Equal(int32(n)), "%s", key)
			g.Expect(d.Annotations[nsscontroller.AnnotationOriginal]).To(Equal(parkedBy(f.scaler, f.original[key])), "%s", key)
		}
		s := getScaler(g, f.scaler)
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(above)))
		g.Expect(s.Status.AtOrBelowParkedReplicas).To(Equal(int32(f.size - above)))
	}, timeout, poll).Should(Succeed())
	updateScaler(t, f.scaler, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = f.namespaces })
	g.Eventually(f.allRestored, timeout, poll).Should(Succeed())
	deleteScalerAndWait(t, f.scaler)
}

// TestParkingFieldsValidation: the CRD rejects a negative or absurd
// parkedReplicas and a gracePeriod that is no duration, negative or longer
// than a day.
func TestParkingFieldsValidation(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		name    string
		spec    map[string]any
		message string
	}{
		{"negative parkedReplicas", map[string]any{"parkedReplicas": -1}, "parkedReplicas"},
		{"parkedReplicas above 1000", map[string]any{"parkedReplicas": 1001}, "parkedReplicas"},
		{"gracePeriod in days", map[string]any{"gracePeriod": "1d"}, "gracePeriod"},
		{"negative gracePeriod", map[string]any{"gracePeriod": "-10m"}, "gracePeriod"},
		{"gracePeriod longer than a day", map[string]any{"gracePeriod": "24h1s"}, "gracePeriod must be at most 24h"},
		{"gracePeriod that overflows", map[string]any{"gracePeriod": "9999999999h"}, "gracePeriod"},
		{"gracePeriod of words", map[string]any{"gracePeriod": "ten minutes"}, "gracePeriod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec["namespacePrefix"] = "p-"
			err := createRaw(testenv.RandomName("badpark"), tc.spec)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
	name := testenv.RandomName("goodpark")
	g.Expect(createRaw(name, map[string]any{"namespacePrefix": "p-", "parkedReplicas": 1000, "gracePeriod": "1h30m"})).To(Succeed())
	s := &scalingv1alpha1.NSScaler{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, s)).To(Succeed())
	g.Expect(s.Spec.GracePeriod.Duration).To(Equal(90 * time.Minute))
	g.Expect(k8s.Delete(context.Background(), s)).To(Succeed())
	defaulted := testenv.RandomName("defaultpark")
	g.Expect(createRaw(defaulted, map[string]any{"namespacePrefix": "p-"})).To(Succeed())
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: defaulted}, s)).To(Succeed())
	g.Expect(s.Spec.ParkedReplicas).To(BeZero())
	g.Expect(s.Spec.GracePeriod).To(BeNil())
	g.Expect(k8s.Delete(context.Background(), s)).To(Succeed())
}

// TestTenantCannotSetParkingOrAge: a namespace's team — here with every
// right on everything in its namespace, more than the edit role (envtest
// runs no controller-manager to aggregate edit's rules) — can neither set
// parkedReplicas or gracePeriod — the NSScaler is cluster-scoped, and a
// Role grants nothing cluster-scoped — nor make a workload look new: the
// apiserver sets creationTimestamp at creation and keeps it on updates.
func TestTenantCannotSetParkingOrAge(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	p, ns, name := oneNamespace(t, "tenant")
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}
	g.Expect(k8s.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "team"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: testenv.RandomName("team")}},
	}
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	user, err := env.AddUser(envtest.User{Name: binding.Subjects[0].Name}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	tenant, err := client.New(user.Config(), client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, body := range []string{`{"spec":{"parkedReplicas":1000}}`, `{"spec":{"gracePeriod":"24h"}}`} {
		err := tenant.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(body)))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", body, err)
	}
	own := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: testenv.RandomName("tenant-own")},
		Spec: scalingv1alpha1.NSScalerSpec{NamespacePrefix: "zz-", ParkedReplicas: 1000}}
	g.Expect(apierrors.IsForbidden(tenant.Create(ctx, own))).To(BeTrue())

	// The tenant claims its Deployment was created in 2099, then in 2098.
	future := metav1.NewTime(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "young-forever", CreationTimestamp: future},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "y"}},
			Template: podTemplate("y")},
	}
	g.Expect(tenant.Create(ctx, d)).To(Succeed())
	g.Expect(d.CreationTimestamp.Time.Before(time.Now().Add(time.Hour))).To(BeTrue(), "creationTimestamp %s taken from the tenant", d.CreationTimestamp)
	created := d.CreationTimestamp
	body := `{"metadata":{"creationTimestamp":"2098-01-01T00:00:00Z"}}`
	g.Expect(tenant.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(body)))).To(Succeed())
	g.Expect(d.CreationTimestamp.Equal(&created)).To(BeTrue(), "creationTimestamp changed by a patch: %s", d.CreationTimestamp)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "young-forever")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
	}, timeout, poll).Should(Succeed())
}

// TestKEDAPausedAtParkedReplicas: with parkedReplicas 2, the ScaledObject
// of a Deployment at 5 is paused at 2 and that of a Deployment at 1 at 1
// (a pause at 2 would scale it up); the Deployments are never written.
// Lowering parkedReplicas to 0 pauses both at 0; the restore removes the
// pauses.
func TestKEDAPausedAtParkedReplicas(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "keda-n")
	createDeployment(t, ns, "big", ptr.To[int32](5))
	createDeployment(t, ns, "small", ptr.To[int32](1))
	createScaledObject(t, ns, "big", "big", nil)
	createScaledObject(t, ns, "small", "small", nil)
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, ParkedReplicas: 2})
	paused := func(at string) map[string]string {
		return map[string]string{
			nsscontroller.AnnotationKEDAPausedReplicas: at,
			nsscontroller.AnnotationOriginal:           nsscontroller.PauseOriginal(nil, name).Encode(),
		}
	}
	g.Eventually(func(g Gomega) {
		g.Expect(scaledObjectAnnotations(g, ns, "big")).To(Equal(paused("2")))
		g.Expect(scaledObjectAnnotations(g, ns, "small")).To(Equal(paused("1")))
	}, timeout, poll).Should(Succeed())

	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.ParkedReplicas = 0 })
	g.Eventually(func(g Gomega) {
		g.Expect(scaledObjectAnnotations(g, ns, "big")).To(Equal(paused("0")))
		g.Expect(scaledObjectAnnotations(g, ns, "small")).To(Equal(paused("0")))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "big")).To(Equal(state{Replicas: 5}))
	g.Expect(deploymentState(g, ns, "small")).To(Equal(state{Replicas: 1}))

	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(scaledObjectAnnotations(g, ns, "big")).To(BeEmpty())
		g.Expect(scaledObjectAnnotations(g, ns, "small")).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
}

// TestParkingSamplesBecomeReady: the two samples, applied as `make demo`
// applies config/samples, become Ready and not Degraded (what the demo
// waits for), and show what they set in status.
func TestParkingSamplesBecomeReady(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	for _, f := range []string{"scaling_v1alpha1_nsscaler_parkedreplicas.yaml", "scaling_v1alpha1_nsscaler_graceperiod.yaml"} {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", f))
		g.Expect(err).NotTo(HaveOccurred())
		var s scalingv1alpha1.NSScaler
		g.Expect(yaml.UnmarshalStrict(raw, &s)).To(Succeed())
		createScaler(t, s.Name, s.Spec)
		g.Eventually(func(g Gomega) {
			got := getScaler(g, s.Name)
			for cond, want := range map[string]metav1.ConditionStatus{scalingv1alpha1.ConditionReady: metav1.ConditionTrue, scalingv1alpha1.ConditionDegraded: metav1.ConditionFalse} {
				st, _ := conditionReason(got, cond)
				g.Expect(st).To(Equal(want), "%s %s", s.Name, cond)
			}
			g.Expect(got.Status.ParkedReplicas).To(Equal(s.Spec.ParkedReplicas))
			g.Expect(got.Status.GracePeriod).To(Equal(s.Spec.GracePeriod))
		}, timeout, poll).Should(Succeed())
	}
}
