package nsscaler

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// KindKey identifies a kind of workload: Group is empty for the built-in kinds.
type KindKey struct {
	Group string
	Kind  string
}

func (k KindKey) String() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Group
}

func kindKeyOf(k scalingv1alpha1.WorkloadKind) KindKey { return KindKey{Group: k.Group, Kind: k.Kind} }

var (
	kindDeployment  = KindKey{Kind: scalingv1alpha1.KindDeployment}
	kindStatefulSet = KindKey{Kind: scalingv1alpha1.KindStatefulSet}
	kindCronJob     = KindKey{Kind: scalingv1alpha1.KindCronJob}
)

// Workload is the part of a parkable object the controller decides on.
type Workload struct {
	Kind            KindKey
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	// Replicas is the desired replica count (scalable kinds).
	Replicas int32
	// Suspend is the CronJob's suspend flag.
	Suspend bool
	// Annotation is the raw value of AnnotationOriginal, when present.
	Annotation    string
	HasAnnotation bool
	// Controlled is true when an owner reference has controller: true.
	Controlled bool
}

// suspends reports whether the kind is parked by suspending (CronJob) rather
// than scaling to zero.
func (k KindKey) suspends() bool { return k == kindCronJob }

// isParked reports whether the workload is in its parked state.
func (w Workload) isParked() bool {
	if w.Kind.suspends() {
		return w.Suspend
	}
	return w.Replicas == 0
}

// current records the workload's present state as an original.
func (w Workload) current(by string) Original {
	if w.Kind.suspends() {
		return SuspendOriginal(w.Suspend, by)
	}
	return ReplicasOriginal(w.Replicas, by)
}

// writeTracker remembers the state the controller itself wrote, per object,
// until the informer cache has caught up with it. A reconcile that runs while
// the cache is still behind its own writes then decides on what it wrote, not
// on the stale copy, and does not write the same change twice.
type writeTracker struct {
	mu      sync.Mutex
	written map[types.UID]Workload
}

func newWriteTracker() *writeTracker { return &writeTracker{written: map[types.UID]Workload{}} }

func (t *writeTracker) record(w Workload) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written[w.UID] = w
}

// freshest returns the newer of the cached copy and the last written state,
// forgetting the written state once the cache has reached it.
func (t *writeTracker) freshest(cached Workload) Workload {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.written[cached.UID]
	if !ok {
		return cached
	}
	cmp, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, w.ResourceVersion)
	if err == nil && cmp < 0 {
		return w
	}
	delete(t.written, cached.UID)
	return cached
}

// forget drops entries of objects of kind k that are gone.
func (t *writeTracker) forget(k KindKey, seen map[types.UID]struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, w := range t.written {
		if w.Kind != k {
			continue
		}
		if _, ok := seen[uid]; !ok {
			delete(t.written, uid)
		}
	}
}
