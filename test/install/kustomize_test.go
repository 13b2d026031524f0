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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

const systemNamespace = "runbook-system"

// crdFiles lists the generated CRD files under config/crd/bases.
func crdFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(repoPath("config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (run `make manifests`): %v", err)
	}
	return files
}

func TestKustomizeDefaultInstallsEverything(t *testing.T) {
	objs := objectSet(decodeObjects(t, kustomizeBuild(t, repoPath("config", "default"))))

	ns := objs.one(t, "Namespace")
	if ns.GetName() != systemNamespace {
		t.Errorf("namespace is %q, want %q", ns.GetName(), systemNamespace)
	}
	if ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s does not enforce the restricted Pod Security level: labels %v", ns.GetName(), ns.GetLabels())
	}

	// Every generated CRD is installed, and only those.
	var want, got []string
	for _, f := range crdFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, objectSet(decodeObjects(t, b)).one(t, "CustomResourceDefinition").GetName())
	}
	for _, c := range objs.ofKind("CustomResourceDefinition") {
		got = append(got, c.GetName())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("CRDs installed by config/default %v, generated in config/crd/bases %v: list every file in config/crd/kustomization.yaml", got, want)
	}

	for _, o := range objs {
		if o.GetNamespace() != "" && o.GetNamespace() != systemNamespace {
			t.Errorf("%s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), systemNamespace)
		}
	}

	dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
	checkManagerDeployment(t, objs, dep)
	for what, pod := range podTemplates(t, objs) {
		checkRestricted(t, what, pod)
	}
	checkBindingsNameServiceAccount(t, objs, dep.Spec.Template.Spec.ServiceAccountName, systemNamespace)
	checkMetricsService(t, objs, dep)
}

// checkManagerDeployment: two replicas electing a leader, metrics on the
// https port.
func checkManagerDeployment(t *testing.T, objs objectSet, dep *appsv1.Deployment) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment %s: replicas %v, want 2", dep.Name, dep.Spec.Replicas)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment %s: want one container, have %d", dep.Name, len(dep.Spec.Template.Spec.Containers))
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("Deployment %s: --leader-elect missing from args %v", dep.Name, c.Args)
	}
	if !slices.Contains(c.Args, "--metrics-bind-address=:8443") {
		t.Errorf("Deployment %s: metrics must be served on :8443, args %v", dep.Name, c.Args)
	}
	if slices.Contains(c.Args, "--metrics-secure=false") {
		t.Errorf("Deployment %s: metrics must be served securely", dep.Name)
	}
	if dep.Spec.Template.Spec.TerminationGracePeriodSeconds == nil || *dep.Spec.Template.Spec.TerminationGracePeriodSeconds <= 30 {
		t.Errorf("Deployment %s: terminationGracePeriodSeconds must exceed the manager's 30s graceful shutdown", dep.Name)
	}
	sel, err := labels.ValidatedSelectorFromSet(dep.Spec.Selector.MatchLabels)
	if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Deployment %s: selector %v does not match its pod labels %v", dep.Name, dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels)
	}
	if sa := dep.Spec.Template.Spec.ServiceAccountName; sa == "" {
		t.Errorf("Deployment %s runs as the default ServiceAccount", dep.Name)
	} else {
		objs.named(t, "ServiceAccount", sa)
	}
	checkGoMemLimit(t, dep.Name, c, true)
	if v, ok := envVar(c, "GOGC"); ok {
		t.Errorf("Deployment %s sets GOGC (%+v) by default: Go's default is the user's to change", dep.Name, v)
	}
}

// checkGoMemLimit: GOMEMLIMIT is the container's own memory limit, through
// the downward API (a plain byte count, which Go accepts), when want; absent
// otherwise.
func checkGoMemLimit(t *testing.T, what string, c corev1.Container, want bool) {
	t.Helper()
	v, ok := envVar(c, "GOMEMLIMIT")
	if !want {
		if ok {
			t.Errorf("%s: GOMEMLIMIT set (%+v), want none", what, v)
		}
		return
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: no memory limit for GOMEMLIMIT to follow", what)
	}
	ref := (*corev1.ResourceFieldSelector)(nil)
	if ok && v.ValueFrom != nil {
		ref = v.ValueFrom.ResourceFieldRef
	}
	if ref == nil || ref.Resource != "limits.memory" || (ref.ContainerName != "" && ref.ContainerName != c.Name) ||
		(!ref.Divisor.IsZero() && ref.Divisor.Value() != 1) {
		t.Errorf("%s: GOMEMLIMIT %+v, want the container's limits.memory in bytes (resourceFieldRef)", what, v)
	}
}

// envVar finds the environment variable name of c.
func envVar(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, v := range c.Env {
		if v.Name == name {
			return v, true
		}
	}
	return corev1.EnvVar{}, false
}

// checkBindingsNameServiceAccount: every (Cluster)RoleBinding binds the
// manager's ServiceAccount to a role that is installed too.
func checkBindingsNameServiceAccount(t *testing.T, objs objectSet, sa, ns string) {
	t.Helper()
	bindings := 0
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range objs.ofKind(kind) {
			bindings++
			b := convert[rbacv1.ClusterRoleBinding](t, o)
			objs.named(t, b.RoleRef.Kind, b.RoleRef.Name)
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa || b.Subjects[0].Namespace != ns {
				t.Errorf("%s %s binds %v, want ServiceAccount %s/%s", kind, o.GetName(), b.Subjects, ns, sa)
			}
		}
	}
	// manager role, leader election, metrics authentication.
	if bindings < 3 {
		t.Errorf("want the manager, leader election and metrics auth bindings, found %d bindings", bindings)
	}
}

// checkMetricsService: the https Service selects the manager pods and
// targets the container's metrics port.
func checkMetricsService(t *testing.T, objs objectSet, dep *appsv1.Deployment) {
	t.Helper()
	svc := convert[corev1.Service](t, objs.one(t, "Service"))
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s selector %v does not select the manager pods %v", svc.Name, svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service %s ports %v, want https 8443 -> metrics", svc.Name, svc.Spec.Ports)
	}
	found := false
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		found = found || (p.Name == "metrics" && p.ContainerPort == 8443)
	}
	if !found {
		t.Errorf("the manager container has no port metrics=8443")
	}
}

// enableOptional copies config/ to a temporary directory and uncomments the
// optional parts in its config/default, exactly as docs/install.md tells a
// user to. It returns the path of that config/default.
func enableOptional(t *testing.T, parts ...string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(repoPath("config"))); err != nil {
		t.Fatalf("copying config/: %v", err)
	}
	k := filepath.Join(dst, "default", "kustomization.yaml")
	b, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		commented := []byte("# " + p + "\n")
		if !bytes.Contains(b, commented) {
			t.Fatalf("config/default/kustomization.yaml has no commented-out line %q to enable", strings.TrimSpace(string(commented)))
		}
		b = bytes.Replace(b, commented, []byte(p+"\n"), 1)
	}
	if err := os.WriteFile(k, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "default")
}

func TestKustomizeOptionalParts(t *testing.T) {
	dir := enableOptional(t, "- ../prometheus", "- ../network-policy", "components:", "- ../exec-probes")
	objs := objectSet(decodeObjects(t, kustomizeBuild(t, dir)))
	dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
	podLabels := labels.Set(dep.Spec.Template.Labels)
	svc := convert[corev1.Service](t, objs.one(t, "Service"))

	t.Run("ServiceMonitor scrapes the https Service with a bearer token", func(t *testing.T) {
		sm := objs.one(t, "ServiceMonitor")
		if sm.GetNamespace() != systemNamespace {
			t.Errorf("ServiceMonitor in %q", sm.GetNamespace())
		}
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
			t.Errorf("ServiceMonitor selector %v does not select Service labels %v", sel, svc.Labels)
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("want one endpoint, have %v", eps)
		}
		ep := eps[0].(map[string]any)
		if ep["port"] != "https" || ep["scheme"] != "https" || ep["path"] != "/metrics" ||
			ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
			t.Errorf("endpoint %v: want https port, https scheme, /metrics and the pod's ServiceAccount token", ep)
		}
	})

	t.Run("NetworkPolicy admits only labelled namespaces to the metrics port", func(t *testing.T) {
		np := convert[networkingv1.NetworkPolicy](t, objs.one(t, "NetworkPolicy"))
		sel, err := labels.ValidatedSelectorFromSet(np.Spec.PodSelector.MatchLabels)
		if err != nil || len(np.Spec.PodSelector.MatchLabels) == 0 || !sel.Matches(podLabels) {
			t.Errorf("podSelector %v does not select the manager pods %v", np.Spec.PodSelector.MatchLabels, podLabels)
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 1 {
			t.Fatalf("want one Ingress rule, have %+v", np.Spec)
		}
		rule := np.Spec.Ingress[0]
		if len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || rule.From[0].PodSelector != nil ||
			!labels.Equals(rule.From[0].NamespaceSelector.MatchLabels, map[string]string{"metrics": "enabled"}) {
			t.Errorf("from %+v, want namespaces labelled metrics=enabled", rule.From)
		}
		if len(rule.Ports) != 1 || rule.Ports[0].Port.IntValue() != 8443 {
			t.Errorf("ports %+v, want only 8443", rule.Ports)
		}
	})

	t.Run("exec probe scripts are mounted from ConfigMap runbook-exec-probes", func(t *testing.T) {
		cm := convert[corev1.ConfigMap](t, objs.named(t, "ConfigMap", "runbook-exec-probes"))
		if cm.Namespace != systemNamespace || cm.Data["check-license.sh"] == "" {
			t.Errorf("ConfigMap %s/%s data keys %v, want check-license.sh in %s", cm.Namespace, cm.Name, keys(cm.Data), systemNamespace)
		}
		c := dep.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--exec-probe-dir=/etc/runbook/probes") {
			t.Errorf("args %v lack --exec-probe-dir=/etc/runbook/probes", c.Args)
		}
		if !slices.Contains(c.Args, "--leader-elect") {
			t.Errorf("the component replaced the args instead of appending: %v", c.Args)
		}
		checkExecProbeVolume(t, dep.Spec.Template.Spec, "runbook-exec-probes", "/etc/runbook/probes")
	})

	for what, pod := range podTemplates(t, objs) {
		checkRestricted(t, what, pod)
	}
}

// checkExecProbeVolume: the ConfigMap is mounted read-only with executable
// files at dir.
func checkExecProbeVolume(t *testing.T, spec corev1.PodSpec, configMap, dir string) {
	t.Helper()
	var mount *corev1.VolumeMount
	for i, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath == dir {
			mount = &spec.Containers[0].VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly {
		t.Fatalf("no read-only mount at %s: %+v", dir, spec.Containers[0].VolumeMounts)
	}
	for _, v := range spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		if v.ConfigMap == nil || v.ConfigMap.Name != configMap {
			t.Errorf("volume %s is %+v, want ConfigMap %s", v.Name, v.VolumeSource, configMap)
		} else if v.ConfigMap.DefaultMode == nil || *v.ConfigMap.DefaultMode&0o111 != 0o111 || *v.ConfigMap.DefaultMode&0o222 != 0 {
			t.Errorf("volume %s defaultMode %v: scripts must be executable and not writable (0555)", v.Name, v.ConfigMap.DefaultMode)
		}
		return
	}
	t.Errorf("no volume %s", mount.Name)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestBuildInstallerKeepsCommittedKustomization: `make build-installer
// IMG=...` writes one YAML with everything and the requested image, without
// editing config/manager/kustomization.yaml.
func TestBuildInstallerKeepsCommittedKustomization(t *testing.T) {
	kustomizeBin(t) // fail early, with the fix, when the tool is missing
	committed := repoPath("config", "manager", "kustomization.yaml")
	before, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	const img = "registry.example/runbook/manager:v1.2.3"
	// -o manifests: the test checks packaging, not regeneration (make test has
	// just run manifests).
	mustRun(t, nil, "make", "-s", "-o", "manifests", "build-installer", "IMG="+img, "DIST_DIR="+dist)
	after, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("make build-installer changed %s", committed)
	}
	b, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := objectSet(decodeObjects(t, b))
	dep := convert[appsv1.Deployment](t, objs.one(t, "Deployment"))
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != img {
		t.Errorf("installer image %q, want %q", got, img)
	}
	want := objectSet(decodeObjects(t, kustomizeBuild(t, repoPath("config", "default"))))
	if len(objs) != len(want) {
		t.Errorf("installer has %d objects, config/default renders %d", len(objs), len(want))
	}
	if len(objs.ofKind("CustomResourceDefinition")) == 0 || len(objs.ofKind("ClusterRole")) == 0 {
		t.Error("installer lacks CRDs or RBAC")
	}
}
