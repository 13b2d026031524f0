package plugin

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runbook-dev/runbook/test/testenv"
)

// get is one jsonpath of an object, read with the suite's kubectl.
func get(t *testing.T, ctx context.Context, jsonpath string, args ...string) string {
	t.Helper()
	out, err := suite.Kubectl(ctx, append([]string{"get", "-o", "jsonpath=" + jsonpath}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runbook runs `kubectl runbook ARGS` (plugin discovery on PATH) and fails
// the test when it fails.
func runbook(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, stderr, err := kubectl(ctx, suite.Kubeconfig, append([]string{"runbook"}, args...)...)
	if err != nil {
		t.Fatalf("kubectl runbook %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	t.Logf("$ kubectl runbook %s\n%s", strings.Join(args, " "), out)
	return out
}

// runbookFails runs the plugin and wants it to fail with a message
// containing want on stderr.
func runbookFails(t *testing.T, ctx context.Context, want string, args ...string) {
	t.Helper()
	out, stderr, err := kubectl(ctx, suite.Kubeconfig, append([]string{"runbook"}, args...)...)
	if err == nil || !strings.Contains(stderr, want) {
		t.Errorf("kubectl runbook %s: err %v, stdout %q, stderr %q; want a failure saying %q", strings.Join(args, " "), err, out, stderr, want)
	}
}

// TestPluginRestart fires RebootPolicies through the annotation the
// RebootPolicy controller handles once per nonce.
func TestPluginRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns := testenv.RandomName("plg-rs")
	apply(t, ctx, fmt.Sprintf(restartYAML, ns))
	t.Cleanup(func() { _, _ = suite.Kubectl(context.Background(), "delete", "namespace", ns, "--wait=false") })
	waitFor(t, ctx, "jsonpath={.status.policies[0].lastResult}=Success", "rbp/by-name", "-n", ns)
	const annotation = `{.metadata.annotations.autoreboot\.runbook\.dev/restart-request}`

	out := runbook(t, ctx, "restart", "by-name", "-n", ns, "--dry-run")
	if !strings.Contains(out, "server dry run: nothing was changed") || get(t, ctx, annotation, "rbp/by-name", "-n", ns) != "" {
		t.Errorf("--dry-run set the annotation or did not say it was a dry run:\n%s", out)
	}

	runbookFails(t, ctx, fmt.Sprintf("2 RebootPolicies target Deployment %s/web (by-name, by-selector): choose one with --policy", ns), "restart", "deployment/web", "-n", ns)
	out = runbook(t, ctx, "restart", "deployment/web", "--policy", "by-selector", "-n", ns, "--wait", "--timeout", "3m")
	m := regexp.MustCompile(`nonce (\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "handled: RebootPolicy "+ns+"/by-selector took request "+m[1]) {
		t.Fatalf("restart --wait did not print the nonce and its handling:\n%s", out)
	}
	if got := get(t, ctx, annotation, "rbp/by-selector", "-n", ns); got != m[1] {
		t.Errorf("annotation %q, want the nonce %q", got, m[1])
	}
	if got := get(t, ctx, "{.status.lastRestartRequest}", "rbp/by-selector", "-n", ns); got != m[1] {
		t.Errorf("status.lastRestartRequest %q, want %q", got, m[1])
	}
	// Every target of by-selector restarts once: web and web2.
	for _, d := range []string{"web", "web2"} {
		waitFor(t, ctx, "jsonpath={.spec.template.metadata.annotations.autoreboot\\.runbook\\.dev/restartedAt}", "deployment/"+d, "-n", ns)
	}
	waitFor(t, ctx, "jsonpath={.status.restartCount}=2", "rbp/by-selector", "-n", ns)
	if got := get(t, ctx, "{.status.restartCount}", "rbp/by-name", "-n", ns); got != "0" && got != "" {
		t.Errorf("by-name was not fired but restarted %s times", got)
	}

	runbookFails(t, ctx, "RebootPolicy absent not found (namespace "+ns, "restart", "absent", "-n", ns)
	runbookFails(t, ctx, "no RebootPolicy in namespace "+ns+" targets Deployment "+ns+"/api", "restart", "deploy/api", "-n", ns)
	runbookFails(t, ctx, "Deployment ghost not found", "restart", "deploy/ghost", "-n", ns)
	runbookFails(t, ctx, "want REBOOTPOLICY or KIND/NAME", "restart", "pod/x", "-n", ns)
	runbookFails(t, ctx, "--dry-run=client is not supported", "restart", "by-name", "-n", ns, "--dry-run=client")
	runbookFails(t, ctx, "--wait with --dry-run", "restart", "by-name", "-n", ns, "--dry-run", "--wait")
	runbookFails(t, ctx, "is suspended", "restart", "paused", "-n", ns)
}

// TestPluginWakeParkUnpark edits NSScalers' spec.wake and watches the
// controller restore and park again.
func TestPluginWakeParkUnpark(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	id := testenv.RandomName("plg-wk")
	now := time.Now().UTC()
	from, until := now.Add(-time.Hour).Format(time.RFC3339), now.Add(3*time.Hour).Truncate(time.Second).Format(time.RFC3339)
	apply(t, ctx, fmt.Sprintf(wakeYAML, id, from, until))
	t.Cleanup(func() {
		_, _ = suite.Kubectl(context.Background(), "delete", "nsscaler", id+"-a", id+"-b", id+"-c", "--ignore-not-found", "--wait=false")
		_, _ = suite.Kubectl(context.Background(), "delete", "namespace", id+"-a-1", id+"-b-1", "--wait=false")
	})
	a, b := id+"-a-1", id+"-b-1"
	replicas := func(ns, want string) { waitFor(t, ctx, "jsonpath={.spec.replicas}="+want, "deployment/api", "-n", ns) }
	replicas(a, "0")
	replicas(b, "0")
	wake := func(scaler string) string { return get(t, ctx, "{.spec.wake}", "nsscaler/"+scaler) }

	out := runbook(t, ctx, "wake", a, "--for", "2h", "--dry-run")
	if !strings.Contains(out, "server dry run") || wake(id+"-a") != "" {
		t.Errorf("wake --dry-run changed spec.wake (%s):\n%s", wake(id+"-a"), out)
	}
	out = runbook(t, ctx, "wake", a, "--for", "2h")
	if !strings.Contains(out, "namespace "+a+" runs until") || !strings.Contains(wake(id+"-a"), `"namespace":"`+a+`"`) {
		t.Errorf("wake: spec.wake %s\n%s", wake(id+"-a"), out)
	}
	replicas(a, "2")
	runbook(t, ctx, "park", a)
	if got := wake(id + "-a"); got != "" {
		t.Errorf("park left spec.wake %s", got)
	}
	replicas(a, "0")
	runbookFails(t, ctx, "NSScaler "+id+"-a has no schedule", "unpark", a)

	// b sleeps in an exception until `until`: unpark wakes it until then.
	out = runbook(t, ctx, "unpark", b)
	if got := get(t, ctx, "{.spec.wake[0].until}", "nsscaler/"+id+"-b"); got != until || !strings.Contains(out, "runs until "+until) {
		t.Errorf("unpark: spec.wake until %q, want %q:\n%s", got, until, out)
	}
	replicas(b, "2")

	// A second NSScaler selecting a's namespace: the plugin wants --scaler.
	apply(t, ctx, fmt.Sprintf(rivalYAML, id))
	runbookFails(t, ctx, "namespace "+a+" is selected by 2 NSScalers ("+id+"-a, "+id+"-c; "+id+"-a is the oldest", "wake", a, "--for", "1h")
	runbook(t, ctx, "wake", a, "--for", "1h", "--scaler", id+"-a")
	replicas(a, "2")

	runbookFails(t, ctx, "namespace "+id+"-nope not found", "wake", id+"-nope", "--for", "1h")
	runbookFails(t, ctx, "no NSScaler selects namespace default", "park", "default")
	runbookFails(t, ctx, "wake needs --for", "wake", a)
	runbookFails(t, ctx, "NSScaler ghost not found", "park", a, "--scaler", "ghost")
}

// restartYAML: %[1]s is the namespace.
const restartYAML = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data: {v: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s, labels: {tier: front}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web2, namespace: %[1]s, labels: {tier: front}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web2}}
  template:
    metadata: {labels: {app: web2}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: nginx:1.27}]}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: by-name, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: web}
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 5}}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: by-selector, namespace: %[1]s}
spec:
  target: {kind: Deployment, selector: {matchLabels: {tier: front}}}
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 5}}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: paused, namespace: %[1]s}
spec:
  suspend: true
  target: {kind: Deployment, name: legacy}
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 5}}
`

// wakeYAML: %[1]s prefixes the names; %[2]s to %[3]s is an Asleep
// exception of NSScaler b (around now).
const wakeYAML = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s-a-1}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s-b-1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %[1]s-a-1}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %[1]s-b-1}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: nginx:1.27}]}
---
apiVersion: scaling.runbook.dev/v1alpha1
kind: NSScaler
metadata: {name: %[1]s-a}
spec:
  namespacePrefix: %[1]s-a-
---
apiVersion: scaling.runbook.dev/v1alpha1
kind: NSScaler
metadata: {name: %[1]s-b}
spec:
  namespacePrefix: %[1]s-b-
  schedule:
    exceptions:
    - {name: maintenance, from: "%[2]s", until: "%[3]s", phase: Asleep}
`

// rivalYAML: a younger NSScaler selecting the namespaces of %[1]s-a.
const rivalYAML = `apiVersion: scaling.runbook.dev/v1alpha1
kind: NSScaler
metadata: {name: %[1]s-c}
spec:
  namespacePrefix: %[1]s-a-
`
