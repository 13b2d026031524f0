package install

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	ps := pod.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot must be true", what)
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccompProfile must be RuntimeDefault", what)
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		t.Errorf("%s: host namespaces are not allowed", what)
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("%s: hostPath volume %s is not allowed", what, v.Name)
		}
	}
	containers := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s/%s: no container securityContext", what, c.Name)
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: allowPrivilegeEscalation must be false", what, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: readOnlyRootFilesystem must be true", what, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s/%s: privileged", what, c.Name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("%s/%s: runs as root", what, c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, corev1.Capability("ALL")) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s/%s: capabilities must drop ALL and add none", what, c.Name)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				t.Errorf("%s/%s: no %s request", what, c.Name, r)
			}
			if _, ok := c.Resources.Limits[r]; !ok {
				t.Errorf("%s/%s: no %s limit", what, c.Name, r)
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		checkHealthProbes(t, what, c)
	}
}

// checkHealthProbes: liveness /healthz and readiness /readyz on the port the
// manager's --health-probe-bind-address serves.
func checkHealthProbes(t *testing.T, what string, c corev1.Container) {
	t.Helper()
	healthPort := int32(0)
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address=:"); ok {
			for _, p := range c.Ports {
				if p.Name == "health" && v == strconv.Itoa(int(p.ContainerPort)) {
					healthPort = p.ContainerPort
				}
			}
		}
	}
	if healthPort == 0 {
		t.Errorf("%s/%s: --health-probe-bind-address does not match a container port named health", what, c.Name)
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s/%s: no HTTP probe for %s", what, c.Name, name)
			continue
		}
		if p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "health" {
			t.Errorf("%s/%s: probe %s must GET %s on port health, is %s on %s", what, c.Name, name, name, p.HTTPGet.Path, p.HTTPGet.Port.String())
		}
	}
}
