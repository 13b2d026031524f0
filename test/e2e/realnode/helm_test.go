package realnode

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runbook-dev/runbook/test/cluster"
)

// The chart as users install it, for real: the manager image from
// bin/node-images runs as two pods on the real node in a namespace that
// enforces the restricted Pod Security Standard, talks to the apiserver
// with its ServiceAccount through Service default/kubernetes, elects one
// leader, hands leadership over when the leader's pod goes, serves /metrics
// to an allowed ServiceAccount only, follows `helm upgrade` and leaves
// nothing labelled with the release after `helm uninstall`.
func TestHelmInstallsTheManagerInCluster(t *testing.T) {
	const (
		limit         = 512 << 20 // the chart's resources.limits.memory
		upgradedLimit = 256 << 20
		leaseDuration = 15 * time.Second // the manager's --leader-election-lease-duration default
	)
	ns := restrictedNamespace(t)
	assertRestrictedEnforced(t, ns)
	r := newRelease(t, ns)

	t0 := time.Now()
	r.install(t, nil)
	leader := r.leader(t, 5*time.Minute, "")
	t.Logf("helm install -> leader %s holds the Lease and is Ready: %.1fs", leader.Name, time.Since(t0).Seconds())
	pods := r.waitPods(t, 2, t0)
	for i := range pods {
		assertInClusterNonRoot(t, &pods[i])
	}

	scraper := serviceAccountToken(t, ns, "scraper")
	stranger := serviceAccountToken(t, ns, "stranger")
	bindMetricsReader(t, r, "scraper")
	assertMetricsAuth(t, leader, scraper, stranger)
	body := scrapeOK(t, leader, scraper)
	assertOneLeader(t, r, pods, scraper)
	rss, _ := metricValue(body, "process_resident_memory_bytes")
	t.Logf("leader's RSS (process_resident_memory_bytes): %s", mib(rss))
	assertMemoryLimit(t, leader, scraper, limit)

	// Deleting the leader's pod: it gives the Lease up on SIGTERM and the
	// standby takes it over.
	t1 := time.Now()
	must(t, cs.CoreV1().Pods(ns).Delete(context.Background(), leader.Name, metav1.DeleteOptions{}))
	next := r.leader(t, 2*leaseDuration, leader.Name)
	handover := time.Since(t1)
	t.Logf("leader %s deleted -> %s leads after %.1fs (lease duration %s)", leader.Name, next.Name, handover.Seconds(), leaseDuration)
	if handover > leaseDuration {
		t.Errorf("leadership moved after %s, more than the lease duration %s", handover, leaseDuration)
	}

	// helm upgrade to a smaller memory limit: new pods, and the Go runtime
	// of the new leader follows it (GOMEMLIMIT through the downward API).
	t2 := time.Now()
	r.helm(t, "upgrade", r.name, "charts/runbook", "--values",
		r.values(t, map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "256Mi"}}}))
	pods = r.waitPods(t, 2, t2)
	leader = r.leader(t, 3*time.Minute, "")
	if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == leader.Name }) {
		t.Fatalf("leader %s is not one of the upgraded pods", leader.Name)
	}
	t.Logf("helm upgrade -> leader %s of the new pods: %.1fs", leader.Name, time.Since(t2).Seconds())
	assertMemoryLimit(t, leader, scraper, upgradedLimit)

	t3 := time.Now()
	r.helm(t, "uninstall", r.name, "--wait", "--timeout", "5m")
	r.uninstalled = true
	assertNothingLabelled(t, r)
	t.Logf("helm uninstall -> nothing of the release left: %.1fs", time.Since(t3).Seconds())
}

// assertRestrictedEnforced proves the namespace's label is enforced: a pod
// that may run as root is refused.
func assertRestrictedEnforced(t *testing.T, ns string) {
	t.Helper()
	pod := webPod("root-allowed", nil)
	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("a pod violating the restricted standard in %s: %v, want it refused", ns, err)
	}
}

// assertInClusterNonRoot checks, on the node, the manager process of pod:
// UID 65532, no kubeconfig, the apiserver found through Service
// default/kubernetes (the in-cluster configuration).
func assertInClusterNonRoot(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	pid := containerPID(t, pod)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, err)
	var uid string
	for l := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
			uid = strings.Join(strings.Fields(rest), " ")
		}
	}
	if uid != "65532 65532 65532 65532" {
		t.Errorf("pod %s: manager process %d runs as UIDs %q, want 65532", pod.Name, pid, uid)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	must(t, err)
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if args[0] != "/manager" || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--kubeconfig") }) {
		t.Errorf("pod %s runs %q, want /manager without --kubeconfig", pod.Name, args)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	must(t, err)
	env := strings.Split(string(environ), "\x00")
	if !slices.Contains(env, "KUBERNETES_SERVICE_HOST="+cluster.KubernetesServiceIP) || slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "KUBECONFIG=") }) {
		t.Errorf("pod %s: environment %q, want the in-cluster configuration (KUBERNETES_SERVICE_HOST=%s, no KUBECONFIG)", pod.Name, env, cluster.KubernetesServiceIP)
	}
	t.Logf("pod %s: process %d on the node, UIDs %s, %s", pod.Name, pid, uid, strings.Join(args[:min(3, len(args))], " "))
}

// containerPID is the host pid of the pod's manager container (the node's
// processes share the host's pid namespace).
func containerPID(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	out, err := node.Crictl(context.Background(), "inspect", "-o", "go-template", "--template", "{{.info.pid}}", containerID(pod))
	must(t, err)
	var pid int
	if _, err := fmt.Sscan(out, &pid); err != nil || pid <= 0 {
		t.Fatalf("pod %s: no pid in %q", pod.Name, out)
	}
	return pid
}

// bindMetricsReader binds the chart's metrics reader ClusterRole to a
// ServiceAccount of the release namespace (what a Prometheus install does).
func bindMetricsReader(t *testing.T, r *release, sa string) {
	t.Helper()
	name := r.fullname() + "-test-" + sa
	_, err := cs.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.fullname() + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: r.ns, Name: sa}},
	}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// assertMetricsAuth: no token is 401, a token RBAC does not allow is 403.
func assertMetricsAuth(t *testing.T, pod *corev1.Pod, allowed, notAllowed string) {
	t.Helper()
	if code, body := scrape(t, pod, ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d %q, want 401", code, body)
	}
	if code, body := scrape(t, pod, notAllowed); code != http.StatusForbidden {
		t.Errorf("/metrics with a token not bound to the metrics reader: %d %q, want 403", code, body)
	}
	if code, body := scrape(t, pod, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a forged token: %d %q, want 401", code, body)
	}
	scrapeOK(t, pod, allowed)
}

// scrapeOK scrapes with an allowed token. A new RoleBinding reaches the
// apiserver's authorizer through its informer, a moment after it is
// written: a refusal is retried for a while.
func scrapeOK(t *testing.T, pod *corev1.Pod, token string) string {
	t.Helper()
	var body string
	eventually(t, time.Minute, "/metrics of "+pod.Name+" with an allowed token", func() error {
		code, b := scrape(t, pod, token)
		if code != http.StatusOK {
			return fmt.Errorf("%d %q", code, b)
		}
		body = b
		return nil
	})
	return body
}

// assertOneLeader: the Lease's holder is the only pod whose leader election
// metric says it leads.
func assertOneLeader(t *testing.T, r *release, pods []corev1.Pod, token string) {
	t.Helper()
	holder, err := r.holder()
	must(t, err)
	var leading []string
	for i := range pods {
		body := scrapeOK(t, &pods[i], token)
		if v, ok := metricValue(body, "leader_election_master_status", `name="`+r.lease()+`"`); ok && v == 1 {
			leading = append(leading, pods[i].Name)
		}
	}
	if !slices.Equal(leading, []string{holder.Name}) {
		t.Fatalf("pods leading by their metrics: %v; the Lease names %s", leading, holder.Name)
	}
}

// assertMemoryLimit: the Go runtime's memory limit is the container's.
func assertMemoryLimit(t *testing.T, pod *corev1.Pod, token string, want float64) {
	t.Helper()
	body := scrapeOK(t, pod, token)
	got, ok := metricValue(body, "go_gc_gomemlimit_bytes")
	if !ok || got != want {
		t.Fatalf("pod %s: go_gc_gomemlimit_bytes %v (found %v), want %v (resources.limits.memory)", pod.Name, got, ok, want)
	}
}
