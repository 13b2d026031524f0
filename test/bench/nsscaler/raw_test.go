package nsscaler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// rawWrites are the raw client's park and restore of one workload: the
// same one-patch-per-object writes the controller makes (annotation +
// replicas, metadata-only response).
func rawWrites(ctx context.Context, c client.Client) (park, restore func(client.ObjectKey) error) {
	park = func(k client.ObjectKey) error {
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{\"v\":1,\"replicas\":%d,\"by\":\"raw\"}"}},"spec":{"replicas":0}}`, annotation, replicasFor(k))
		return c.Patch(ctx, deploymentMeta(k), client.RawPatch(types.MergePatchType, []byte(body)))
	}
	restore = func(k client.ObjectKey) error {
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":%d}}`, annotation, replicasFor(k))
		return c.Patch(ctx, deploymentMeta(k), client.RawPatch(types.MergePatchType, []byte(body)))
	}
	return park, restore
}

// rawWithFanOut runs the raw park and restore while a Deployment informer
// like the manager's is open in this process: the same watch (protobuf,
// every Deployment), decoding every event and trimming it with the same
// transform, on the same cores. Each phase ends, as the controller's does,
// once that informer has observed the state the writes produced.
func rawWithFanOut(ctx context.Context, base *rest.Config, scheme *runtime.Scheme, keys []client.ObjectKey,
	park, restore func(client.ObjectKey) error) (rawRun, error) {
	cfg := rest.CopyConfig(base)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	obs, err := benchkit.ObserveWith(ctx, cfg, cache.Options{Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Transform: trimDeployment}}}, &appsv1.Deployment{})
	if err != nil {
		return rawRun{}, err
	}
	defer obs.Stop()
	phase := func(write func(client.ObjectKey) error, parked bool) (time.Duration, passTiming, string, error) {
		cpu := startCPUSpent()
		start := time.Now()
		if err := parallel(keys, write); err != nil {
			return 0, passTiming{}, "", err
		}
		written := time.Since(start)
		_, err := obs.Until(ctx, time.Minute, 5*time.Minute, func() (bool, string, error) {
			var l appsv1.DeploymentList
			if err := obs.Reader().List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
				return false, "", err
			}
			n := 0
			for i := range l.Items {
				if inState(&l.Items[i], parked) {
					n++
				}
			}
			return n == len(keys), fmt.Sprintf("%d/%d observed", n, len(keys)), nil
		})
		took := time.Since(start)
		return took, passTiming{writes: written, tail: took - written}, cpu.describe(), err
	}
	var r rawRun
	if r.park, r.parkPass, r.parkCPU, err = phase(park, true); err != nil {
		return rawRun{}, fmt.Errorf("park: %w", err)
	}
	if r.restore, r.restorePass, r.restoreCPU, err = phase(restore, false); err != nil {
		return rawRun{}, fmt.Errorf("restore: %w", err)
	}
	return r, nil
}

// trimDeployment keeps what the manager's workload cache keeps of a
// Deployment (internal/controller/nsscaler: trimObject): identity, owner
// references, labels (for excludeSelector), replicas and the original
// annotation.
func trimDeployment(o any) (any, error) {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return o, nil
	}
	d.ManagedFields = nil
	if v, ok := d.Annotations[annotation]; ok {
		d.Annotations = map[string]string{annotation: v}
	} else {
		d.Annotations = nil
	}
	d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas}
	d.Status = appsv1.DeploymentStatus{}
	return d, nil
}

func replicasFor(k client.ObjectKey) int32 {
	return int32(len(k.Namespace)+int(k.Name[len(k.Name)-1]))%4 + 1
}

func deployment(k client.ObjectKey, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": k.Name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
			},
		},
	}
}

// parallel runs f over keys with `concurrency` workers and returns the first error.
func parallel(keys []client.ObjectKey, f func(client.ObjectKey) error) error {
	work := make(chan client.ObjectKey)
	errs := make(chan error, len(keys))
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for k := range work {
				if err := f(k); err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// inState reports whether d is parked (0 replicas with the annotation) or
// restored (its original count, no annotation).
func inState(d *appsv1.Deployment, parked bool) bool {
	_, annotated := d.Annotations[annotation]
	if d.Spec.Replicas == nil {
		return false
	}
	if parked {
		return *d.Spec.Replicas == 0 && annotated
	}
	return *d.Spec.Replicas == replicasFor(client.ObjectKeyFromObject(d)) && !annotated
}

// countReplicas counts the benchmark's Deployments that are parked or
// restored (one list, after a phase).
func countReplicas(ctx context.Context, b *testing.B, c client.Client, keys []client.ObjectKey, parked bool) int {
	var l appsv1.DeploymentList
	if err := c.List(ctx, &l); err != nil {
		b.Fatal(err)
	}
	want := make(map[client.ObjectKey]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	n := 0
	for i := range l.Items {
		if want[client.ObjectKeyFromObject(&l.Items[i])] && inState(&l.Items[i], parked) {
			n++
		}
	}
	return n
}

// deploymentMeta names a Deployment for a patch whose response is metadata
// only, as the controller's patches are.
func deploymentMeta(k client.ObjectKey) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
	m.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return m
}
