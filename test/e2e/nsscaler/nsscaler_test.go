// Package nsscaler runs the NSScaler end to end: the real manager binary
// (--controllers=nsscaler) against a kwok cluster whose controller-manager
// and scheduler are real, so parked workloads really lose their pods and
// restored ones really get them back Running.
package nsscaler

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	timeout = 3 * time.Minute
	poll    = 250 * time.Millisecond
)

var (
	kc      *cluster.Cluster
	k8s     client.Client
	manager *cluster.Manager
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "a local kwok cluster (control plane and kwok in bin/k8s: make k8s-binaries)", run)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	suite, err := cluster.StartSuite(ctx, cluster.Options{Nodes: 3, NamePrefix: "nsscaler"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	c := suite.Cluster
	kc = c
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	if k8s, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := suite.ManagerBinary
	if _, err := c.Kubectl(ctx, "create", "namespace", "runbook-system"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	manager, err = cluster.StartManager(ctx, bin, c.Kubeconfig, "--controllers=nsscaler", "--operator-namespace=runbook-system")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := manager.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the manager:", err)
	}
	manager.DumpLogsOnFailure(code != 0)
	return code
}

// expected replica counts per workload, in every project namespace.
var workloads = []struct {
	kind     string
	name     string
	replicas int32
}{
	{"Deployment", "web", 3},
	{"Deployment", "api", 1},
	{"StatefulSet", "db", 2},
}

const podsPerNamespace = 6

func labels(app string) map[string]string { return map[string]string{"app": app} }

func template(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels(app)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/" + app + ":1"}}},
	}
}

func createProject(g Gomega, ns string) {
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, w := range workloads {
		var obj client.Object
		switch w.kind {
		case "Deployment":
			obj = &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.name},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(w.replicas), Selector: &metav1.LabelSelector{MatchLabels: labels(w.name)}, Template: template(w.name)},
			}
		case "StatefulSet":
			obj = &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.name},
				Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(w.replicas), Selector: &metav1.LabelSelector{MatchLabels: labels(w.name)}, Template: template(w.name)},
			}
		}
		g.Expect(k8s.Create(ctx, obj)).To(Succeed())
	}
}

// pods returns how many pods the namespace has and how many are Running.
func pods(g Gomega, ns string) (all, running int) {
	var l corev1.PodList
	g.Expect(k8s.List(context.Background(), &l, client.InNamespace(ns))).To(Succeed())
	for _, p := range l.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
	}
	return len(l.Items), running
}

func expectRunning(g Gomega, ns string) {
	ctx := context.Background()
	for _, w := range workloads {
		key := client.ObjectKey{Namespace: ns, Name: w.name}
		switch w.kind {
		case "Deployment":
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, key, &d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(Equal(w.replicas), "%s/%s", ns, w.name)
			g.Expect(d.Annotations).NotTo(HaveKey("scaling.runbook.dev/original"))
		case "StatefulSet":
			var s appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, key, &s)).To(Succeed())
			g.Expect(*s.Spec.Replicas).To(Equal(w.replicas), "%s/%s", ns, w.name)
			g.Expect(s.Annotations).NotTo(HaveKey("scaling.runbook.dev/original"))
		}
	}
	all, running := pods(g, ns)
	g.Expect([]int{all, running}).To(Equal([]int{podsPerNamespace, podsPerNamespace}), "pods (all, running) in %s", ns)
}

func expectParked(g Gomega, scaler, ns string) {
	ctx := context.Background()
	for _, w := range workloads {
		key := client.ObjectKey{Namespace: ns, Name: w.name}
		var replicas *int32
		var ann map[string]string
		switch w.kind {
		case "Deployment":
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, key, &d)).To(Succeed())
			replicas, ann = d.Spec.Replicas, d.Annotations
		case "StatefulSet":
			var s appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, key, &s)).To(Succeed())
			replicas, ann = s.Spec.Replicas, s.Annotations
		}
		g.Expect(*replicas).To(BeZero(), "%s/%s", ns, w.name)
		g.Expect(ann).To(HaveKeyWithValue("scaling.runbook.dev/original",
			fmt.Sprintf(`{"v":1,"replicas":%d,"by":%q}`, w.replicas, scaler)), "%s/%s", ns, w.name)
	}
	all, _ := pods(g, ns)
	g.Expect(all).To(BeZero(), "pods left in %s", ns)
}

func TestParkWhitelistFlipAndDelete(t *testing.T) {
	g := NewWithT(t)
	defer func() { manager.DumpLogsOnFailure(t.Failed()) }()
	r := newRelease(t, g)
	r.parkAllButB(t, g)
	r.manualScaleIsUndone(g)
	r.flipWhitelistToA(t, g)
	r.deleteRestoresAll(t, g)
	r.expectParkedEvents(g)
}

// release is the test's world: three project namespaces a, b, c and the
// NSScaler that selects them by prefix. The names are random, so the test
// can run again (-count) on the same cluster.
type release struct {
	name, prefix string
	a, b, c      string
	scaler       *scalingv1alpha1.NSScaler
}

// newRelease creates the projects and waits until their pods run.
func newRelease(t *testing.T, g *WithT) *release {
	r := &release{name: testenv.RandomName("release"), prefix: testenv.RandomName("proj") + "-"}
	r.a, r.b, r.c = r.prefix+"a", r.prefix+"b", r.prefix+"c"
	for _, ns := range r.projects() {
		createProject(g, ns)
		t.Cleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		})
	}
	g.Eventually(func(g Gomega) {
		for _, ns := range r.projects() {
			expectRunning(g, ns)
		}
	}, timeout, poll).Should(Succeed())
	return r
}

func (r *release) projects() []string { return []string{r.a, r.b, r.c} }

func (r *release) get(g Gomega) scalingv1alpha1.NSScaler {
	var s scalingv1alpha1.NSScaler
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: r.name}, &s)).To(Succeed())
	return s
}

// parkAllButB creates the NSScaler with b whitelisted: a and c lose their
// pods, b keeps running.
func (r *release) parkAllButB(t *testing.T, g *WithT) {
	r.scaler = &scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec:       scalingv1alpha1.NSScalerSpec{NamespacePrefix: r.prefix, Whitelist: []string{r.b}},
	}
	g.Expect(k8s.Create(context.Background(), r.scaler)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), r.scaler) })
	start := time.Now()
	g.Eventually(func(g Gomega) {
		expectParked(g, r.name, r.a)
		expectParked(g, r.name, r.c)
		s := r.get(g)
		g.Expect(s.Status.Done).To(BeTrue())
		g.Expect(s.Status.PodsRemaining).To(BeZero())
		g.Expect(s.Status.ParkedNamespaces).To(Equal([]string{r.a, r.c}))
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(6)))
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, scalingv1alpha1.ConditionParked)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	t.Logf("a and c parked, pods gone and done=true after %s", time.Since(start).Round(time.Millisecond))
	expectRunning(g, r.b)
}

// manualScaleIsUndone: someone scales a parked Deployment up with kubectl;
// it is parked again, the recorded original (3) kept.
func (r *release) manualScaleIsUndone(g *WithT) {
	ctx := context.Background()
	_, err := kc.Kubectl(ctx, "scale", "deployment/web", "-n", r.c, "--replicas=5")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.c, Name: "web"}, &d)).To(Succeed())
		g.Expect(d.Generation).To(BeNumerically(">", 2), "the manual scale has not happened yet")
		expectParked(g, r.name, r.c)
	}, timeout, poll).Should(Succeed())
}

// flipWhitelistToA: a comes back with its exact counts, b is parked.
func (r *release) flipWhitelistToA(t *testing.T, g *WithT) {
	g.Eventually(func() error {
		var s scalingv1alpha1.NSScaler
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: r.name}, &s); err != nil {
			return err
		}
		s.Spec.Whitelist = []string{r.a}
		return k8s.Update(context.Background(), &s)
	}, timeout, poll).Should(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		expectRunning(g, r.a)
		expectParked(g, r.name, r.b)
		expectParked(g, r.name, r.c)
		s := r.get(g)
		g.Expect(s.Status.Done).To(BeTrue())
		g.Expect(s.Status.ActiveNamespaces).To(Equal([]string{r.a}))
	}, timeout, poll).Should(Succeed())
	t.Logf("whitelist flip settled (a Running with exact counts, b parked) after %s", time.Since(start).Round(time.Millisecond))
}

// deleteRestoresAll deletes the NSScaler: everything comes back.
func (r *release) deleteRestoresAll(t *testing.T, g *WithT) {
	g.Expect(k8s.Delete(context.Background(), r.scaler)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: r.name}, &scalingv1alpha1.NSScaler{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NSScaler still present: %v", err)
		for _, ns := range r.projects() {
			expectRunning(g, ns)
		}
	}, timeout, poll).Should(Succeed())
	t.Logf("deletion restored all three namespaces after %s", time.Since(start).Round(time.Millisecond))
}

// expectParkedEvents: a NamespaceParked event was recorded about each
// project, by the controller's documented reporter name.
func (r *release) expectParkedEvents(g *WithT) {
	g.Eventually(func(g Gomega) {
		var l eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &l)).To(Succeed())
		parked := map[string]bool{}
		for _, e := range l.Items {
			if e.Regarding.Kind == "NSScaler" && e.Regarding.Name == r.name && e.Reason == scalingv1alpha1.EventNamespaceParked && e.Related != nil {
				g.Expect(e.ReportingController).To(Equal("nsscaler-controller"))
				parked[e.Related.Name] = true
			}
		}
		for _, ns := range r.projects() {
			g.Expect(parked).To(HaveKey(ns))
		}
	}, timeout, poll).Should(Succeed())
}
