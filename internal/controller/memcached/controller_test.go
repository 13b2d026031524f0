package memcached

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// laggingCache is the apiserver of a unit test (a fake client) seen through
// an informer cache that can be made to lag: while stale is set, every read
// of the Memcached through cached returns it instead of the stored object.
type laggingCache struct {
	server client.WithWatch
	cached client.Client
	stale  *cachev1alpha1.Memcached
}

func newLaggingCache(t *testing.T, objs ...client.Object) *laggingCache {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	lc := &laggingCache{}
	lc.server = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&cachev1alpha1.Memcached{}, &appsv1.Deployment{}).
		WithIndex(&discoveryv1.EndpointSlice{}, indexSliceService, sliceService).
		WithReturnManagedFields().Build()
	lc.cached = interceptor.NewClient(lc.server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if mc, ok := obj.(*cachev1alpha1.Memcached); ok && lc.stale != nil {
				lc.stale.DeepCopyInto(mc)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	return lc
}

// newReconciler is what Setup builds, on the lagging cache: reads through
// the cache, fresh reads (the APIReader) from the server.
func (lc *laggingCache) newReconciler(clk *clocktesting.FakePassiveClock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{
		Client: lc.cached,
		Status: status.NewWriter(lc.cached, lc.server, status.FieldOwner(Name)),
		Events: status.Events{Recorder: recorder},
		Clock:  clk,
	}
}

func (lc *laggingCache) memcached(t *testing.T, key client.ObjectKey) *cachev1alpha1.Memcached {
	t.Helper()
	mc := &cachev1alpha1.Memcached{}
	if err := lc.server.Get(context.Background(), key, mc); err != nil {
		t.Fatal(err)
	}
	return mc
}

// setDeploymentStatus plays kube-controller-manager: replicas pods exist,
// available of them ready.
func (lc *laggingCache) setDeploymentStatus(t *testing.T, key client.ObjectKey, replicas, available int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := lc.server.Get(context.Background(), key, d); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
		ReadyReplicas: available, AvailableReplicas: available}
	if err := lc.server.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

func reconcileOnce(t *testing.T, r *Reconciler, key client.ObjectKey) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// staleRollout is the CI failure of test/e2e/memcached (status.replicas 1
// with 2 pods Running after the threads rollout), made deterministic, up to
// the reconcile that goes wrong. During a rollout of size 2 the Deployment
// goes from 2 pods to 1 and back to 2. The reconcile for "1" writes
// status.replicas 1; the one for "2" comes right after, while the cache
// still holds the Memcached from before that write (replicas 2). The
// status computed from that copy equals it, so a merge patch against it
// leaves replicas out and the server keeps 1; status-only changes do not
// requeue, so nothing corrects it. staleRollout returns with the cache made
// stale and the Deployment at 2 pods, for the last reconcile.
func staleRollout(t *testing.T) (*laggingCache, *Reconciler, client.ObjectKey) {
	t.Helper()
	key := client.ObjectKey{Namespace: "shop", Name: "sessions"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC))
	r := lc.newReconciler(clk, nil)

	reconcileOnce(t, r, key) // creates the Deployment
	lc.setDeploymentStatus(t, key, 2, 2)
	reconcileOnce(t, r, key)
	cachedCopy := lc.memcached(t, key)
	if cachedCopy.Status.Replicas != 2 {
		t.Fatalf("set-up: status.replicas %d, want 2", cachedCopy.Status.Replicas)
	}

	// The rollout replaces one pod: the controller writes replicas 1 ...
	clk.SetTime(clk.Now().Add(time.Minute))
	lc.setDeploymentStatus(t, key, 1, 1)
	reconcileOnce(t, r, key)
	if got := lc.memcached(t, key).Status.Replicas; got != 1 {
		t.Fatalf("set-up: status.replicas %d after one pod went, want 1", got)
	}
	// ... and the replacement is up before the cache has seen that write.
	clk.SetTime(clk.Now().Add(time.Minute))
	lc.setDeploymentStatus(t, key, 2, 2)
	lc.stale = cachedCopy
	return lc, r, key
}

func TestStatusIsRightAfterAStaleCachedRead(t *testing.T) {
	lc, r, key := staleRollout(t)
	reconcileOnce(t, r, key)
	lc.stale = nil

	got := lc.memcached(t, key)
	if got.Status.Replicas != 2 || got.Status.ReadyReplicas != 2 {
		t.Errorf("status.replicas %d, readyReplicas %d after the stale read, want 2 and 2", got.Status.Replicas, got.Status.ReadyReplicas)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable) {
		t.Errorf("Available is not True after the stale read: %+v", meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionAvailable))
	}
}

// The control of TestStatusIsRightAfterAStaleCachedRead: the same
// rollout, with the last status written the way it was before the status
// kit (a merge patch computed against the cached copy), ends with the
// stale status. Without this, the test above could pass on a scenario that
// does not reproduce the defect.
func TestMergePatchAgainstTheCacheKeepsAStaleStatus(t *testing.T) {
	lc, r, key := staleRollout(t)
	ctx := context.Background()
	mc := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, key, mc); err != nil {
		t.Fatal(err)
	}
	s, obs := r.prepare(ctx, mc)
	r.reconcileObjects(ctx, mc, s, &obs)
	st := computeStatus(mc, obs, r.Clock.Now())
	if !equality.Semantic.DeepEqual(st, mc.Status) {
		before := mc.DeepCopy()
		mc.Status = st
		if err := r.Client.Status().Patch(ctx, mc, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	if got := lc.memcached(t, key).Status.Replicas; got != 1 {
		t.Fatalf("control: status.replicas %d, want the stale 1 the naive patch leaves", got)
	}
}

func TestServiceMonitorWithoutTheKindIsRecheckedLater(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "monitored"}
	// The fake client's RESTMapper knows only the scheme's kinds: no
	// ServiceMonitor.
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec: cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true,
			ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: true}}},
	})
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Now()), nil)
	if res := reconcileOnce(t, r, key); res.RequeueAfter != serviceMonitorRecheck {
		t.Errorf("result %+v, want a recheck after %v", res, serviceMonitorRecheck)
	}
	degraded := meta.FindStatusCondition(lc.memcached(t, key).Status.Conditions, cachev1alpha1.ConditionDegraded)
	if degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != cachev1alpha1.ReasonServiceMonitorUnsupported {
		t.Errorf("Degraded = %+v, want True/%s", degraded, cachev1alpha1.ReasonServiceMonitorUnsupported)
	}
}

func TestForeignObjectWarnsOnTheTransitionOnly(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "taken"}
	lc := newLaggingCache(t,
		&cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	recorder := events.NewFakeRecorder(10)
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Now()), recorder)
	for range 3 {
		reconcileOnce(t, r, key)
	}
	close(recorder.Events)
	var warnings []string
	for e := range recorder.Events {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], cachev1alpha1.EventForeignObject+" Deployment shop/taken") {
		t.Errorf("warnings %q, want one %s naming the Deployment", warnings, cachev1alpha1.EventForeignObject)
	}
}

func TestNamesAreTheKitsAndUnchanged(t *testing.T) {
	if FieldManager != status.FieldOwner(Name) || FieldManager != "runbook-memcached" {
		t.Errorf("field manager %q, want status.FieldOwner(%q) = runbook-memcached", FieldManager, Name)
	}
	if got := status.ReporterName(Name); got != "memcached-controller" {
		t.Errorf("reporter %q, want memcached-controller", got)
	}
}

// terminatingNamespace is the apiserver's answer to a create in a namespace
// being deleted (the NamespaceLifecycle admission plugin's).
func terminatingNamespace(namespace string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "",
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace " + namespace + " is being terminated", Field: "metadata.namespace"})
	return err
}

// While its namespace is deleted, a Memcached may outlive the objects it
// owns: the namespace controller deletes them in no particular order.
// Recreating them is refused; that is neither Degraded nor an error to
// retry with backoff, and no Warning event is recorded.
func TestNamespaceBeingDeletedIsNotAFailure(t *testing.T) {
	key := client.ObjectKey{Namespace: "leaving", Name: "sessions"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	})
	refused := 0
	lc.cached = interceptor.NewClient(lc.cached.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			refused++
			return terminatingNamespace(key.Namespace)
		},
	})
	recorder := events.NewFakeRecorder(10)
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Now()), recorder)

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("Reconcile = %+v, %v; want no requeue and no error", res, err)
	}
	if refused == 0 {
		t.Fatal("set-up: no apply was refused")
	}
	if got := lc.memcached(t, key).Status.Conditions; len(got) != 0 {
		t.Errorf("status conditions written while the namespace is deleted: %+v", got)
	}
	select {
	case e := <-recorder.Events:
		t.Errorf("event recorded: %s", e)
	default:
	}
}

// Any other refusal is still reported.
func TestForbiddenApplyIsStillDegraded(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "sessions"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	})
	lc.cached = interceptor.NewClient(lc.cached.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, obj.GetName(), errors.New("quota"))
		},
	})
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Now()), events.NewFakeRecorder(10))
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err == nil {
		t.Fatal("Reconcile returned no error for a refused apply")
	}
	c := meta.FindStatusCondition(lc.memcached(t, key).Status.Conditions, cachev1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != cachev1alpha1.ReasonApplyFailed {
		t.Errorf("Degraded = %+v, want True ApplyFailed", c)
	}
}
