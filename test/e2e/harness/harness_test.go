// Package harness proves the end-to-end cluster is a real one: fake nodes
// schedule pods that go Running, a rollout restart replaces every pod through
// a new ReplicaSet, and garbage collection removes a deleted Deployment's pods.
package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	kc     *cluster.Cluster
	client kubernetes.Interface
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "a local cluster (kwok)", run)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 3, NamePrefix: "harness"})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the e2e cluster:", err)
		return 1
	}
	defer c.Stop()
	kc = c
	client = kubernetes.NewForConfigOrDie(c.Config)
	return m.Run()
}

func TestThreeReadyNodes(t *testing.T) {
	g := NewWithT(t)
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(HaveLen(3))
	for _, n := range nodes.Items {
		g.Expect(nodeReady(n)).To(BeTrue(), "node %s not Ready", n.Name)
	}
}

func TestDeploymentRunsRestartsAndIsCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "harness-deploy")
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	_, err := client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	var first sets.Set[string]
	g.Eventually(func(g Gomega) {
		first = runningPods(g, ns, "app=web")
		g.Expect(first).To(HaveLen(3))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())

	// What `kubectl rollout restart` does, with the real kubectl.
	_, err = kc.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		g.Expect(err).NotTo(HaveOccurred())
		now := runningPods(g, ns, "app=web")
		g.Expect(now).To(HaveLen(3))
		g.Expect(now.Intersection(first).Len()).To(BeZero(), "old pods still running: %v", now.Intersection(first).UnsortedList())
		g.Expect(pods.Items).To(HaveLen(3), "old pods not yet gone")
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	rs, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rs.Items).To(HaveLen(2), "a restart goes through a new ReplicaSet")

	g.Expect(client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(BeEmpty())
		rs, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rs.Items).To(BeEmpty())
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
}

func TestManagerBinaryBecomesReadyAndStopsOnSIGTERM(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := cluster.BuildManager(ctx, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	// The manager refuses to start without its CRDs (its informers could not
	// sync), so install them the way a user does.
	_, err = kc.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"))
	g.Expect(err).NotTo(HaveOccurred())
	ns := createNamespace(t, "harness-manager")
	m, err := cluster.StartManager(ctx, bin, kc.Kubeconfig, "--leader-elect", "--leader-election-namespace", ns)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { m.DumpLogsOnFailure(t.Failed()) }()

	// It became leader (the Lease names it) and, on SIGTERM, gives the lease up
	// so a standby can take over without waiting for it to expire.
	g.Eventually(func(g Gomega) {
		l, err := client.CoordinationV1().Leases(ns).Get(ctx, "runbook.runbook.dev", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ptr.Deref(l.Spec.HolderIdentity, "")).NotTo(BeEmpty())
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(m.Stop()).To(Succeed())
	l, err := client.CoordinationV1().Leases(ns).Get(ctx, "runbook.runbook.dev", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ptr.Deref(l.Spec.HolderIdentity, "")).To(BeEmpty(), "lease not released on SIGTERM")
}

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func runningPods(g Gomega, ns, selector string) sets.Set[string] {
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	g.Expect(err).NotTo(HaveOccurred())
	out := sets.New[string]()
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out.Insert(string(p.UID))
		}
	}
	return out
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
