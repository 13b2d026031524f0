// Package memcached runs the Memcached controller end to end: the real
// manager binary (--controllers=memcached) against a kwok cluster whose
// kube-controller-manager, scheduler and garbage collector are real, so
// pods, EndpointSlices and owner-reference deletion behave as in production.
package memcached

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	kc  *cluster.Cluster
	mgr *cluster.Manager
	cl  client.Client
)

const (
	waitLong     = 3 * time.Minute
	poll         = 250 * time.Millisecond
	secretResync = 3 * time.Second
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "a local cluster (kwok and the control plane, from bin/k8s)", run)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	suite, err := cluster.StartSuite(ctx, cluster.Options{Nodes: 3, NamePrefix: "memcached"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	kc = suite.Cluster
	// Secrets are read again every few seconds here (5m by default), so
	// that a renewal reaches the pods within the test.
	mgr, err = cluster.StartManager(ctx, suite.ManagerBinary, kc.Kubeconfig, "--controllers=memcached",
		"--memcached-secret-resync-period="+secretResync.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = mgr.Stop() }()

	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	cl, err = client.New(kc.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// createNamespace creates a namespace with a random name that enforces the
// restricted Pod Security Standard: the apiserver's PodSecurity admission
// rejects any pod of the cache that is not restricted-compliant, so the
// tests prove it.
func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.RandomName(prefix), Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := cl.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), ns) })
	return ns.Name
}

// runningPods lists the Running, not terminating pods of a Memcached.
func runningPods(g Gomega, ns, name string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(cl.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "memcached"})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// expectSettled waits until the Memcached runs exactly size ready pods and
// its status says so: Available, the right counts and one server per pod.
func expectSettled(t *testing.T, ns, name string, size int) *cachev1alpha1.Memcached {
	t.Helper()
	mc := &cachev1alpha1.Memcached{}
	NewWithT(t).Eventually(func(g Gomega) {
		pods := runningPods(g, ns, name)
		g.Expect(pods).To(HaveLen(size))
		g.Expect(cl.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, mc)).To(Succeed())
		g.Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation))
		avail := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionAvailable)
		g.Expect(avail).NotTo(BeNil())
		g.Expect(avail.Status).To(Equal(metav1.ConditionTrue), "Available: %s", avail.Message)
		prog := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionProgressing)
		g.Expect(prog.Status).To(Equal(metav1.ConditionFalse), "Progressing: %s %s", prog.Reason, prog.Message)
		g.Expect(mc.Status.Replicas).To(Equal(int32(size)))
		g.Expect(mc.Status.ReadyReplicas).To(Equal(int32(size)))
		g.Expect(mc.Status.Servers).To(HaveLen(size))
		var ips []string
		for _, p := range pods {
			ips = append(ips, p.Status.PodIP+":11211")
		}
		g.Expect(mc.Status.Servers).To(ConsistOf(ips))
	}).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	return mc
}

func TestSampleLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	defer func() { mgr.DumpLogsOnFailure(t.Failed()) }()
	ns := createNamespace(t, "mc-e2e")
	const name = "memcached-sample"
	key := types.NamespacedName{Namespace: ns, Name: name}

	// Positive control: the namespace really enforces the restricted
	// profile, so the cache's pods running below proves they comply.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	err := cl.Create(ctx, plain)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a non-restricted pod must be rejected, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("violates PodSecurity"))

	// The sample (size 3) from config/samples, with the real kubectl.
	_, err = kc.Kubectl(ctx, "-n", ns, "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "samples", "cache_v1alpha1_memcached.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	mc := expectSettled(t, ns, name, 3)
	g.Expect(mc.Status.ServiceName).To(Equal(name))
	g.Expect(meta.IsStatusConditionFalse(mc.Status.Conditions, cachev1alpha1.ConditionDegraded)).To(BeTrue())
	out, err := kc.Kubectl(ctx, "-n", ns, "get", "mc", name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`memcached-sample\s+3\s+3\s+True`), "printer columns:\n%s", out)

	// kubectl scale goes through the scale subresource.
	_, err = kc.Kubectl(ctx, "-n", ns, "scale", "memcached/"+name, "--replicas=5")
	g.Expect(err).NotTo(HaveOccurred())
	expectSettled(t, ns, name, 5)
	_, err = kc.Kubectl(ctx, "-n", ns, "scale", "memcached/"+name, "--replicas=2")
	g.Expect(err).NotTo(HaveOccurred())
	expectSettled(t, ns, name, 2)

	// A settings change rolls the pods without ever running more than size.
	g.Expect(cl.Get(ctx, key, mc)).To(Succeed())
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.Threads = 2
	g.Expect(cl.Patch(ctx, mc, patch)).To(Succeed())
	maxSeen := 0
	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name})).To(Succeed())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		maxSeen = max(maxSeen, len(live))
		g.Expect(live).To(HaveLen(2))
		for _, p := range live {
			g.Expect(strings.Join(p.Spec.Containers[0].Args, " ")).To(ContainSubstring("-t 2"))
		}
	}).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	g.Expect(maxSeen).To(BeNumerically("<=", 2), "never more than size pods")
	expectSettled(t, ns, name, 2)

	// A deleted Deployment is recreated.
	dep := &appsv1.Deployment{}
	g.Expect(cl.Get(ctx, key, dep)).To(Succeed())
	oldUID := dep.UID
	g.Expect(cl.Delete(ctx, dep)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cl.Get(ctx, key, dep)).To(Succeed())
		g.Expect(dep.UID).NotTo(Equal(oldUID))
	}).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	expectSettled(t, ns, name, 2)

	// Deleting the Memcached garbage-collects everything it owned.
	g.Expect(cl.Get(ctx, key, mc)).To(Succeed())
	g.Expect(cl.Get(ctx, key, &policyv1.PodDisruptionBudget{})).To(Succeed(), "size 2 has a PDB")
	g.Expect(cl.Delete(ctx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
			err := cl.Get(ctx, key, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T still exists (err %v)", obj, err)
		}
		var pods corev1.PodList
		g.Expect(cl.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
		var slices discoveryv1.EndpointSliceList
		g.Expect(cl.List(ctx, &slices, client.InNamespace(ns))).To(Succeed())
		g.Expect(slices.Items).To(BeEmpty())
	}).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
}

func TestForeignDeploymentIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	defer func() { mgr.DumpLogsOnFailure(t.Failed()) }()
	ns := createNamespace(t, "mc-foreign")
	out, err := kc.Kubectl(ctx, "-n", ns, "create", "deployment", "taken", "--image=nginx:1.27", "--replicas=1")
	g.Expect(err).NotTo(HaveOccurred(), out)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}, Spec: cachev1alpha1.MemcachedSpec{}}
	mc.Spec.Size = new(int32)
	*mc.Spec.Size = 4
	g.Expect(cl.Create(ctx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonForeignObject))
	}).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	dep := &appsv1.Deployment{}
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(mc), dep)).To(Succeed())
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(dep.OwnerReferences).To(BeEmpty())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
}
