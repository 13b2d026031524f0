// Package realnode tests Runbook's cluster on a real node: pods there run
// real containers (containerd and runc on this machine), reached through
// kube-proxy's Services, while kwok keeps faking the other nodes.
package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/cluster/realnode"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	kc      *cluster.Suite
	node    *realnode.Node
	cs      kubernetes.Interface
	k8s     client.Client
	manager *cluster.Manager
)

func TestMain(m *testing.M) {
	if os.Getenv(childKubeconfigEnv) != "" {
		os.Exit(runAbandonedNodeChild())
	}
	testenv.RunSuite(m, "root, a local kwok cluster (make k8s-binaries), the real node's binaries (make node-binaries) and its images (bin/node-images)", run)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := realnode.Supported(); err != nil {
		fmt.Fprintln(os.Stderr, "this machine cannot run a real node:", err)
		return 1
	}
	logf.SetLogger(logr.Discard())
	var err error
	if kc, err = cluster.StartSuite(ctx, cluster.Options{Nodes: 2, NamePrefix: "realnode", ForRealNode: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer kc.Stop()
	if cs, err = kubernetes.NewForConfig(kc.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	if k8s, err = client.New(kc.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := kc.Kubectl(ctx, "create", "namespace", "runbook-system"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if manager, err = startHostManager(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = manager.Stop() }()
	if node, err = startNode(ctx, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, node.Logs(40))
	}
	manager.DumpLogsOnFailure(code != 0)
	if err := stopAndCheck(context.Background(), node); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// startHostManager runs the manager as a local process against the cluster;
// the pods it restarts are real. It may probe MariaDB on the machine's
// loopback. The memcached TLS agent is the node's image; Secrets are read
// again every 10s so that a CA change rolls within a test's patience.
// Reloader's annotations are honoured (--reloader-compat): only workloads
// that carry them are affected.
func startHostManager(ctx context.Context) (*cluster.Manager, error) {
	tlsAgent, err := realnode.ImageRef("memcached-tls-agent")
	if err != nil {
		return nil, err
	}
	return cluster.StartManager(ctx, kc.ManagerBinary, kc.Kubeconfig, "--controllers=rebootpolicy,nsscaler,memcached",
		"--operator-namespace=runbook-system", "--reloader-compat", "--probe-allow=127.0.0.1:3306",
		"--memcached-tls-agent-image="+tlsAgent, "--memcached-secret-resync-period=10s")
}

// pauseHostManager stops the local manager until the test ends, so that a
// manager installed in the cluster is the only one acting.
func pauseHostManager(t *testing.T) {
	t.Helper()
	if err := manager.Stop(); err != nil {
		t.Logf("stopping the local manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		m, err := startHostManager(ctx)
		if err != nil {
			t.Fatalf("restarting the local manager: %v", err)
		}
		manager = m
	})
}

func startNode(ctx context.Context, name string) (*realnode.Node, error) {
	return realnode.Start(ctx, realnode.Options{
		Kubeconfig:  kc.Kubeconfig,
		ServiceCIDR: cluster.ServiceCIDR,
		ClientCA:    filepath.Join(kc.PKIDir(), "ca.crt"),
		Name:        name,
		Log:         func(f string, a ...any) { fmt.Printf("realnode: "+f+"\n", a...) },
	})
}

// stopAndCheck stops the node and fails when anything of it is left on the
// machine.
func stopAndCheck(ctx context.Context, n *realnode.Node) error {
	fp, err := n.Footprint(ctx)
	n.Stop()
	if err != nil {
		return fmt.Errorf("recording the node's footprint: %w", err)
	}
	if left := fp.Left(); len(left) > 0 {
		return fmt.Errorf("node %s left behind:\n  %s", n.Name, strings.Join(left, "\n  "))
	}
	return nil
}

func newNamespace(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "rn-" + hex.EncodeToString(b)
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// nodeTolerations let a pod onto the real node (tainted so that nothing
// else lands there).
func nodeTolerations() []corev1.Toleration {
	return []corev1.Toleration{{Key: realnode.TaintKey, Operator: corev1.TolerationOpEqual, Value: realnode.TaintValue, Effect: corev1.TaintEffectNoSchedule}}
}

// webPod is the web image on the real node: it answers GET /env with its
// environment, so a client can tell which container it reached.
func webPod(name string, labels map[string]string, env ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{realnode.LabelKey: realnode.LabelValue},
			Tolerations:                   nodeTolerations(),
			TerminationGracePeriodSeconds: new(int64(5)),
			Containers: []corev1.Container{{
				Name:            "web",
				Image:           node.Images["web"],
				ImagePullPolicy: corev1.PullIfNotPresent,
				Env:             env,
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/env", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

// waitReady waits for the pod's Ready condition and returns the pod.
func waitReady(t *testing.T, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	eventually(t, timeout, "pod "+ns+"/"+name+" Ready", func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
	return last
}

// eventually polls check until it succeeds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, 200*time.Millisecond, timeout, what, check)
}

// httpGet fetches url through dial (the node's or a pod's network namespace).
func httpGet(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

func containerID(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	return strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
}

// runningContainers is `crictl ps -q` on the node: the running containers.
func runningContainers(t *testing.T, n *realnode.Node) []string {
	t.Helper()
	out, err := n.Crictl(context.Background(), "ps", "-q")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
