package memcached

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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

func TestDesiredDeploymentPlacement(t *testing.T) {
	userAnti := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone"}}}}
	tests := []struct {
		name  string
		spec  cachev1alpha1.MemcachedSpec
		check func(t *testing.T, pod corev1.PodSpec)
	}{
		{"hard preset", cachev1alpha1.MemcachedSpec{AntiAffinity: cachev1alpha1.AntiAffinityHard}, func(t *testing.T, pod corev1.PodSpec) {
			if len(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Errorf("hard preset: %+v", pod.Affinity.PodAntiAffinity)
			}
		}},
		{"none preset", cachev1alpha1.MemcachedSpec{AntiAffinity: cachev1alpha1.AntiAffinityNone}, func(t *testing.T, pod corev1.PodSpec) {
			if pod.Affinity != nil {
				t.Errorf("none preset: affinity %+v", pod.Affinity)
			}
		}},
		{"user podAntiAffinity replaces the preset", cachev1alpha1.MemcachedSpec{Affinity: userAnti}, func(t *testing.T, pod corev1.PodSpec) {
			if got := pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution; len(got) != 1 || got[0].TopologyKey != "zone" {
				t.Errorf("user anti-affinity lost: %+v", pod.Affinity)
			}
		}},
		{"node affinity merged with the soft preset", cachev1alpha1.MemcachedSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpExists}}}}}}}},
			func(t *testing.T, pod corev1.PodSpec) {
				if pod.Affinity.NodeAffinity == nil || pod.Affinity.PodAntiAffinity == nil {
					t.Errorf("affinity = %+v", pod.Affinity)
				}
			}},
		{"topology spread gets the cache's selector", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway}}},
			func(t *testing.T, pod corev1.PodSpec) {
				if got := pod.TopologySpreadConstraints; len(got) != 1 || got[0].LabelSelector.MatchLabels[labelInstance] != "sessions" {
					t.Errorf("topology spread = %+v", got)
				}
			}},
		{"node selector, tolerations, priority class", cachev1alpha1.MemcachedSpec{NodeSelector: map[string]string{"pool": "cache"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}, PriorityClassName: "high"},
			func(t *testing.T, pod corev1.PodSpec) {
				if pod.NodeSelector["pool"] != "cache" || len(pod.Tolerations) != 1 || pod.PriorityClassName != "high" {
					t.Errorf("pod = %+v", pod)
				}
			}},
		{"exporter sidecar", cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}, func(t *testing.T, pod corev1.PodSpec) {
			if len(pod.Containers) != 2 || pod.Containers[1].Name != "exporter" || pod.Containers[1].Ports[0].ContainerPort != 9150 ||
				pod.Containers[1].Image != cachev1alpha1.DefaultExporterImage || !*pod.Containers[1].SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("containers = %+v", pod.Containers)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, d := buildDeployment(t, tt.spec)
			tt.check(t, d.Spec.Template.Spec)
		})
	}
}

func TestDesiredServiceAndPDB(t *testing.T) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "shop", UID: "uid-1"},
		Spec: cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}}
	s, err := resolveSettings(&mc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := convertInto(desiredService(mc, s), &corev1.Service{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Name != "memcache" || svc.Spec.Ports[0].Port != 11211 ||
		svc.Spec.Ports[1].Port != 9150 || svc.Spec.Selector[labelInstance] != "sessions" {
		t.Errorf("service = %+v", svc.Spec)
	}
	pdb, err := convertInto(desiredPDB(mc, s), &policyv1.PodDisruptionBudget{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels[labelInstance] != "sessions" ||
		*pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow || len(pdb.OwnerReferences) != 1 {
		t.Errorf("pdb = %+v", pdb)
	}
}
