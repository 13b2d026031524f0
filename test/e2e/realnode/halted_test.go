package realnode

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestSequenceHaltsOnARealNeverReadyTarget: a RebootPolicy restarts two
// Deployments one at a time (maxConcurrent 1, progressDeadline 30s). Their
// web container listens on :8080 followed by the pod's restartedAt
// annotation (downward API): the running pods are healthy, but every pod
// of a restart crash-loops on a listen address it cannot parse — a real
// rollout that never becomes available. The sequence halts at the first
// target (Degraded RolloutHalted), the second one is never touched (no
// restart stamp, its container unchanged), and `kubectl runbook status`
// prints the halted line.
func TestSequenceHaltsOnARealNeverReadyTarget(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	names := []string{"halt-a", "halt-b"}
	containers := map[string][]string{}
	for _, name := range names {
		must(t, k8s.Create(ctx, breakingDeployment(ns, name)))
	}
	for _, name := range names {
		containers[name] = waitContainers(t, ns, name, 1, nil)
	}
	must(t, k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "seq"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target: autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment,
				Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "halt"}}},
			MinRestartInterval: &metav1.Duration{},
			Rollout:            &autorebootv1alpha1.RolloutSpec{MaxConcurrent: new(int32(1)), ProgressDeadline: &metav1.Duration{Duration: 30 * time.Second}},
			Policies: []autorebootv1alpha1.Policy{{Name: "settings", Trigger: autorebootv1alpha1.Trigger{
				Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "settings", PeriodSeconds: 2}}}},
		},
	}))
	eventually(t, time.Minute, "the policy reconciled", func() error {
		if c := readyCondition(getPolicy(t, ns, "seq")); c == nil {
			return fmt.Errorf("no Ready condition yet")
		}
		return nil
	})

	t0 := time.Now()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"e2e-1"}}}`, autorebootv1alpha1.RestartRequestAnnotation)
	must(t, k8s.Patch(ctx, &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "seq"}},
		client.RawPatch(types.MergePatchType, []byte(patch))))

	var halted *autorebootv1alpha1.HaltedRestart
	eventually(t, 4*time.Minute, "the rollout halted", func() error {
		p := getPolicy(t, ns, "seq")
		if p.Status.Rollout == nil || p.Status.Rollout.Halted == nil {
			return fmt.Errorf("not halted; conditions %v", p.Status.Conditions)
		}
		halted = p.Status.Rollout.Halted
		return nil
	})
	t.Logf("halted after %s at %s %s: %s (%s)", time.Since(t0).Round(time.Second), halted.Kind, halted.Name, halted.Reason, halted.Message)
	if halted.Name != "halt-a" {
		t.Fatalf("halted at %s, want halt-a (the first in name order)", halted.Name)
	}
	// The first target's new pod really crash-loops.
	crashing := newPodState(t, ns, "halt-a")
	t.Logf("halt-a's new pod: %s", crashing)

	// The second target stays untouched while halted.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		d := &appsv1.Deployment{}
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "halt-b"}, d))
		if stamp := d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; stamp != "" {
			t.Fatalf("halt-b restarted (%s) while the rollout was halted", stamp)
		}
		if c := readyCondition(getPolicy(t, ns, "seq")); c == nil || c.Reason != autorebootv1alpha1.ReasonRolloutHalted {
			t.Fatalf("Ready %v, want reason RolloutHalted", c)
		}
		time.Sleep(time.Second)
	}
	if now := waitContainers(t, ns, "halt-b", 1, nil); strings.Join(now, ",") != strings.Join(containers["halt-b"], ",") {
		t.Fatalf("halt-b's container changed: %v -> %v", containers["halt-b"], now)
	}

	out := pluginStatus(t, ns)
	t.Logf("kubectl runbook status -n %s:\n%s", ns, out)
	if !strings.Contains(out, "RolloutHalted") || !strings.Contains(out, "halt-a") || !strings.Contains(out, "kubectl runbook resume seq") {
		t.Fatalf("the status output lacks the halted line")
	}
}

// breakingDeployment runs one web container listening on :8080 plus the
// pod's restartedAt annotation: fine until restarted by a RebootPolicy.
func breakingDeployment(ns, name string) *appsv1.Deployment {
	d := realDeployment(ns, name, 1)
	d.Labels["tier"] = "halt"
	c := &d.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "STAMP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['" + autorebootv1alpha1.RestartedAtAnnotation + "']"}}})
	c.Args = []string{"-listen=:8080$(STAMP)"}
	return d
}

func readyCondition(p *autorebootv1alpha1.RebootPolicy) *metav1.Condition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == autorebootv1alpha1.ConditionReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// newPodState describes the app's pods that are not ready (the restart's).
func newPodState(t *testing.T, ns, app string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	must(t, err)
	var out []string
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			if !s.Ready {
				state := "waiting"
				if s.State.Waiting != nil {
					state = s.State.Waiting.Reason
				} else if s.LastTerminationState.Terminated != nil {
					state = fmt.Sprintf("exited %d", s.LastTerminationState.Terminated.ExitCode)
				}
				out = append(out, fmt.Sprintf("%s %s, %d restarts", p.Name, state, s.RestartCount))
			}
		}
	}
	return strings.Join(out, "; ")
}

// pluginStatus builds the plugin from the working tree and runs
// `kubectl-runbook status -n ns` against the cluster.
func pluginStatus(t *testing.T, ns string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-runbook")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-runbook")
	build.Dir = testenv.RepoRoot()
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, b)
	}
	out, err := exec.Command(bin, "status", "-n", ns, "--kubeconfig", kc.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl runbook status: %v\n%s", err, out)
	}
	return string(out)
}
