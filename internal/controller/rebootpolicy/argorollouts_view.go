package rebootpolicy

import (
	"context"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Argo Rollouts' Rollout is read as an unstructured object: the project
// does not depend on Argo Rollouts' Go module, and only the fields below
// are read (see rolloutView).
var (
	rolloutGVK     = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: string(autorebootv1alpha1.KindRollout)}
	rolloutListGVK = rolloutGVK.GroupVersion().WithKind(string(autorebootv1alpha1.KindRollout) + "List")
)

// workloadGenerationAnnotation is where the Rollout controller records
// the generation of the workloadRef Deployment it resolved the template
// from; status.workloadObservedGeneration says which one it has acted on.
const workloadGenerationAnnotation = "rollout.argoproj.io/workload-generation"

// Rollout phases (status.phase, computed by the Rollout controller).
const (
	rolloutPhaseHealthy  = "Healthy"
	rolloutPhasePaused   = "Paused"
	rolloutPhaseDegraded = "Degraded"
)

func newRolloutObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rolloutGVK)
	return u
}

func newRolloutList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(rolloutListGVK)
	return l
}

func isRollout(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind() == rolloutGVK
}

func asRollout(obj client.Object) (*unstructured.Unstructured, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok && isRollout(u)
}

// rolloutView reads a Rollout's status the way the Rollout controller's
// own phase does: a generation (or workloadRef generation) not yet
// observed, a restart not yet acknowledged, Degraded (timed out, aborted
// or invalid) and Paused come first; then the replica counts.
func rolloutView(u *unstructured.Unstructured) workloadView {
	obj := u.Object
	want := int32(1)
	if n, ok, _ := unstructured.NestedInt64(obj, "spec", "replicas"); ok {
		want = int32(n)
	}
	count := func(field string) int32 {
		n, _, _ := unstructured.NestedInt64(obj, "status", field)
		return int32(n)
	}
	minReady, _, _ := unstructured.NestedInt64(obj, "spec", "minReadySeconds")
	phase, _, _ := unstructured.NestedString(obj, "status", "phase")
	restartAt, _, _ := unstructured.NestedString(obj, "spec", "restartAt")
	restartedAt, _, _ := unstructured.NestedString(obj, "status", "restartedAt")
	paused, _, _ := unstructured.NestedBool(obj, "spec", "paused")
	v := workloadView{kind: autorebootv1alpha1.KindRollout, template: &corev1.PodTemplateSpec{},
		observed: rolloutObservedGeneration(u), want: want, replicas: count("replicas"), updated: count("updatedReplicas"),
		ready: count("readyReplicas"), available: count("availableReplicas"), minReady: int32(minReady),
		deadlineExceeded: phase == rolloutPhaseDegraded, halted: phase == rolloutPhasePaused || paused,
		restarting: restartAt != "" && !sameInstant(restartAt, restartedAt), stamp: restartAt}
	// A Rollout controller older than status.phase (v0.10) leaves it
	// empty: then the counts alone say whether old replicas are left.
	v.settled = phase == rolloutPhaseHealthy || (phase == "" && v.replicas == want)
	return v
}

// rolloutObservedGeneration is status.observedGeneration (a string); a
// value that is not a number (a spec hash of old controllers) cannot tell,
// and counts as observed, as the Rollout controller's own reading does.
// A template resolved from a workloadRef whose newer generation the
// controller has not acted on yet is not observed either.
func rolloutObservedGeneration(u *unstructured.Unstructured) int64 {
	gen := u.GetGeneration()
	s, _, _ := unstructured.NestedString(u.Object, "status", "observedGeneration")
	observed, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		observed = gen
	}
	if want, ok := u.GetAnnotations()[workloadGenerationAnnotation]; ok {
		got, _, _ := unstructured.NestedString(u.Object, "status", "workloadObservedGeneration")
		if got != "" && got != want {
			return min(observed, gen-1)
		}
	}
	return observed
}

func sameInstant(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339, a)
	tb, errB := time.Parse(time.RFC3339, b)
	return errA == nil && errB == nil && ta.Equal(tb)
}

// rolloutTemplate is the pod template a Rollout runs: spec.template, or
// the template of the Deployment its spec.workloadRef names — in the
// Rollout's own namespace, whatever else the reference says, as the
// Rollout controller resolves it. An unreadable template is empty (no
// references).
func rolloutTemplate(u *unstructured.Unstructured, reader client.Reader) *corev1.PodTemplateSpec {
	if d := workloadRefDeployment(u, reader); d != nil {
		return &d.Spec.Template
	}
	t := &corev1.PodTemplateSpec{}
	if m, ok, _ := unstructured.NestedMap(u.Object, "spec", "template"); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, t); err != nil {
			return &corev1.PodTemplateSpec{}
		}
	}
	return t
}

// rolloutTemplateVersion changes whenever the Rollout's template may: its
// generation, and the UID and generation of a workloadRef Deployment.
func rolloutTemplateVersion(u *unstructured.Unstructured, reader client.Reader) string {
	v := strconv.FormatInt(u.GetGeneration(), 10)
	if d := workloadRefDeployment(u, reader); d != nil {
		v += "/" + string(d.UID) + "/" + strconv.FormatInt(d.Generation, 10)
	}
	return v
}

// workloadRefDeployment reads the Deployment spec.workloadRef names, from
// the Rollout's namespace only (nil: none, another kind, or not found).
// ObjectRef has no namespace field, and the CRD prunes one a tenant adds;
// it is never read here either.
func workloadRefDeployment(u *unstructured.Unstructured, reader client.Reader) *appsv1.Deployment {
	ref, ok, _ := unstructured.NestedStringMap(u.Object, "spec", "workloadRef")
	if !ok || reader == nil || ref["kind"] != "Deployment" || ref["name"] == "" ||
		(ref["apiVersion"] != "" && ref["apiVersion"] != "apps/v1") {
		return nil
	}
	d := &appsv1.Deployment{}
	// The manager's cache: the Deployment informer runs anyway, so the
	// read does not wait on the apiserver.
	if err := reader.Get(context.Background(), types.NamespacedName{Namespace: u.GetNamespace(), Name: ref["name"]}, d); err != nil {
		return nil
	}
	return d
}
