package memcached

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch

// reconcileStatefulSet applies the StatefulSet of workloadKind StatefulSet
// (unless it is foreign or the spec may not be applied) and records the
// live object for the status.
func (r *Reconciler) reconcileStatefulSet(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	sts, err := getLive(ctx, r.Client, key, &appsv1.StatefulSet{})
	if err != nil {
		return fmt.Errorf("reading StatefulSet %s: %w", key, err)
	}
	switch {
	case sts != nil && !metav1.IsControlledBy(sts, mc):
		obs.foreign = append(obs.foreign, describeForeign("StatefulSet", sts, mc))
	case apply:
		live, err := r.applyStatefulSet(ctx, mc, s, sts, obs)
		if err != nil {
			obs.workload = statefulSetState(sts)
			return fmt.Errorf("applying StatefulSet %s: %w", key, err)
		}
		obs.workload = statefulSetState(live)
	default:
		obs.workload = statefulSetState(sts)
	}
	return nil
}

func (r *Reconciler) applyStatefulSet(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, live *appsv1.StatefulSet, obs *observation) (*appsv1.StatefulSet, error) {
	var cached client.Object
	if live != nil {
		cached = live
	}
	after := &appsv1.StatefulSet{}
	applied, err := r.applyIfChanged(ctx, inputsOf(mc, s), func() (runtime.ApplyConfiguration, error) { return desiredStatefulSet(mc, s) }, cached, after, func() (any, error) { return appsv1ac.ExtractStatefulSet(live, FieldManager) })
	if err != nil || !applied {
		return live, err
	}
	if live == nil {
		obs.created = append(obs.created, fmt.Sprintf("StatefulSet (%d instances)", s.Size))
		return after, nil
	}
	noteSecretRollout(obs, live.Spec.Template.Annotations, s)
	r.reportWorkloadChange(mc, obs, s, "StatefulSet", live.Spec.Replicas, live.Spec.Template.Annotations)
	return after, nil
}

// desiredStatefulSet gives each instance a stable name,
// <name>-<ordinal>.<name>.<namespace>.svc, through the headless Service.
// Instances start and stop in parallel (a cache's instances do not depend
// on each other); a rollout replaces one at a time, highest ordinal first,
// so there are never more than size instances.
func desiredStatefulSet(mc *cachev1alpha1.Memcached, s settings) (*appsv1ac.StatefulSetApplyConfiguration, error) {
	template, err := desiredPodTemplate(mc, s)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.StatefulSetSpec().
		WithReplicas(s.Size).
		WithServiceName(mc.Name).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc))).
		WithPodManagementPolicy(appsv1.ParallelPodManagement).
		WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType(appsv1.RollingUpdateStatefulSetStrategyType)).
		WithTemplate(template)
	if mc.Spec.MinReadySeconds > 0 {
		spec.WithMinReadySeconds(mc.Spec.MinReadySeconds)
	}
	return appsv1ac.StatefulSet(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(spec), nil
}
