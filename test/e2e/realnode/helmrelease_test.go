package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runbook-dev/runbook/test/cluster/realnode"
	"github.com/runbook-dev/runbook/test/testenv"
)

// helmVersion is the Makefile's HELM_VERSION: `make tools` installs it.
const helmVersion = "v3.22.0"

// release is a Helm release of charts/runbook whose manager pods run on the
// real node from the manager image of bin/node-images.
type release struct {
	name, ns    string
	home        string // HELM_*_HOME: nothing of the user's is read or written
	uninstalled bool
}

// fullname is the chart's fullname for a release not named like the chart.
func (r *release) fullname() string { return r.name + "-runbook" }
func (r *release) lease() string    { return r.fullname() + ".runbook.dev" }
func (r *release) selector() string { return "app.kubernetes.io/instance=" + r.name }

func helmBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(testenv.RepoRoot(), "bin", "helm-"+helmVersion)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make tools`", p)
	}
	return p
}

// restrictedNamespace creates a namespace whose pods must meet the
// restricted Pod Security Standard.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "rn-helm-" + hex.EncodeToString(b)
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func newRelease(t *testing.T, ns string) *release {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return &release{name: "rb-" + hex.EncodeToString(b), ns: ns, home: t.TempDir()}
}

// values are the chart values every release of the suite needs: the local
// image (nothing can be pulled) and the real node's label and taint.
func (r *release) values(t *testing.T, extra map[string]any) string {
	t.Helper()
	ref := node.Images["manager"]
	repo, tag := splitImageRef(ref)
	v := map[string]any{
		"image":        map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
		"nodeSelector": map[string]string{realnode.LabelKey: realnode.LabelValue},
		"tolerations": []map[string]string{{
			"key": realnode.TaintKey, "operator": "Equal", "value": realnode.TaintValue, "effect": "NoSchedule",
		}},
	}
	for k, val := range extra {
		v[k] = val
	}
	data, err := json.Marshal(v) // JSON is YAML
	must(t, err)
	f := filepath.Join(t.TempDir(), "values.yaml")
	must(t, os.WriteFile(f, data, 0o600))
	return f
}

// splitImageRef splits repo:tag[@digest] into the chart's image.repository
// and image.tag (the digest stays with the tag: the chart joins them with ":").
func splitImageRef(ref string) (string, string) {
	name := ref
	digest := ""
	if i := strings.Index(ref, "@"); i >= 0 {
		name, digest = ref[:i], ref[i:]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[:i], name[i+1:] + digest
	}
	return name, "latest" + digest
}

// helm runs the real helm binary against the suite's cluster.
func (r *release) helm(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	all := append([]string{"--kubeconfig", kc.Kubeconfig, "--namespace", r.ns}, args...)
	cmd := exec.CommandContext(ctx, helmBinary(t), all...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(r.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(r.home, "config"), "HELM_DATA_HOME="+filepath.Join(r.home, "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// install installs the chart and uninstalls it at cleanup (unless the test
// did). It returns when helm returns, not when the pods run.
func (r *release) install(t *testing.T, extra map[string]any) {
	t.Helper()
	r.helm(t, "install", r.name, "charts/runbook", "--values", r.values(t, extra))
	t.Cleanup(func() {
		if !r.uninstalled {
			_, _ = exec.Command(helmBinary(t), "--kubeconfig", kc.Kubeconfig, "--namespace", r.ns, "uninstall", r.name, "--wait").CombinedOutput()
		}
	})
}

// leader waits until the release's Lease names a Ready manager pod and no
// other manager pod is terminating, and returns that pod.
func (r *release) leader(t *testing.T, timeout time.Duration, not string) *corev1.Pod {
	t.Helper()
	var leader *corev1.Pod
	eventually(t, timeout, "a Ready leader of "+r.lease(), func() error {
		pod, err := r.holder()
		if err != nil {
			return err
		}
		if pod.Name == not {
			return fmt.Errorf("the Lease is still held by %s", not)
		}
		if !podReady(pod) {
			return fmt.Errorf("leader %s is not Ready", pod.Name)
		}
		leader = pod
		return nil
	})
	return leader
}

// holder is the manager pod that holds the Lease now.
func (r *release) holder() (*corev1.Pod, error) {
	var lease coordinationv1.Lease
	if err := k8s.Get(context.Background(), clientKey(r.ns, r.lease()), &lease); err != nil {
		return nil, err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return nil, fmt.Errorf("lease %s has no holder", r.lease())
	}
	// controller-runtime's identity is <hostname>_<uuid>; a pod's hostname
	// is its name.
	podName, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return cs.CoreV1().Pods(r.ns).Get(context.Background(), podName, metav1.GetOptions{})
}

// pods lists the release's manager pods that are not being deleted.
func (r *release) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: r.selector()})
	must(t, err)
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// waitPods waits for want Ready manager pods on the real node, every one
// created after since, and returns them.
func (r *release) waitPods(t *testing.T, want int, since time.Time) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 5*time.Minute, fmt.Sprintf("%d Ready manager pods of %s", want, r.name), func() error {
		pods = r.pods(t)
		all, err := cs.CoreV1().Pods(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: r.selector()})
		if err != nil {
			return err
		}
		if len(all.Items) != want || len(pods) != want {
			return fmt.Errorf("%d pods (%d not terminating), want %d", len(all.Items), len(pods), want)
		}
		for _, p := range pods {
			if p.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
				return fmt.Errorf("pod %s is older than the change", p.Name)
			}
			if p.Spec.NodeName != node.Name || !podReady(&p) {
				return fmt.Errorf("pod %s on %q, phase %s, ready %v", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p))
			}
		}
		return nil
	})
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
