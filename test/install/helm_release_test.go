package install

import (
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runbook-dev/runbook/test/testenv"
)

// helmTemplateRelease renders the chart as release in ns.
func helmTemplateRelease(t *testing.T, release, ns string, extra ...string) objectSet {
	t.Helper()
	args := append([]string{"template", release, repoPath("charts", "runbook"), "--namespace", ns}, extra...)
	r, err := runCommand(testenv.RepoRoot(), nil, nil, helmBin(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return objectSet(decodeObjects(t, r.stdout))
}

// withMonitoring turns on every object that carries a name or refers to the
// manager by one.
var withMonitoring = append([]string{"--set", "monitoring.prometheusRule.enabled=true",
	"--set", "monitoring.grafanaDashboards.enabled=true"}, allOptional...)

// argValue is the value of --name=value in args ("" when absent).
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

var (
	leaseInExpr = regexp.MustCompile(`leader_election_master_status\{([^}]*)\}`)
	matcher     = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// leaderSelectors are the label matchers of every leader-election series
// the PrometheusRule's expressions select.
func leaderSelectors(t *testing.T, objs objectSet) []map[string]string {
	t.Helper()
	rule := objs.one(t, "PrometheusRule")
	var out []map[string]string
	for _, g := range rule.Object["spec"].(map[string]any)["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			expr, _ := r.(map[string]any)["expr"].(string)
			for _, m := range leaseInExpr.FindAllStringSubmatch(expr, -1) {
				sel := map[string]string{}
				for _, kv := range matcher.FindAllStringSubmatch(m[1], -1) {
					sel[kv[1]] = kv[2]
				}
				out = append(out, sel)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the PrometheusRule selects no leader_election_master_status series")
	}
	return out
}

// TestHelmLongReleaseNameKeepsNamesWithinLimits: a release name of 40
// characters renders every name within 63 characters (a Service name is a
// DNS label), with each name's fixed suffix kept, and what refers to a name
// (bindings, the volume, the alerts' scrape job) still finds it.
func TestHelmLongReleaseNameKeepsNamesWithinLimits(t *testing.T) {
	release := "payments-team-operators-europe-west-prod"
	if len(release) != 40 {
		t.Fatalf("release name of %d characters", len(release))
	}
	objs := helmTemplateRelease(t, release, helmNamespace, withMonitoring...)
	for _, o := range objs {
		if n := len(o.GetName()); n > 63 {
			t.Errorf("%s %s: name of %d characters", o.GetKind(), o.GetName(), n)
		}
	}
	svc := convert[corev1.Service](t, objs.one(t, "Service"))
	if !strings.HasSuffix(svc.Name, "-controller-manager-metrics-service") || !strings.HasPrefix(svc.Name, "payments-team") {
		t.Errorf("metrics Service %q: the suffix must be kept and the release name cut", svc.Name)
	}
	dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
	checkManagerDeployment(t, objs, dep)
	checkBindingsNameServiceAccount(t, objs, dep.Spec.Template.Spec.ServiceAccountName, helmNamespace)
	checkMetricsService(t, objs, dep)
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			objs.named(t, "ConfigMap", v.ConfigMap.Name)
		}
	}
	for _, sel := range leaderSelectors(t, objs) {
		if sel["job"] != svc.Name {
			t.Errorf("an alert selects job %q, but prometheus-operator names the job after the Service %q", sel["job"], svc.Name)
		}
	}
}

// TestHelmTwoReleasesInOneNamespace: two releases in one namespace elect
// their leaders on different Leases (a shared Lease would let one
// release's leader silence the other's), share no object name, and the
// alerts of each select its own Lease and job.
func TestHelmTwoReleasesInOneNamespace(t *testing.T) {
	leases := map[string]string{}
	names := map[string]string{}
	for _, release := range []string{"runbook", "runbook-canary"} {
		objs := helmTemplateRelease(t, release, helmNamespace, withMonitoring...)
		dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
		lease := argValue(dep.Spec.Template.Spec.Containers[0].Args, "--leader-election-id")
		if lease == "" {
			t.Fatalf("%s: the manager gets no --leader-election-id: every release shares the flag's default Lease", release)
		}
		if other, ok := leases[lease]; ok {
			t.Errorf("releases %s and %s share the Lease %s", other, release, lease)
		}
		leases[lease] = release
		svc := objs.one(t, "Service")
		for _, sel := range leaderSelectors(t, objs) {
			if sel["name"] != "" && sel["name"] != lease {
				t.Errorf("%s: an alert selects the Lease %q, the manager elects on %q", release, sel["name"], lease)
			}
			if sel["job"] != svc.GetName() {
				t.Errorf("%s: an alert selects job %q, the metrics Service is %q", release, sel["job"], svc.GetName())
			}
		}
		for _, o := range objs {
			key := o.GetKind() + "/" + o.GetName()
			if other, ok := names[key]; ok && o.GetKind() != "CustomResourceDefinition" {
				t.Errorf("releases %s and %s both render %s", other, release, key)
			}
			names[key] = release
		}
	}
	// The release named like the chart keeps the Lease of config/default.
	if leases["runbook.runbook.dev"] != "runbook" {
		t.Errorf("Leases %v: the release runbook should elect on runbook.runbook.dev, as before", leases)
	}
}

// TestConfigDefaultAlertsSelectItsLease: the kustomize install's alerts
// name the Lease its manager elects on.
func TestConfigDefaultAlertsSelectItsLease(t *testing.T) {
	objs := objectSet(decodeObjects(t, kustomizeBuild(t, enableOptional(t, "- ../prometheus"))))
	dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
	lease := argValue(dep.Spec.Template.Spec.Containers[0].Args, "--leader-election-id")
	if lease == "" {
		t.Fatal("config/manager passes no --leader-election-id: the alerts would depend on a flag default")
	}
	for _, sel := range leaderSelectors(t, objs) {
		if sel["name"] != "" && sel["name"] != lease {
			t.Errorf("an alert selects the Lease %q, the manager elects on %q", sel["name"], lease)
		}
	}
}

// TestHelmManagerReplicasSpreadAndSurviveDrains: the two replicas prefer
// different nodes and a PodDisruptionBudget keeps one of them through a
// drain; one replica gets no budget (it would block every drain).
func TestHelmManagerReplicasSpreadAndSurviveDrains(t *testing.T) {
	objs := helmTemplateRelease(t, "runbook", helmNamespace)
	dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
	pod := labels.Set(dep.Spec.Template.Labels)
	// Another release's pods are not what this one spreads from or keeps.
	other := labels.Set{}
	for k, v := range pod {
		other[k] = v
	}
	other["app.kubernetes.io/instance"] = "other"
	aff := dep.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Errorf("no preferred pod anti-affinity: %+v", aff)
	} else {
		term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || term.TopologyKey != corev1.LabelHostname || !sel.Matches(pod) {
			t.Errorf("anti-affinity term %+v: want the manager's own pods spread over kubernetes.io/hostname", term)
		}
		if sel.Matches(other) {
			t.Error("the anti-affinity selects other releases' managers too")
		}
	}
	pdb := convert[policyv1.PodDisruptionBudget](t, objs.one(t, "PodDisruptionBudget"))
	pdbSel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || !pdbSel.Matches(pod) || pdbSel.Matches(other) {
		t.Errorf("PodDisruptionBudget %+v: want minAvailable 1 over this release's manager pods", pdb.Spec)
	}
	if pdb.Namespace != helmNamespace {
		t.Errorf("PodDisruptionBudget in %q", pdb.Namespace)
	}

	single := helmTemplateRelease(t, "runbook", helmNamespace, "--set", "replicaCount=1")
	if n := len(single.ofKind("PodDisruptionBudget")); n != 0 {
		t.Errorf("%d PodDisruptionBudgets for one replica: it would block every node drain", n)
	}
	own := helmTemplateRelease(t, "runbook", helmNamespace, "--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
		"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists")
	ownAff := convert[appsv1.Deployment](t, own.one(t, "Deployment")).Spec.Template.Spec.Affinity
	if ownAff == nil || ownAff.NodeAffinity == nil || ownAff.PodAntiAffinity != nil {
		t.Errorf("values' affinity %+v: it replaces the default", ownAff)
	}
}
