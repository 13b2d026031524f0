package install

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// objectSet indexes rendered objects by kind.
type objectSet []*unstructured.Unstructured

func (s objectSet) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range s {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the single object of kind, failing when there is not exactly one.
func (s objectSet) one(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := s.ofKind(kind)
	if len(objs) != 1 {
		t.Fatalf("want exactly one %s, rendered %d", kind, len(objs))
	}
	return objs[0]
}

func (s objectSet) named(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range s.ofKind(kind) {
		if o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s named %q rendered", kind, name)
	return nil
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s does not convert to its Go type (unknown or misplaced field?): %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// podTemplates returns the pod templates of every workload kind rendered.
func podTemplates(t *testing.T, objs objectSet) map[string]corev1.PodTemplateSpec {
	t.Helper()
	out := map[string]corev1.PodTemplateSpec{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			out["Deployment/"+o.GetName()] = convert[appsv1.Deployment](t, o).Spec.Template
		case "StatefulSet":
			out["StatefulSet/"+o.GetName()] = convert[appsv1.StatefulSet](t, o).Spec.Template
		case "DaemonSet":
			out["DaemonSet/"+o.GetName()] = convert[appsv1.DaemonSet](t, o).Spec.Template
		case "Pod", "Job", "CronJob", "ReplicaSet":
			t.Errorf("unexpected workload %s %s: only the manager Deployment is installed", o.GetKind(), o.GetName())
		}
	}
	if len(out) == 0 {
		t.Fatal("no workload rendered")
	}
	return out
}

// checkRestricted asserts the Pod Security "restricted" profile and the
// operational basics (requests and limits, health probes) on a pod template.
func checkRestricted(t *testing.T, what string, pod corev1.PodTemplateSpec) {
	t.Helper()
	for _, p := range restrictedProblems(what, pod) {
		t.Error(p)
	}
}

// restrictedProblems lists how a pod template breaks the restricted profile
// or lacks resources or health probes.
func restrictedProblems(what string, pod corev1.PodTemplateSpec) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	ps := pod.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		add("%s: pod securityContext.runAsNonRoot must be true", what)
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		add("%s: pod seccompProfile must be RuntimeDefault", what)
	}
	if ps != nil && ps.RunAsUser != nil && *ps.RunAsUser == 0 {
		add("%s: pod runs as root", what)
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		add("%s: host namespaces are not allowed", what)
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			add("%s: hostPath volume %s is not allowed", what, v.Name)
		}
	}
	containers := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil {
			add("%s/%s: no container securityContext", what, c.Name)
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add("%s/%s: allowPrivilegeEscalation must be false", what, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			add("%s/%s: readOnlyRootFilesystem must be true", what, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			add("%s/%s: privileged", what, c.Name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			add("%s/%s: runs as root", what, c.Name)
		}
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			add("%s/%s: runAsNonRoot is false", what, c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, corev1.Capability("ALL")) || len(sc.Capabilities.Add) > 0 {
			add("%s/%s: capabilities must drop ALL and add none", what, c.Name)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				add("%s/%s: no %s request", what, c.Name, r)
			}
			if _, ok := c.Resources.Limits[r]; !ok {
				add("%s/%s: no %s limit", what, c.Name, r)
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		out = append(out, healthProbeProblems(what, c)...)
	}
	return out
}

// healthProbeProblems: liveness /healthz and readiness /readyz on the port
// the manager's --health-probe-bind-address serves.
func healthProbeProblems(what string, c corev1.Container) []string {
	var out []string
	healthPort := false
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address=:"); ok {
			for _, p := range c.Ports {
				healthPort = healthPort || (p.Name == "health" && v == strconv.Itoa(int(p.ContainerPort)))
			}
		}
	}
	if !healthPort {
		out = append(out, fmt.Sprintf("%s/%s: --health-probe-bind-address does not match a container port named health", what, c.Name))
	}
	for _, probe := range []struct {
		path  string
		probe *corev1.Probe
	}{{"/healthz", c.LivenessProbe}, {"/readyz", c.ReadinessProbe}} {
		p := probe.probe
		switch {
		case p == nil || p.HTTPGet == nil:
			out = append(out, fmt.Sprintf("%s/%s: no HTTP probe for %s", what, c.Name, probe.path))
		case p.HTTPGet.Path != probe.path || p.HTTPGet.Port.String() != "health":
			out = append(out, fmt.Sprintf("%s/%s: probe must GET %s on port health, is %s on %s", what, c.Name, probe.path, p.HTTPGet.Path, p.HTTPGet.Port.String()))
		}
	}
	return out
}

// TestCheckersCatchViolations proves the checks above are not vacuous: each
// mutation of a compliant pod template or role is reported.
func TestCheckersCatchViolations(t *testing.T) {
	base := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:  "manager",
				Args:  []string{"--health-probe-bind-address=:8081"},
				Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: 8081}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Mi")},
				},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}}},
			}},
		}}
	}
	if p := restrictedProblems("ok", base()); len(p) != 0 {
		t.Fatalf("a compliant template is reported: %v", p)
	}
	mutations := map[string]func(p *corev1.PodTemplateSpec){
		"root allowed": func(p *corev1.PodTemplateSpec) { p.Spec.SecurityContext.RunAsNonRoot = nil },
		"no seccomp":   func(p *corev1.PodTemplateSpec) { p.Spec.SecurityContext.SeccompProfile = nil },
		"host network": func(p *corev1.PodTemplateSpec) { p.Spec.HostNetwork = true },
		"escalation": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		},
		"writable root": func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = nil },
		"capability added": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		},
		"privileged":        func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true) },
		"uid 0":             func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].SecurityContext.RunAsUser = ptr.To(int64(0)) },
		"no memory limit":   func(p *corev1.PodTemplateSpec) { delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory) },
		"no liveness probe": func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].LivenessProbe = nil },
		"probe on wrong port": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromInt32(8443)
		},
		"health port mismatch": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Args = []string{"--health-probe-bind-address=:9999"}
		},
		"no container context": func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].SecurityContext = nil },
	}
	for name, mutate := range mutations {
		p := base()
		mutate(&p)
		if len(restrictedProblems(name, p)) == 0 {
			t.Errorf("%s: not reported", name)
		}
	}

	ok := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
	if p := wildcardProblems("ok", ok); len(p) != 0 || !slices.Equal(secretVerbs(ok), []string{"get"}) {
		t.Fatalf("a least-privilege rule is reported: %v", p)
	}
	for name, r := range map[string]rbacv1.PolicyRule{
		"verb":        {APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
		"group":       {APIGroups: []string{"*"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
		"resource":    {APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"get"}},
		"subresource": {APIGroups: []string{"apps"}, Resources: []string{"deployments/*"}, Verbs: []string{"get"}},
		"url":         {NonResourceURLs: []string{"/metrics*"}, Verbs: []string{"get"}},
	} {
		if len(wildcardProblems(name, []rbacv1.PolicyRule{r})) == 0 {
			t.Errorf("wildcard %s: not reported", name)
		}
	}
	if v := secretVerbs([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}}}); !slices.Equal(v, []string{"get", "list", "watch"}) {
		t.Errorf("secret verbs %v", v)
	}
}
