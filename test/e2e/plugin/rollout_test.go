package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestPluginRestartRollout: `restart rollout/NAME` fires the RebootPolicy
// targeting an Argo Rollouts Rollout, and the controller restarts it
// through spec.restartAt. Before the Rollout CRD (make argo-rollouts-crd)
// is installed the plugin says Argo Rollouts is missing; the test installs
// it, plays the Rollout controller (status), and removes it at the end.
func TestPluginRestartRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns := testenv.RandomName("plg-ro")
	if _, err := suite.Kubectl(ctx, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = suite.Kubectl(context.Background(), "delete", "namespace", ns, "--wait=false") })

	runbookFails(t, ctx, "Argo Rollouts is not installed", "restart", "rollout/front", "-n", ns)

	crd := filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "argoproj.io_rollouts.yaml")
	if _, err := suite.Kubectl(ctx, "apply", "--server-side", "-f", crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = suite.Kubectl(context.Background(), "delete", "-f", crd, "--wait") })
	if err := cluster.WaitEstablished(ctx, time.Minute, suite.Kubectl, "rollouts.argoproj.io"); err != nil {
		t.Fatal(err)
	}
	apply(t, ctx, fmt.Sprintf(rolloutYAML, ns))
	for _, name := range []string{"front", "other"} {
		// The Rollout controller's status: observed and healthy, so that
		// the restart is not held back for a rollout in progress.
		gen := get(t, ctx, "{.metadata.generation}", "rollout/"+name, "-n", ns)
		status := fmt.Sprintf(`{"status":{"observedGeneration":%q,"phase":"Healthy","replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2}}`, gen)
		if _, err := suite.Kubectl(ctx, "-n", ns, "patch", "rollout", name, "--subresource=status", "--type=merge", "-p", status); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "jsonpath={.status.policies[0].lastResult}=Success", "rbp/front", "-n", ns)

	// Only Argo Rollouts' own group names the kind.
	runbookFails(t, ctx, "want REBOOTPOLICY or KIND/NAME", "restart", "rollout.example.com/front", "-n", ns)
	runbookFails(t, ctx, "Rollout ghost not found", "restart", "rollout/ghost", "-n", ns)

	out := runbook(t, ctx, "restart", "rollout/front", "-n", ns, "--wait", "--timeout", "3m")
	if !strings.Contains(out, "handled: RebootPolicy "+ns+"/front took request") {
		t.Fatalf("restart --wait did not print the handling:\n%s", out)
	}
	waitFor(t, ctx, "jsonpath={.spec.restartAt}", "rollout/front", "-n", ns)
	// Through spec.restartAt only: the template is the Rollout
	// controller's and the user's; the other Rollout is not a target.
	if stamp := get(t, ctx, `{.spec.template.metadata.annotations.autoreboot\.runbook\.dev/restartedAt}`, "rollout/front", "-n", ns); stamp != "" {
		t.Errorf("the Rollout's template was stamped %q", stamp)
	}
	if at := get(t, ctx, "{.spec.restartAt}", "rollout/other", "-n", ns); at != "" {
		t.Errorf("rollout/other, not a target, was restarted at %s", at)
	}
	waitFor(t, ctx, "jsonpath={.status.restartCount}=1", "rbp/front", "-n", ns)
}

// rolloutYAML: %[1]s is the namespace. The RebootPolicy targets the
// Rollouts labelled tier=front.
const rolloutYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data: {v: "1"}
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: front, namespace: %[1]s, labels: {tier: front}}
spec:
  replicas: 2
  selector: {matchLabels: {app: front}}
  strategy: {canary: {}}
  template:
    metadata: {labels: {app: front}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: other, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: other}}
  strategy: {canary: {}}
  template:
    metadata: {labels: {app: other}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: front, namespace: %[1]s}
spec:
  target: {apiVersion: argoproj.io/v1alpha1, kind: Rollout, selector: {matchLabels: {tier: front}}}
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 5}}
`
