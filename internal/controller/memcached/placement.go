package memcached

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// placePod sets where the instances may run: node selector, tolerations,
// affinity (with the anti-affinity preset), topology spread and priority.
func placePod(pod *corev1ac.PodSpecApplyConfiguration, mc *cachev1alpha1.Memcached) error {
	spec := &mc.Spec
	if len(spec.NodeSelector) > 0 {
		pod.WithNodeSelector(spec.NodeSelector)
	}
	for i := range spec.Tolerations {
		t, err := convertInto(spec.Tolerations[i], &corev1ac.TolerationApplyConfiguration{})
		if err != nil {
			return fmt.Errorf("converting toleration %d: %w", i, err)
		}
		pod.WithTolerations(t)
	}
	aff, err := desiredAffinity(mc)
	if err != nil {
		return err
	}
	if aff != nil {
		pod.WithAffinity(aff)
	}
	if err := spreadPod(pod, mc); err != nil {
		return err
	}
	if spec.PriorityClassName != "" {
		pod.WithPriorityClassName(spec.PriorityClassName)
	}
	return nil
}

// spreadPod adds the topology spread constraints; one without a label
// selector gets the pod selector, the only one that makes sense for it.
func spreadPod(pod *corev1ac.PodSpecApplyConfiguration, mc *cachev1alpha1.Memcached) error {
	for i := range mc.Spec.TopologySpreadConstraints {
		c := mc.Spec.TopologySpreadConstraints[i].DeepCopy()
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: selectorLabels(mc)}
		}
		t, err := convertInto(c, &corev1ac.TopologySpreadConstraintApplyConfiguration{})
		if err != nil {
			return fmt.Errorf("converting topology spread constraint %d: %w", i, err)
		}
		pod.WithTopologySpreadConstraints(t)
	}
	return nil
}

// desiredAffinity merges the user's affinity with the anti-affinity preset;
// a podAntiAffinity of the user's replaces the preset.
func desiredAffinity(mc *cachev1alpha1.Memcached) (*corev1ac.AffinityApplyConfiguration, error) {
	user := mc.Spec.Affinity
	var aff *corev1ac.AffinityApplyConfiguration
	if user != nil && (user.NodeAffinity != nil || user.PodAffinity != nil || user.PodAntiAffinity != nil) {
		a, err := convertInto(user, &corev1ac.AffinityApplyConfiguration{})
		if err != nil {
			return nil, fmt.Errorf("converting affinity: %w", err)
		}
		aff = a
	}
	if user != nil && user.PodAntiAffinity != nil {
		return aff, nil
	}
	anti := presetAntiAffinity(mc.Spec.AntiAffinity, selectorLabels(mc))
	if anti == nil {
		return aff, nil
	}
	if aff == nil {
		aff = corev1ac.Affinity()
	}
	return aff.WithPodAntiAffinity(anti), nil
}

// presetAntiAffinity spreads the instances over nodes: preferred (Soft, the
// default) or required (Hard); nil for None.
func presetAntiAffinity(preset cachev1alpha1.AntiAffinityPreset, sel map[string]string) *corev1ac.PodAntiAffinityApplyConfiguration {
	term := corev1ac.PodAffinityTerm().
		WithTopologyKey(corev1.LabelHostname).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(sel))
	switch preset {
	case "", cachev1alpha1.AntiAffinitySoft:
		return corev1ac.PodAntiAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(
			corev1ac.WeightedPodAffinityTerm().WithWeight(100).WithPodAffinityTerm(term))
	case cachev1alpha1.AntiAffinityHard:
		return corev1ac.PodAntiAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(term)
	}
	return nil
}
