package memcached

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// instanceLabel names the Memcached a pod, Deployment or Service belongs
// to (the controller's selector labels).
const instanceLabel = "app.kubernetes.io/instance"

// truth measures how soon Runbook's status tells the truth about the pods.
// Fed every add and update of the phase's pods, Deployments, EndpointSlices
// and Memcacheds by one watcher, it records for each pod that turns Ready:
//
//   - ready: when the watcher saw the pod Ready (with an IP);
//   - inputs: when the Memcached's Deployment counted as many ready pods
//     as the Memcached had then and its Service's EndpointSlices listed the
//     pod's address as ready: what kube-controller-manager publishes and
//     the controller reads (it does not watch pods);
//   - status: when the Memcached's status first said as much (readyReplicas
//     at least that count, the pod's address in servers).
//
// It also counts each Memcached's distinct statuses, so that the status
// writes the apiserver accepted can be checked to have each changed one.
// All times come from the same process's watches, so their delivery
// delays largely cancel out.
type truth struct {
	mu sync.Mutex
	// readyPods: per Memcached, the addresses of its Ready pods.
	readyPods map[string]map[string]bool
	depReady  map[string]int32
	// sliceReady: per Memcached, per EndpointSlice, its ready addresses.
	sliceReady map[string]map[string][]string
	status     map[string]*cachev1alpha1.MemcachedStatus
	// statusChanges counts, per Memcached, the versions whose status
	// differed from the one before.
	statusChanges map[string]int
	changes       []*readiness
}

// readiness is one pod turning Ready, and when each side reflected it.
type readiness struct {
	memcached, addr string
	count           int32
	ready           time.Time
	inputs, status  time.Time
}

func newTruth() *truth {
	return &truth{readyPods: map[string]map[string]bool{}, depReady: map[string]int32{},
		sliceReady: map[string]map[string][]string{}, status: map[string]*cachev1alpha1.MemcachedStatus{},
		statusChanges: map[string]int{}}
}

// watch feeds t from obs (which must watch the four kinds).
func (t *truth) watch(ctx context.Context, obs *benchkit.Observer) error {
	if err := obs.OnAddOrUpdate(ctx, &corev1.Pod{}, t.pod); err != nil {
		return err
	}
	if err := obs.OnAddOrUpdate(ctx, &appsv1.Deployment{}, t.deployment); err != nil {
		return err
	}
	if err := obs.OnAddOrUpdate(ctx, &discoveryv1.EndpointSlice{}, t.slice); err != nil {
		return err
	}
	return obs.OnAddOrUpdate(ctx, &cachev1alpha1.Memcached{}, t.memcached)
}

func (t *truth) pod(o any, at time.Time) {
	p, ok := o.(*corev1.Pod)
	mc := ""
	if ok {
		mc = p.Labels[instanceLabel]
	}
	if mc == "" || p.Status.PodIP == "" {
		return
	}
	ready := p.DeletionTimestamp == nil && podReady(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	pods := t.readyPods[mc]
	if pods == nil {
		pods = map[string]bool{}
		t.readyPods[mc] = pods
	}
	if !ready {
		delete(pods, p.Status.PodIP)
		return
	}
	if pods[p.Status.PodIP] {
		return
	}
	pods[p.Status.PodIP] = true
	r := &readiness{memcached: mc, addr: p.Status.PodIP, count: int32(len(pods)), ready: at}
	t.changes = append(t.changes, r)
	t.check(r, at)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (t *truth) deployment(o any, at time.Time) {
	d, ok := o.(*appsv1.Deployment)
	if !ok || d.Labels[instanceLabel] == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.depReady[d.Labels[instanceLabel]] = d.Status.ReadyReplicas
	t.checkAll(d.Labels[instanceLabel], at)
}

func (t *truth) slice(o any, at time.Time) {
	s, ok := o.(*discoveryv1.EndpointSlice)
	mc := ""
	if ok {
		mc = s.Labels[discoveryv1.LabelServiceName]
	}
	if mc == "" {
		return
	}
	var addrs []string
	for _, ep := range s.Endpoints {
		if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
			addrs = append(addrs, ep.Addresses...)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sliceReady[mc] == nil {
		t.sliceReady[mc] = map[string][]string{}
	}
	t.sliceReady[mc][s.Name] = addrs
	t.checkAll(mc, at)
}

func (t *truth) memcached(o any, at time.Time) {
	mc, ok := o.(*cachev1alpha1.Memcached)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, seen := t.status[mc.Name]; !seen || !equality.Semantic.DeepEqual(prev, &mc.Status) {
		if seen || !equality.Semantic.DeepEqual(&mc.Status, &cachev1alpha1.MemcachedStatus{}) {
			t.statusChanges[mc.Name]++
		}
		t.status[mc.Name] = mc.Status.DeepCopy()
	}
	t.checkAll(mc.Name, at)
}

// checkAll updates the pending readiness changes of one Memcached.
func (t *truth) checkAll(mc string, at time.Time) {
	for _, r := range t.changes {
		if r.memcached == mc {
			t.check(r, at)
		}
	}
}

// check records at as when r's inputs or status first reflected it.
func (t *truth) check(r *readiness, at time.Time) {
	if r.inputs.IsZero() && t.depReady[r.memcached] >= r.count && t.sliceListsReady(r.memcached, r.addr) {
		r.inputs = at
	}
	if st := t.status[r.memcached]; r.status.IsZero() && st != nil && st.ReadyReplicas >= r.count && listsServer(st.Servers, r.addr) {
		r.status = at
	}
}

func (t *truth) sliceListsReady(mc, addr string) bool {
	for _, addrs := range t.sliceReady[mc] {
		if slices.Contains(addrs, addr) {
			return true
		}
	}
	return false
}

func listsServer(servers []string, addr string) bool {
	for _, s := range servers {
		if host, _, err := net.SplitHostPort(s); err == nil && host == addr {
			return true
		}
	}
	return false
}

// truthReport is what truth measured over a phase.
type truthReport struct {
	changes, unreflected int
	// endToEnd: pod Ready → status; kcm: pod Ready → inputs; runbook:
	// inputs → status (0 when the status was seen first).
	endToEnd, kcm, runbook []time.Duration
}

func (t *truth) report() truthReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	rep := truthReport{changes: len(t.changes)}
	for _, r := range t.changes {
		if r.status.IsZero() || r.inputs.IsZero() {
			rep.unreflected++
			continue
		}
		rep.endToEnd = append(rep.endToEnd, r.status.Sub(r.ready))
		rep.kcm = append(rep.kcm, r.inputs.Sub(r.ready))
		rep.runbook = append(rep.runbook, max(0, r.status.Sub(r.inputs)))
	}
	return rep
}

// changedStatuses is, per Memcached, how many distinct statuses it had.
func (t *truth) changedStatuses() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.statusChanges))
	for k, v := range t.statusChanges {
		out[k] = v
	}
	return out
}

// describe is p50/p99/max of ds.
func describe(ds []time.Duration) string {
	return fmt.Sprintf("p50 %s p99 %s max %s", benchkit.Percentile(ds, 0.5).Round(time.Millisecond),
		benchkit.Percentile(ds, 0.99).Round(time.Millisecond), benchkit.Percentile(ds, 1).Round(time.Millisecond))
}

// noopStatusWrites counts the accepted status writes, over all
// Memcacheds, beyond the status changes a watch saw: each is a write that
// changed nothing (the apiserver accepts a patch that changes nothing
// without a new version, so the watch never sees it).
func noopStatusWrites(writes []benchkit.AuditEvent, ns string, changed map[string]int) (noop, accepted int) {
	per := map[string]int{}
	for i := range writes {
		e := &writes[i]
		if e.Namespace() == ns && e.Resource() == "memcacheds/status" && e.Code() >= 200 && e.Code() < 300 {
			per[e.Name()]++
			accepted++
		}
	}
	for name, n := range per {
		noop += max(0, n-changed[name])
	}
	return noop, accepted
}
