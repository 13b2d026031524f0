package memcached

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

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
