package reloadercompat

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/reloadercompat"
)

// Names in a reload list never reach another namespace: a plain name, a
// regular expression matching everything, a name with a slash.
func TestNamesInOtherNamespacesAreNeverTracked(t *testing.T) {
	g := NewWithT(t)
	ns, other := createNamespace(t, "compat-a"), createNamespace(t, "compat-b")
	createObject(t, other, object{name: "shared"})
	createObject(t, other, object{secret: true, name: "shared"})
	createObject(t, ns, object{name: "own"})
	w := newWorkload(autorebootv1alpha1.KindDeployment, ns, "app")
	w.SetAnnotations(map[string]string{
		reloadercompat.AnnotationConfigMapList: ".*, " + other + "/shared",
		reloadercompat.AnnotationSecretList:    "shared, " + other + "/shared",
	})
	g.Expect(k8s.Create(context.Background(), w)).To(Succeed())
	markRolledOut(t, w)
	waitTracked(t, ns, "reloader-deploy-app")
	g.Expect(getRBP(t, ns, "reloader-deploy-app").Spec.Policies[0].Trigger.Referenced.Objects).To(Equal(
		[]autorebootv1alpha1.ReferencedObject{{Kind: autorebootv1alpha1.WatchConfigMap, Name: "own"}}))
	g.Eventually(func() []string { return eventNotes(ns, "app", reloadercompat.EventUnsupported) }, timeout, interval).Should(
		ContainElement(ContainSubstring("not Secret names")))
	change(t, other, "ConfigMap/shared")
	change(t, ns, "ConfigMap/own")
	g.Eventually(func() int64 { return getRBP(t, ns, "reloader-deploy-app").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	for _, n := range eventNotes(ns, "app", autorebootv1alpha1.EventRestarted) {
		g.Expect(n).NotTo(ContainSubstring("shared"))
	}
}

// A flood of annotated workloads gets at most --reloader-compat-max-per-
// namespace RebootPolicies; the others are told why.
func TestAFloodOfAnnotatedWorkloadsIsBounded(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "compat-flood")
	createObject(t, ns, object{name: "cfg"})
	for i := range maxCompat + 3 {
		w := newWorkload(autorebootv1alpha1.KindDeployment, ns, fmt.Sprintf("app-%d", i))
		w.SetAnnotations(map[string]string{reloadercompat.AnnotationAuto: "true"})
		addRefs(templateOf(w), []ref{{name: "cfg", how: "envFrom"}})
		g.Expect(k8s.Create(context.Background(), w)).To(Succeed())
	}
	count := func() int {
		var l autorebootv1alpha1.RebootPolicyList
		g.Expect(k8s.List(context.Background(), &l, client.InNamespace(ns))).To(Succeed())
		return len(l.Items)
	}
	refused := func() int {
		n := 0
		for i := range maxCompat + 3 {
			if len(eventNotes(ns, fmt.Sprintf("app-%d", i), reloadercompat.EventRefused)) > 0 {
				n++
			}
		}
		return n
	}
	g.Eventually(count, timeout, interval).Should(Equal(maxCompat))
	g.Eventually(refused, timeout, interval).Should(Equal(3))
	g.Consistently(count, "3s", interval).Should(Equal(maxCompat))
	g.Expect(gauge(t, "refused")).To(BeNumerically(">=", 3))
}

// A Secret without the usable label is listed (so status says why it is
// not tracked) but its change never restarts: its data is never read.
func TestUnlabelledSecretNeverRestarts(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "compat-secret")
	createObject(t, ns, object{secret: true, name: "creds", unlabelled: true})
	w := newWorkload(autorebootv1alpha1.KindDeployment, ns, "app")
	w.SetAnnotations(map[string]string{reloadercompat.AnnotationAuto: "true"})
	addRefs(templateOf(w), []ref{{secret: true, name: "creds", how: "envFrom"}})
	g.Expect(k8s.Create(context.Background(), w)).To(Succeed())
	markRolledOut(t, w)
	policy := "reloader-deploy-app"
	g.Eventually(func(g Gomega) {
		var rbp autorebootv1alpha1.RebootPolicy
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: policy}, &rbp)).To(Succeed())
		g.Expect(rbp.Status.Policies).To(HaveLen(1))
		g.Expect(rbp.Status.Policies[0].Message).To(ContainSubstring("not tracked: Secret creds"))
	}, timeout, interval).Should(Succeed())
	change(t, ns, "Secret/creds")
	// Two further observations (one per 10 s period) after the change.
	before := observed(ns, policy)
	g.Eventually(func() uint64 { return observed(ns, policy) }, timeout, interval).Should(BeNumerically(">=", before+2))
	g.Expect(stamp(t, autorebootv1alpha1.KindDeployment, ns, "app")).To(BeEmpty())
	g.Expect(getRBP(t, ns, policy).Status.RestartCount).To(BeZero())
}

// A tenant who edits the compat RebootPolicy (here: another target) gets
// it put back; one who removes the annotations loses the policy.
func TestCompatPolicyIsKeptInLineWithTheAnnotations(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "compat-edit")
	createObject(t, ns, object{name: "cfg"})
	w := newWorkload(autorebootv1alpha1.KindDeployment, ns, "app")
	w.SetAnnotations(map[string]string{reloadercompat.AnnotationAuto: "true"})
	addRefs(templateOf(w), []ref{{name: "cfg", how: "envFrom"}})
	g.Expect(k8s.Create(context.Background(), w)).To(Succeed())
	markRolledOut(t, w)
	policy := "reloader-deploy-app"
	waitTracked(t, ns, policy)
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rbp := getRBP(t, ns, policy)
		rbp.Spec.Target.Name = "victim"
		return k8s.Update(context.Background(), rbp)
	})).To(Succeed())
	g.Eventually(func() string { return getRBP(t, ns, policy).Spec.Target.Name }, timeout, interval).Should(Equal("app"))
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var d appsv1.Deployment
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, &d); err != nil {
			return err
		}
		d.Annotations = nil
		return k8s.Update(context.Background(), &d)
	})).To(Succeed())
	g.Eventually(func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: policy}, &autorebootv1alpha1.RebootPolicy{})
	}, timeout, interval).ShouldNot(Succeed())
}

func gauge(t *testing.T, state string) float64 {
	t.Helper()
	mfs, err := metricsRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "runbook_reloadercompat_workloads" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "state", state) {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
