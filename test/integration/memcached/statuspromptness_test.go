package memcached

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// statusDeadline is how soon after the pods change the status must say so.
const statusDeadline = time.Second

// A scale-up, as a user watching the Memcached sees it: once the new pods
// are ready (the Deployment's status and the Service's EndpointSlice say
// so, written here as kube-controller-manager would), the ready count and
// the servers are in status within a second; every status write the
// manager makes changes the status, and once settled it writes nothing.
func TestScaleUpIsInStatusWithinASecond(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "grow"
	create(t, newMemcached(ns, name, cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}))
	d := eventuallyDeployment(t, ns, name, func(g Gomega, d *appsv1.Deployment) {})
	setPods(t, d, 1, 1)
	slice := readySlice(ns, name, "10.2.0.1")
	create(t, slice)
	eventuallyCondition(t, ns, name, cachev1alpha1.ConditionAvailable, metav1.ConditionTrue, cachev1alpha1.ReasonAllInstancesAvailable)
	waitQuiet(t, ns, name)

	mc := &cachev1alpha1.Memcached{}
	g.Expect(env.client.Get(ctx, key(ns, name), mc)).To(Succeed())
	w := watchMemcached(t, mc)
	mark := env.writes.count()

	// Scale up; the Deployment follows and its new pods exist, not ready.
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.Size = ptr.To[int32](3)
	g.Expect(env.client.Patch(ctx, mc, patch)).To(Succeed())
	d = eventuallyDeployment(t, ns, name, func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(3))))
	})
	setPods(t, d, 3, 1)
	w.waitFor(t, "3 replicas, 1 ready", timeout, func(st *cachev1alpha1.MemcachedStatus) bool {
		return st.Replicas == 3 && st.ReadyReplicas == 1
	})

	// The two new pods become ready one after the other; each is in
	// status within statusDeadline, the first too although the rollout
	// is not complete yet.
	addrs := []string{"10.2.0.1", "10.2.0.2", "10.2.0.3"}
	for ready := int32(2); ready <= 3; ready++ {
		changed := time.Now()
		setPods(t, d, 3, ready)
		g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(slice), slice)).To(Succeed())
		slice.Endpoints = readySlice(ns, name, addrs[:ready]...).Endpoints
		g.Expect(env.client.Update(ctx, slice)).To(Succeed())
		// Ten times the deadline: enough to tell late from never on a
		// busy machine, without waiting out a status held back for minutes.
		seen := w.waitFor(t, fmt.Sprintf("%d ready, %d servers", ready, ready), 10*statusDeadline, func(st *cachev1alpha1.MemcachedStatus) bool {
			return st.ReadyReplicas == ready && len(st.Servers) == int(ready)
		})
		if took := seen.Sub(changed); took > statusDeadline {
			t.Errorf("%d of 3 pods ready: in status %s after the change, want ≤ %s", ready, took, statusDeadline)
		} else {
			t.Logf("%d of 3 pods ready: in status %s after the change", ready, took.Round(time.Millisecond))
		}
	}
	w.waitFor(t, "Available", timeout, func(st *cachev1alpha1.MemcachedStatus) bool {
		return meta.IsStatusConditionTrue(st.Conditions, cachev1alpha1.ConditionAvailable)
	})

	// Settled: forced reconciles write nothing. Then every status write the
	// apiserver accepted since the scale-up produced a different status.
	waitQuiet(t, ns, name)
	statusPath := fmt.Sprintf("/namespaces/%s/memcacheds/%s/status", ns, name)
	var statusWrites int
	for _, p := range env.writes.acceptedSince(mark) {
		if strings.HasSuffix(p, statusPath) {
			statusWrites++
		}
	}
	changes := w.stop()
	if statusWrites != changes {
		t.Errorf("%d status writes for %d status changes: a write changed nothing", statusWrites, changes)
	}
	if changes < 3 {
		t.Errorf("%d status changes seen, want at least 3 (3 replicas, 2 ready, 3 ready)", changes)
	}
}

// setPods plays kube-controller-manager for d: replicas pods of the
// current template exist, ready of them ready and available.
func setPods(t *testing.T, d *appsv1.Deployment, replicas, ready int32) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: ready, AvailableReplicas: ready}
		g.Expect(env.client.Status().Update(ctx, d)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// readySlice is the EndpointSlice controller's slice of the Service name
// with addrs ready.
func readySlice(ns, name string, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abc", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			"app.kubernetes.io/managed-by": "runbook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("memcache"), Port: ptr.To[int32](11211)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// waitQuiet waits until the manager's cache has caught up with its own
// writes, proved by a forced reconcile that writes nothing.
func waitQuiet(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		mark := env.writes.count()
		_, err := env.reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: key(ns, name)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(writesTo(env.writes.since(mark), "/namespaces/"+ns+"/")).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// statusWatch records every version of one Memcached after a given one,
// with when the test saw it.
type statusWatch struct {
	w    watch.Interface
	done chan struct{}

	mu       sync.Mutex
	changed  *sync.Cond
	last     cachev1alpha1.MemcachedStatus
	lastSeen time.Time
	// changes counts versions whose status differs from the one before.
	changes int
	err     error
}

func watchMemcached(t *testing.T, from *cachev1alpha1.Memcached) *statusWatch {
	t.Helper()
	w, err := env.watcher.Watch(context.Background(), &cachev1alpha1.MemcachedList{}, &client.ListOptions{
		Namespace: from.Namespace,
		Raw:       &metav1.ListOptions{ResourceVersion: from.ResourceVersion, FieldSelector: "metadata.name=" + from.Name},
	})
	if err != nil {
		t.Fatal(err)
	}
	sw := &statusWatch{w: w, done: make(chan struct{}), last: *from.Status.DeepCopy()}
	sw.changed = sync.NewCond(&sw.mu)
	go sw.run()
	t.Cleanup(func() { sw.stop() })
	return sw
}

func (sw *statusWatch) run() {
	defer close(sw.done)
	for ev := range sw.w.ResultChan() {
		now := time.Now()
		sw.mu.Lock()
		mc, ok := ev.Object.(*cachev1alpha1.Memcached)
		switch {
		case !ok || ev.Type != watch.Modified:
			sw.err = fmt.Errorf("unexpected watch event %s %T", ev.Type, ev.Object)
		case !equality.Semantic.DeepEqual(mc.Status, sw.last):
			sw.changes++
			sw.last, sw.lastSeen = mc.Status, now
		}
		sw.changed.Broadcast()
		sw.mu.Unlock()
	}
	sw.mu.Lock()
	sw.changed.Broadcast()
	sw.mu.Unlock()
}

// waitFor waits up to limit until the last status seen satisfies cond and
// returns when that status was seen.
func (sw *statusWatch) waitFor(t *testing.T, what string, limit time.Duration, cond func(*cachev1alpha1.MemcachedStatus) bool) time.Time {
	t.Helper()
	expired := false
	timer := time.AfterFunc(limit, func() {
		sw.mu.Lock()
		expired = true
		sw.changed.Broadcast()
		sw.mu.Unlock()
	})
	defer timer.Stop()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for !cond(&sw.last) {
		switch {
		case sw.err != nil:
			t.Fatalf("waiting for a status with %s: %v; last status %+v", what, sw.err, sw.last)
		case expired:
			t.Fatalf("no status with %s within %s; last status %+v", what, limit, sw.last)
		}
		sw.changed.Wait()
	}
	return sw.lastSeen
}

// stop ends the watch and returns how many status changes it saw.
func (sw *statusWatch) stop() int {
	sw.w.Stop()
	<-sw.done
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.changes
}
