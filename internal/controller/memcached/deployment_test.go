package memcached

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func buildDeployment(t *testing.T, spec cachev1alpha1.MemcachedSpec) (*cachev1alpha1.Memcached, *appsv1.Deployment) {
	t.Helper()
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "shop", UID: types.UID("uid-1")}, Spec: spec}
	s, err := resolveSettings(&mc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := desiredDeployment(mc, s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := convertInto(ac, &appsv1.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	return mc, d
}

func TestDesiredDeploymentIsRestrictedAndOwned(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)})
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	if len(d.OwnerReferences) != 1 || !*d.OwnerReferences[0].Controller || d.OwnerReferences[0].UID != "uid-1" || d.OwnerReferences[0].Kind != "Memcached" {
		t.Errorf("owner references = %+v", d.OwnerReferences)
	}
	if got := d.Spec.Selector.MatchLabels[labelInstance]; got != "sessions" {
		t.Errorf("selector instance = %q", got)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 {
		t.Errorf("rolling update = %+v, want maxSurge 0, maxUnavailable 1", ru)
	}
	if d.Spec.Template.Annotations[AnnotationConfigHash] == "" {
		t.Error("config hash annotation missing")
	}
	pod := d.Spec.Template.Spec
	if !*pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context = %+v", pod.SecurityContext)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers = %d, want 1 (no exporter)", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context = %+v", sc)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.TCPSocket == nil || p.TCPSocket.Port.String() != "memcache" {
			t.Errorf("%s probe = %+v, want TCP on memcache", name, p)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 11211 || c.Ports[0].Name != "memcache" {
		t.Errorf("ports = %+v", c.Ports)
	}
	aff := pod.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("default anti-affinity should be Soft, got %+v", aff)
	}
	if got := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels[labelInstance]; got != "sessions" {
		t.Errorf("anti-affinity selects instance %q", got)
	}
}
