// Package plugin runs `kubectl runbook` end to end: the plugin binary found
// by the real kubectl's plugin discovery on PATH, against a kwok cluster on
// which the real manager reconciles RebootPolicies, Memcacheds and NSScalers
// into every state the status table knows.
package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	suite     *cluster.Suite
	pluginDir string
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "a local cluster (kwok), the manager and the plugin binaries", run)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	suite, err = cluster.StartSuite(ctx, cluster.Options{Nodes: 2, NamePrefix: "plugin"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	// Installed the way docs/plugin.md says: go install (the binary is
	// named after its directory, kubectl-runbook).
	pluginDir = filepath.Join(suite.WorkDir, "plugins")
	install := exec.CommandContext(ctx, "go", "install", "./cmd/kubectl-runbook")
	install.Dir = testenv.RepoRoot()
	install.Env = append(os.Environ(), "GOBIN="+pluginDir)
	if out, err := install.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go install ./cmd/kubectl-runbook: %v\n%s", err, out)
		return 1
	}
	if _, err := suite.Kubectl(ctx, "create", "namespace", "runbook-system"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := cluster.StartManager(ctx, suite.ManagerBinary, suite.Kubeconfig, "--operator-namespace=runbook-system")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the manager:", err)
		return 1
	}
	code := m.Run()
	mgr.DumpLogsOnFailure(code != 0)
	_ = mgr.Stop()
	return code
}

// kubectl runs bin/k8s/kubectl as a user would: KUBECONFIG set, the plugin
// directory first on PATH. It returns stdout, stderr and the error.
func kubectl(ctx context.Context, kubeconfig string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "kubectl"), args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		pathWith(pluginDir))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// pathWith is a PATH with dir first and without the directories of the
// inherited PATH that hold another kubectl-runbook (make puts bin/ on PATH,
// and `make plugin` or the demo may have built one there): kubectl refuses a
// plugin shadowed by another of the same name, and the test must run the
// one it built.
func pathWith(dir string) string {
	parts := []string{dir}
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(p, "kubectl-runbook")); err == nil {
			continue
		}
		parts = append(parts, p)
	}
	return "PATH=" + strings.Join(parts, string(os.PathListSeparator))
}

type row struct {
	Kind, Namespace, Name, State, Reason, Details string
}

type statusJSON struct {
	Items   []row          `json:"items"`
	Summary map[string]int `json:"summary"`
}

func find(rows []row, kind, ns, name string) *row {
	for i := range rows {
		if rows[i].Kind == kind && rows[i].Namespace == ns && rows[i].Name == name {
			return &rows[i]
		}
	}
	return nil
}

// parseTable splits the table kubectl runbook status -A prints (columns
// separated by two or more spaces; DETAILS may contain single spaces).
func parseTable(t *testing.T, out string) ([]row, string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 3 || !regexp.MustCompile(`^KIND\s+NAMESPACE\s+NAME\s+STATE\s+REASON\s+DETAILS$`).MatchString(lines[0]) {
		t.Fatalf("not a status table:\n%s", out)
	}
	sep := regexp.MustCompile(`\s{2,}`)
	var rows []row
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		f := sep.Split(l, 6)
		if len(f) < 5 {
			t.Fatalf("row %q has %d columns", l, len(f))
		}
		r := row{Kind: f[0], Namespace: f[1], Name: f[2], State: f[3], Reason: f[4]}
		if len(f) == 6 {
			r.Details = f[5]
		}
		if r.Namespace == "-" {
			r.Namespace = ""
		}
		rows = append(rows, r)
	}
	return rows, lines[len(lines)-1]
}

// TestPluginStatus creates one object per state, then reads them back
// through `kubectl runbook status`.
func TestPluginStatus(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id := testenv.RandomName("plg")
	ns, parkedNS, runningNS := id, id+"-park", id+"-run"

	t.Run("kubectl finds the plugin on PATH", func(t *testing.T) {
		out, stderr, err := kubectl(ctx, suite.Kubeconfig, "plugin", "list")
		if err != nil {
			t.Fatalf("kubectl plugin list: %v\n%s", err, stderr)
		}
		if want := filepath.Join(pluginDir, "kubectl-runbook"); !strings.Contains(out, want) {
			t.Fatalf("kubectl plugin list does not list %s:\n%s", want, out)
		}
		if strings.Contains(stderr, "warning") {
			t.Errorf("kubectl warns about the plugin: %s", stderr)
		}
	})

	apply(t, ctx, fmt.Sprintf(objectsYAML, ns, parkedNS, runningNS, id))
	t.Cleanup(func() {
		_, _ = suite.Kubectl(context.Background(), "delete", "nsscaler", id, "--wait=false")
		_, _ = suite.Kubectl(context.Background(), "delete", "namespace", ns, parkedNS, runningNS, "--wait=false")
	})

	// The cooldown RebootPolicy: a first change restarts nginx, a second one
	// within minRestartInterval (1h) stays pending.
	waitFor(t, ctx, "jsonpath={.status.policies[0].lastResult}=Success", "rbp/on-config-cooldown", "-n", ns)
	patchConfig(t, ctx, ns, "2")
	waitFor(t, ctx, "jsonpath={.status.restartCount}=1", "rbp/on-config-cooldown", "-n", ns)
	patchConfig(t, ctx, ns, "3")

	want := map[[3]string][2]string{
		{"RebootPolicy", ns, "on-config"}:          {"Healthy", "Reconciled"},
		{"RebootPolicy", ns, "on-config-cooldown"}: {"Pending", "RestartPending"},
		{"RebootPolicy", ns, "no-target"}:          {"Degraded", "TargetNotFound"},
		{"RebootPolicy", ns, "paused"}:             {"Suspended", "Suspended"},
		{"Memcached", ns, "cache"}:                 {"Healthy", "AllInstancesAvailable"},
		{"Memcached", ns, "parked-cache"}:          {"Parked", "Parked"},
		{"NSScaler", "", id}:                       {"Parked", "AllPodsGone"},
	}
	var status statusJSON
	g.Eventually(func(g Gomega) {
		out, stderr, err := kubectl(ctx, suite.Kubeconfig, "runbook", "status", "-A", "-o", "json")
		g.Expect(err).NotTo(HaveOccurred(), stderr)
		status = statusJSON{}
		g.Expect(json.Unmarshal([]byte(out), &status)).To(Succeed())
		for k, v := range want {
			r := find(status.Items, k[0], k[1], k[2])
			g.Expect(r).NotTo(BeNil(), "%v missing", k)
			g.Expect([2]string{r.State, r.Reason}).To(Equal(v), "%v: %+v", k, r)
		}
	}, 4*time.Minute, time.Second).Should(Succeed())

	t.Run("status -A prints the table", func(t *testing.T) {
		// on-config polls the ConfigMap every 5s: its restart for the last
		// change may come after the JSON above matched, and it is Pending
		// until that rollout is done. The table is read once every object
		// is in the wanted state again.
		var out string
		var rows []row
		var summary string
		NewWithT(t).Eventually(func(g Gomega) {
			o, stderr, err := kubectl(ctx, suite.Kubeconfig, "runbook", "status", "-A")
			g.Expect(err).NotTo(HaveOccurred(), stderr)
			out = o
			rows, summary = parseTable(t, out)
			for k, v := range want {
				r := find(rows, k[0], k[1], k[2])
				g.Expect(r).NotTo(BeNil(), "%v missing", k)
				g.Expect([2]string{r.State, r.Reason}).To(Equal(v), "%v: %+v", k, r)
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
		t.Logf("kubectl runbook status -A:\n%s", out)
		if r := find(rows, "NSScaler", "", id); r == nil || !strings.Contains(r.Details, "parked: "+parkedNS) || !strings.Contains(r.Details, "running: "+runningNS) {
			t.Errorf("the NSScaler row does not say what is parked and what runs: %+v", r)
		}
		if r := find(rows, "RebootPolicy", ns, "no-target"); r == nil || !strings.Contains(r.Details, "no target") {
			t.Errorf("the degraded row does not say why: %+v", r)
		}
		if m := regexp.MustCompile(`^(\d+) objects: (\d+) healthy, (\d+) pending, (\d+) parked, (\d+) degraded, (\d+) suspended$`).FindStringSubmatch(summary); m == nil || m[1] != fmt.Sprint(len(rows)) {
			t.Errorf("summary line %q does not count the %d rows", summary, len(rows))
		}
	})

	t.Run("status -n shows one namespace and the NSScalers acting on it", func(t *testing.T) {
		out, stderr, err := kubectl(ctx, suite.Kubeconfig, "runbook", "status", "-n", parkedNS, "-o", "json")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var s statusJSON
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Items) != 1 || s.Items[0].Kind != "NSScaler" || s.Items[0].Name != id {
			t.Errorf("status -n %s = %+v, want only NSScaler %s", parkedNS, s.Items, id)
		}
		out, _, err = kubectl(ctx, suite.Kubeconfig, "runbook", "status", "-n", ns)
		if err != nil || strings.Contains(out, "NAMESPACE") || !strings.Contains(out, "on-config-cooldown") || strings.Contains(out, id+"  ") {
			t.Errorf("status -n %s: %v\n%s", ns, err, out)
		}
	})

	t.Run("savings shows what the parked namespace does not run", func(t *testing.T) {
		var rows []struct {
			NSScaler, Namespace string
			ParkedPods          int64
			PodHours            string
		}
		out, stderr, err := kubectl(ctx, suite.Kubeconfig, "runbook", "savings", id, "-o", "json")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		// api: 2 replicas of 250m and 128Mi, parked; the whitelisted
		// namespace was never parked, so it has no row.
		byNS := map[string]int64{}
		for _, r := range rows {
			byNS[r.Namespace] = r.ParkedPods
		}
		if _, listed := byNS[runningNS]; len(rows) != 2 || byNS[parkedNS] != 2 || byNS["TOTAL"] != 2 || listed {
			t.Errorf("savings rows %+v, want %s with 2 parked pods and the total", rows, parkedNS)
		}
		table, stderr, err := kubectl(ctx, suite.Kubeconfig, "runbook", "savings", id)
		if err != nil || !strings.Contains(table, "CPU CORE-HOURS") || !strings.Contains(table, parkedNS) {
			t.Errorf("savings table: %v %s\n%s", err, stderr, table)
		}
		t.Logf("kubectl runbook savings %s:\n%s", id, table)

		// --since 1d reaches before this NSScaler's first park (minutes
		// ago): the rows say where their figures start, and it is after the
		// UTC day the window asked for.
		var window []SavingsRowJSON
		out, stderr, err = kubectl(ctx, suite.Kubeconfig, "runbook", "savings", id, "--since", "1d", "-o", "json")
		if err != nil {
			t.Fatalf("--since: %v\n%s", err, stderr)
		}
		if err := json.Unmarshal([]byte(out), &window); err != nil {
			t.Fatal(err)
		}
		asked := time.Now().UTC().Add(-24 * time.Hour).Truncate(24 * time.Hour)
		for _, r := range window {
			from, err := time.Parse(time.RFC3339, r.Since)
			if err != nil || !r.BeyondHistory || !from.After(asked) || time.Since(from) > time.Hour {
				t.Errorf("--since 1d row %+v: want beyond the history, from this NSScaler's first park", r)
			}
		}
		if len(window) != 2 || window[0].Namespace != parkedNS || window[0].ParkedPods != 2 {
			t.Errorf("--since 1d rows %+v", window)
		}
		table, _, err = kubectl(ctx, suite.Kubeconfig, "runbook", "savings", id, "--since", "1d")
		if err != nil || !strings.Contains(table, "* --since reaches before the history kept") {
			t.Errorf("--since table: %v\n%s", err, table)
		}
	})

	t.Run("clear errors", func(t *testing.T) {
		for _, tc := range []struct {
			args       []string
			kubeconfig string
			want       string
		}{
			{[]string{"runbook", "status", "-o", "yaml"}, suite.Kubeconfig, `--output "yaml": want wide or json`},
			{[]string{"runbook", "status", "extra"}, suite.Kubeconfig, `unknown command "extra"`},
			{[]string{"runbook", "frobnicate"}, suite.Kubeconfig, `unknown command "frobnicate"`},
			{[]string{"runbook", "savings", "--since", "2099-01-01"}, suite.Kubeconfig, `--since "2099-01-01": in the future`},
			{[]string{"runbook", "status"}, filepath.Join(t.TempDir(), "absent"), "no cluster to talk to: set KUBECONFIG or pass --kubeconfig"},
		} {
			_, stderr, err := kubectl(ctx, tc.kubeconfig, tc.args...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("kubectl %v: err %v, stderr %q, want an error containing %q", tc.args, err, stderr, tc.want)
			}
		}
	})
}

// SavingsRowJSON is a row of kubectl runbook savings -o json (the fields
// read here).
type SavingsRowJSON struct {
	Namespace     string `json:"namespace"`
	ParkedPods    int64  `json:"parkedPods"`
	Since         string `json:"since"`
	BeyondHistory bool   `json:"beyondHistory"`
}

func apply(t *testing.T, ctx context.Context, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := suite.Kubectl(ctx, "apply", "--server-side", "-f", f); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, ctx context.Context, cond string, args ...string) {
	t.Helper()
	if _, err := suite.Kubectl(ctx, append([]string{"wait", "--for=" + cond, "--timeout=180s"}, args...)...); err != nil {
		t.Fatal(err)
	}
}

func patchConfig(t *testing.T, ctx context.Context, ns, v string) {
	t.Helper()
	if _, err := suite.Kubectl(ctx, "-n", ns, "patch", "configmap", "settings", "--type=merge", "-p", `{"data":{"v":"`+v+`"}}`); err != nil {
		t.Fatal(err)
	}
}

// objectsYAML: %[1]s is the namespace of the namespaced objects, %[2]s a
// namespace the NSScaler parks, %[3]s one it whitelists, %[4]s the
// NSScaler's name and namespace prefix.
const objectsYAML = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[2]s}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[3]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data: {v: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec: {containers: [{name: nginx, image: nginx:1.27}]}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: on-config, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: nginx}
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 5}}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: on-config-cooldown, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: nginx}
  minRestartInterval: 1h
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 1}}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: no-target, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: absent}
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 5}}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: paused, namespace: %[1]s}
spec:
  suspend: true
  target: {kind: Deployment, name: nginx}
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 5}}
---
apiVersion: cache.runbook.dev/v1alpha1
kind: Memcached
metadata: {name: cache, namespace: %[1]s}
spec: {size: 1}
---
apiVersion: cache.runbook.dev/v1alpha1
kind: Memcached
metadata: {name: parked-cache, namespace: %[1]s}
spec: {size: 0}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %[2]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: nginx:1.27, resources: {requests: {cpu: 250m, memory: 128Mi}}}]}
---
apiVersion: scaling.runbook.dev/v1alpha1
kind: NSScaler
metadata: {name: %[4]s}
spec:
  namespacePrefix: %[4]s-
  whitelist: [%[3]s]
`
