package install

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const helmNamespace = "runbook-helm"

// allOptional turns on every optional part of the chart.
var allOptional = []string{
	"--set", "metrics.serviceMonitor.enabled=true",
	"--set", "metrics.networkPolicy.enabled=true",
	"--set", "execProbes.enabled=true",
	"--set-string", "execProbes.scripts.check\\.sh=#!/bin/sh\nexit 0\n",
}

func TestHelmLint(t *testing.T) {
	mustRun(t, nil, helmBin(t), "lint", "--strict", repoPath("charts", "runbook"))
	args := append([]string{"lint", "--strict", repoPath("charts", "runbook")}, allOptional...)
	mustRun(t, nil, helmBin(t), args...)
}

// TestHelmChartInSync: the chart's CRDs and manager ClusterRole are byte
// copies of what controller-gen generates (`make helm-crds` copies them).
func TestHelmChartInSync(t *testing.T) {
	const fix = "the Helm chart drifted from the generated manifests: run `make manifests helm-crds` and commit charts/runbook"
	var want, got []string
	for _, f := range crdFiles(t) {
		want = append(want, filepath.Base(f))
		a, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(repoPath("charts", "runbook", "crds", filepath.Base(f)))
		if err != nil {
			t.Errorf("%s: %v", fix, err)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: charts/runbook/crds/%s differs from config/crd/bases", fix, filepath.Base(f))
		}
	}
	chartCRDs, _ := filepath.Glob(repoPath("charts", "runbook", "crds", "*.yaml"))
	for _, f := range chartCRDs {
		got = append(got, filepath.Base(f))
	}
	if !slices.Equal(want, got) {
		t.Errorf("%s: chart CRDs %v, generated %v", fix, got, want)
	}
	a, err := os.ReadFile(repoPath("config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatalf("config/rbac/role.yaml (run `make manifests`): %v", err)
	}
	b, err := os.ReadFile(repoPath("charts", "runbook", "files", "manager-role.yaml"))
	if err != nil || !bytes.Equal(a, b) {
		t.Errorf("%s: charts/runbook/files/manager-role.yaml differs from config/rbac/role.yaml (%v)", fix, err)
	}
}

func TestHelmTemplateDefaults(t *testing.T) {
	objs := objectSet(decodeObjects(t, mustHelmTemplate(t, helmNamespace)))
	dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
	checkManagerDeployment(t, objs, dep)
	for what, pod := range podTemplates(t, objs) {
		checkRestricted(t, what, pod)
	}
	checkBindingsNameServiceAccount(t, objs, dep.Spec.Template.Spec.ServiceAccountName, helmNamespace)
	checkMetricsService(t, objs, dep)
	c := dep.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--controllers=rebootpolicy,memcached,nsscaler") {
		t.Errorf("args %v: every controller is enabled by default", c.Args)
	}
	for _, o := range objs {
		if o.GetNamespace() != "" && o.GetNamespace() != helmNamespace {
			t.Errorf("%s %s in namespace %q, want the release namespace", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	for _, kind := range []string{"ServiceMonitor", "NetworkPolicy", "ConfigMap", "CustomResourceDefinition", "Namespace"} {
		if n := len(objs.ofKind(kind)); n != 0 {
			t.Errorf("%d %s rendered by default", n, kind)
		}
	}

	// The same objects as config/default, apart from what Helm handles itself
	// (the release namespace, and CRDs from crds/).
	kinds := func(s objectSet) []string {
		var out []string
		for _, o := range s {
			if o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" {
				out = append(out, o.GetKind())
			}
		}
		slices.Sort(out)
		return out
	}
	kust := objectSet(decodeObjects(t, kustomizeBuild(t, repoPath("config", "default"))))
	if a, b := kinds(objs), kinds(kust); !slices.Equal(a, b) {
		t.Errorf("chart renders %v, config/default %v", a, b)
	}

	// The manager ClusterRole has exactly the generated rules.
	generated := readClusterRole(t, repoPath("config", "rbac", "role.yaml"))
	chartRole := convert[rbacv1.ClusterRole](t, objs.named(t, "ClusterRole", "runbook-manager-role"))
	if !equality.Semantic.DeepEqual(generated.Rules, chartRole.Rules) {
		t.Errorf("chart ClusterRole rules differ from config/rbac/role.yaml:\nchart: %v\ngenerated: %v", chartRole.Rules, generated.Rules)
	}
	kustRole := convert[rbacv1.ClusterRole](t, kust.named(t, "ClusterRole", "runbook-manager-role"))
	if !equality.Semantic.DeepEqual(generated.Rules, kustRole.Rules) {
		t.Errorf("config/default ClusterRole rules differ from config/rbac/role.yaml")
	}
}

func TestHelmValues(t *testing.T) {
	cases := []struct {
		name    string
		set     []string
		wantErr string
		check   func(t *testing.T, objs objectSet, dep *appsv1.Deployment)
	}{
		{
			name: "one controller",
			set:  []string{"--set", "controllers.memcached.enabled=false", "--set", "controllers.nsscaler.enabled=false"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--controllers=rebootpolicy") {
					t.Errorf("args %v", dep.Spec.Template.Spec.Containers[0].Args)
				}
			},
		},
		{
			name: "two controllers",
			set:  []string{"--set", "controllers.rebootpolicy.enabled=false"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--controllers=memcached,nsscaler") {
					t.Errorf("args %v", dep.Spec.Template.Spec.Containers[0].Args)
				}
			},
		},
		{
			name:    "no controller",
			set:     []string{"--set", "controllers.rebootpolicy.enabled=false", "--set", "controllers.memcached.enabled=false", "--set", "controllers.nsscaler.enabled=false"},
			wantErr: "enable at least one",
		},
		{
			name:    "several replicas without leader election",
			set:     []string{"--set", "leaderElection.enabled=false"},
			wantErr: "needs leaderElection.enabled",
		},
		{
			name: "one replica without leader election",
			set:  []string{"--set", "leaderElection.enabled=false", "--set", "replicaCount=1"},
			check: func(t *testing.T, objs objectSet, dep *appsv1.Deployment) {
				if slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--leader-elect") || *dep.Spec.Replicas != 1 {
					t.Errorf("replicas %d args %v", *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Args)
				}
				for _, r := range objs.ofKind("Role") {
					if strings.Contains(r.GetName(), "leader-election") {
						t.Error("leader election Role rendered without leader election")
					}
				}
			},
		},
		{
			name: "replicas and resources",
			set:  []string{"--set", "replicaCount=3", "--set", "resources.limits.memory=1Gi", "--set", "image.repository=registry.example/runbook", "--set", "image.tag=v9"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				c := dep.Spec.Template.Spec.Containers[0]
				if *dep.Spec.Replicas != 3 || c.Resources.Limits.Memory().String() != "1Gi" || c.Image != "registry.example/runbook:v9" {
					t.Errorf("replicas %d, memory limit %s, image %s", *dep.Spec.Replicas, c.Resources.Limits.Memory(), c.Image)
				}
			},
		},
		{
			name: "Go runtime knobs",
			set:  []string{"--set", "goRuntime.memoryLimitFromResources=false", "--set-string", "goRuntime.gogc=50"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				c := dep.Spec.Template.Spec.Containers[0]
				checkGoMemLimit(t, "memoryLimitFromResources=false", c, false)
				if v, ok := envVar(c, "GOGC"); !ok || v.Value != "50" || v.ValueFrom != nil {
					t.Errorf("GOGC %+v (found %v), want 50", v, ok)
				}
			},
		},
		{
			name:    "GOGC not a percentage (values.schema.json)",
			set:     []string{"--set-string", "goRuntime.gogc=50%"},
			wantErr: "does not match pattern",
		},
		{
			name: "metrics off",
			set:  []string{"--set", "metrics.enabled=false", "--set", "metrics.serviceMonitor.enabled=true"},
			check: func(t *testing.T, objs objectSet, dep *appsv1.Deployment) {
				if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--metrics-bind-address=0") {
					t.Errorf("args %v", dep.Spec.Template.Spec.Containers[0].Args)
				}
				for _, kind := range []string{"Service", "ServiceMonitor"} {
					if len(objs.ofKind(kind)) != 0 {
						t.Errorf("%s rendered with metrics off", kind)
					}
				}
			},
		},
		{
			name: "every optional part",
			set:  allOptional,
			check: func(t *testing.T, objs objectSet, dep *appsv1.Deployment) {
				svc := convert[corev1.Service](t, objs.one(t, "Service"))
				sm := objs.one(t, "ServiceMonitor")
				sel := sm.Object["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
				set := labels.Set{}
				for k, v := range sel {
					set[k] = v.(string)
				}
				if !labels.SelectorFromSet(set).Matches(labels.Set(svc.Labels)) {
					t.Errorf("ServiceMonitor selector %v does not select Service labels %v", set, svc.Labels)
				}
				np := convert[networkingv1.NetworkPolicy](t, objs.one(t, "NetworkPolicy"))
				if !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(labels.Set(dep.Spec.Template.Labels)) ||
					np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8443 ||
					!labels.Equals(np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels, map[string]string{"metrics": "enabled"}) {
					t.Errorf("NetworkPolicy %+v", np.Spec)
				}
				cm := convert[corev1.ConfigMap](t, objs.named(t, "ConfigMap", "runbook-exec-probes"))
				if cm.Data["check.sh"] != "#!/bin/sh\nexit 0\n" {
					t.Errorf("script %q", cm.Data["check.sh"])
				}
				if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--exec-probe-dir=/etc/runbook/probes") {
					t.Errorf("args %v", dep.Spec.Template.Spec.Containers[0].Args)
				}
				checkExecProbeVolume(t, dep.Spec.Template.Spec, "runbook-exec-probes", "/etc/runbook/probes")
			},
		},
		{
			name: "memcached TLS agent image and issuance",
			set: []string{"--set", "memcached.tlsAgentImage=registry.example/tls-agent:v2",
				"--set", "memcached.allowedClusterIssuers={internal-ca,awspca.cert-manager.io/pca}", "--set", "memcached.clusterDomain=corp.internal"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				args := dep.Spec.Template.Spec.Containers[0].Args
				for _, want := range []string{"--memcached-tls-agent-image=registry.example/tls-agent:v2",
					"--memcached-allowed-cluster-issuers=internal-ca,awspca.cert-manager.io/pca", "--memcached-cluster-domain=corp.internal"} {
					if !slices.Contains(args, want) {
						t.Errorf("args %v lack %s", args, want)
					}
				}
			},
		},
		{
			// The default leaves the image to the manager and allows no
			// ClusterIssuer.
			name: "memcached defaults",
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
					if strings.HasPrefix(a, "--memcached-tls-agent-image") || strings.HasPrefix(a, "--memcached-allowed-cluster-issuers") {
						t.Errorf("default values render %s", a)
					}
				}
			},
		},
		{
			name:    "a ClusterIssuer that is not a name (values.schema.json)",
			set:     []string{"--set", "memcached.allowedClusterIssuers={a b}"},
			wantErr: "does not match pattern",
		},
		{
			name: "existing exec probe ConfigMap",
			set:  []string{"--set", "execProbes.enabled=true", "--set", "execProbes.existingConfigMap=my-scripts"},
			check: func(t *testing.T, objs objectSet, dep *appsv1.Deployment) {
				if len(objs.ofKind("ConfigMap")) != 0 {
					t.Error("a ConfigMap was rendered although an existing one is used")
				}
				checkExecProbeVolume(t, dep.Spec.Template.Spec, "my-scripts", "/etc/runbook/probes")
			},
		},
		{
			name:    "exec probes without scripts",
			set:     []string{"--set", "execProbes.enabled=true"},
			wantErr: "set execProbes.scripts",
		},
		{
			name:    "misspelt controller (values.schema.json)",
			set:     []string{"--set", "controllers.rebootpolicyy.enabled=true"},
			wantErr: "additional properties 'rebootpolicyy' not allowed",
		},
		{
			name:    "replicas not a number (values.schema.json)",
			set:     []string{"--set-string", "replicaCount=two"},
			wantErr: "want integer",
		},
		{
			name:    "script name not a ConfigMap key (values.schema.json)",
			set:     []string{"--set", "execProbes.enabled=true", "--set-string", "execProbes.scripts.a/b=exit 0"},
			wantErr: "does not match pattern",
		},
		{
			name: "watch namespaces",
			set:  []string{"--set", "watchNamespaces={team-a,team-b}"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--watch-namespaces=team-a,team-b") {
					t.Errorf("args %v", dep.Spec.Template.Spec.Containers[0].Args)
				}
			},
		},
		{
			name:    "watch namespace not a namespace name (values.schema.json)",
			set:     []string{"--set", "watchNamespaces={Team_A}"},
			wantErr: "does not match pattern",
		},
		{
			name: "tenant network policy and limits",
			set: []string{"--set", "rebootpolicy.probeAllow={10.20.0.5:5432,192.168.0.0/24}", "--set", "rebootpolicy.probeDeny={10.96.0.0/12}",
				"--set", "rebootpolicy.probeMaxPerNamespace=20", "--set", "rebootpolicy.probeMinPeriod=10s"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				args := dep.Spec.Template.Spec.Containers[0].Args
				for _, want := range []string{"--probe-allow=10.20.0.5:5432,192.168.0.0/24", "--probe-deny=10.96.0.0/12",
					"--probe-max-per-namespace=20", "--probe-min-period=10s"} {
					if !slices.Contains(args, want) {
						t.Errorf("%s missing from args %v", want, args)
					}
				}
			},
		},
		{
			name: "no RebootPolicy: no probe flags, no fingerprint key Role",
			set:  []string{"--set", "controllers.rebootpolicy.enabled=false"},
			check: func(t *testing.T, objs objectSet, dep *appsv1.Deployment) {
				for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
					if strings.HasPrefix(a, "--probe-") {
						t.Errorf("RebootPolicy flag %s without the controller", a)
					}
				}
				for _, r := range objs.ofKind("Role") {
					if strings.Contains(r.GetName(), "fingerprint-key") {
						t.Errorf("Role %s without the RebootPolicy controller", r.GetName())
					}
				}
			},
		},
		{
			name: "Prometheus of blocking alerts, with a token and a CA",
			set: []string{"--set", "rebootpolicy.prometheus.url=https://prometheus-k8s.monitoring.svc:9091",
				"--set", "rebootpolicy.prometheus.bearerTokenFile=/var/run/secrets/kubernetes.io/serviceaccount/token",
				"--set", "rebootpolicy.prometheus.caConfigMap.name=prometheus-ca", "--set", "rebootpolicy.prometheus.interval=15s"},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				c := dep.Spec.Template.Spec.Containers[0]
				for _, want := range []string{"--prometheus-url=https://prometheus-k8s.monitoring.svc:9091", "--prometheus-interval=15s",
					"--prometheus-bearer-token-file=/var/run/secrets/kubernetes.io/serviceaccount/token", "--prometheus-ca-file=/etc/runbook/prometheus-ca/ca.crt"} {
					if !slices.Contains(c.Args, want) {
						t.Errorf("no %s in %v", want, c.Args)
					}
				}
				mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "prometheus-ca" && m.ReadOnly })
				vol := slices.ContainsFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
					return v.Name == "prometheus-ca" && v.ConfigMap != nil && v.ConfigMap.Name == "prometheus-ca"
				})
				if !mounted || !vol {
					t.Errorf("CA ConfigMap mounted %v, volume %v", mounted, vol)
				}
			},
		},
		{
			name: "no Prometheus by default",
			set:  []string{},
			check: func(t *testing.T, _ objectSet, dep *appsv1.Deployment) {
				for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
					if strings.HasPrefix(a, "--prometheus-") {
						t.Errorf("%s without rebootpolicy.prometheus.url", a)
					}
				}
			},
		},
		{
			name:    "Prometheus url not http(s) (values.schema.json)",
			set:     []string{"--set", "rebootpolicy.prometheus.url=prometheus:9090"},
			wantErr: "does not match pattern",
		},
		{
			name:    "probe period not a duration (values.schema.json)",
			set:     []string{"--set", "rebootpolicy.probeMinPeriod=often"},
			wantErr: "does not match pattern",
		},
		{
			name:    "exec probes without RebootPolicy",
			set:     []string{"--set", "execProbes.enabled=true", "--set", "execProbes.existingConfigMap=x", "--set", "controllers.rebootpolicy.enabled=false"},
			wantErr: "needs controllers.rebootpolicy.enabled",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helmTemplate(t, helmNamespace, tc.set...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs := objectSet(decodeObjects(t, out))
			dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
			for what, pod := range podTemplates(t, objs) {
				checkRestricted(t, what, pod)
			}
			tc.check(t, objs, dep)
		})
	}
}

func readClusterRole(t *testing.T, path string) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s (run `make manifests`): %v", path, err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return role
}
