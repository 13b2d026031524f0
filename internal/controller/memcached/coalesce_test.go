package memcached

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// statusOf builds a status: available and ready instances, servers listed,
// and Progressing's status and reason.
func statusOf(ready int32, servers int, progressing metav1.ConditionStatus, reason string) cachev1alpha1.MemcachedStatus {
	st := cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: ready, Replicas: 2, TLS: ptr.To(false), Auth: ptr.To(false)}
	for i := range servers {
		st.Servers = append(st.Servers, string(rune('a'+i))+":11211")
	}
	avail := metav1.ConditionFalse
	if ready == 2 {
		avail = metav1.ConditionTrue
	}
	st.Conditions = []metav1.Condition{
		{Type: cachev1alpha1.ConditionAvailable, Status: avail, Reason: "R", Message: string('0' + ready)},
		{Type: cachev1alpha1.ConditionProgressing, Status: progressing, Reason: reason, Message: reason + " message"},
		{Type: cachev1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonAsExpected},
	}
	return st
}

func TestStatusPacerHold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	empty := cachev1alpha1.MemcachedStatus{}
	scalingUp := statusOf(0, 0, metav1.ConditionTrue, cachev1alpha1.ReasonScalingUp)
	waiting := statusOf(0, 0, metav1.ConditionTrue, cachev1alpha1.ReasonWaitingForReadiness)
	oneReady := statusOf(1, 1, metav1.ConditionTrue, cachev1alpha1.ReasonWaitingForReadiness)
	readyNotListed := statusOf(2, 1, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete)
	done := statusOf(2, 2, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete)
	degraded := statusOf(0, 0, metav1.ConditionTrue, cachev1alpha1.ReasonScalingUp)
	degraded.Conditions[2].Status = metav1.ConditionTrue
	generation2 := statusOf(1, 1, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut)
	generation2.ObservedGeneration = 2

	type step struct {
		at           time.Duration
		stored, next cachev1alpha1.MemcachedStatus
		wantHold     time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "settled is written at once", steps: []step{{0, scalingUp, done, 0}}},
		{name: "a problem is written at once", steps: []step{{0, empty, degraded, 0}}},
		{name: "a problem that clears is written at once", steps: []step{{0, degraded, scalingUp, 0}}},
		{name: "the first status waits for the window", steps: []step{
			{0, empty, scalingUp, coalesceWindow},
			{400 * time.Millisecond, empty, waiting, 600 * time.Millisecond},
			{coalesceWindow, empty, waiting, 0},
		}},
		{name: "a transition within the window coalesces into the settled status", steps: []step{
			{0, empty, scalingUp, coalesceWindow},
			{300 * time.Millisecond, empty, done, 0},
		}},
		{name: "an instance ready on the way is progress", steps: []step{
			{0, waiting, oneReady, progressInterval},
			{progressInterval, waiting, oneReady, 0},
		}},
		{name: "ready but not yet listed is progress, not settled", steps: []step{
			{0, waiting, readyNotListed, progressInterval},
			{2 * time.Second, waiting, readyNotListed, progressInterval - 2*time.Second},
			{3 * time.Second, waiting, done, 0},
		}},
		{name: "progress counters only wait for the progress interval", steps: []step{
			{0, scalingUp, waiting, progressInterval},
			{10 * time.Second, scalingUp, waiting, progressInterval - 10*time.Second},
			{progressInterval, scalingUp, waiting, 0},
		}},
		{name: "a lost instance after progress: due one window after it was seen", steps: []step{
			{0, oneReady, waiting, coalesceWindow},
			{coalesceWindow, oneReady, waiting, 0},
		}},
		{name: "an urgent change after progress: due one window after it was seen, not after the first", steps: []step{
			{0, scalingUp, oneReady, progressInterval},
			{5 * time.Second, scalingUp, generation2, coalesceWindow},
			{5*time.Second + coalesceWindow, scalingUp, generation2, 0},
		}},
		{name: "creation to Available: the first status, then the settled one", steps: []step{
			{0, empty, scalingUp, coalesceWindow},
			{coalesceWindow, empty, waiting, 0},
			{2 * time.Second, waiting, oneReady, progressInterval},
			{3 * time.Second, waiting, readyNotListed, progressInterval - time.Second},
			{4 * time.Second, waiting, done, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newStatusPacer()
			key := types.NamespacedName{Namespace: "ns", Name: "mc"}
			for i, s := range tt.steps {
				if got := p.hold(key, &s.stored, &s.next, t0.Add(s.at)); got != s.wantHold {
					t.Fatalf("step %d: hold = %v, want %v", i, got, s.wantHold)
				}
			}
		})
	}
}

func TestStatusPacerCaughtUpAndNil(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ns", Name: "mc"}
	stored, next := cachev1alpha1.MemcachedStatus{}, statusOf(0, 0, metav1.ConditionTrue, cachev1alpha1.ReasonScalingUp)
	p := newStatusPacer()
	p.hold(key, &stored, &next, t0)
	p.caughtUp(key)
	if got := p.hold(key, &stored, &next, t0.Add(5*time.Second)); got != coalesceWindow {
		t.Fatalf("after caughtUp the window starts again: hold = %v, want %v", got, coalesceWindow)
	}
	var none *statusPacer
	none.caughtUp(key)
	if got := none.hold(key, &stored, &next, t0); got != 0 {
		t.Fatalf("a nil pacer holds nothing back: %v", got)
	}
}

func TestUrgent(t *testing.T) {
	base := statusOf(1, 1, metav1.ConditionTrue, cachev1alpha1.ReasonWaitingForReadiness)
	tests := []struct {
		name   string
		change func(*cachev1alpha1.MemcachedStatus)
		want   bool
	}{
		{name: "identical", change: func(*cachev1alpha1.MemcachedStatus) {}},
		{name: "replicas only", change: func(s *cachev1alpha1.MemcachedStatus) { s.Replicas = 5 }},
		{name: "Progressing wording only", change: func(s *cachev1alpha1.MemcachedStatus) {
			s.Conditions[1].Reason, s.Conditions[1].Message = cachev1alpha1.ReasonScalingUp, "1 of 2 instances exist"
		}},
		{name: "conditions in another order", change: func(s *cachev1alpha1.MemcachedStatus) {
			s.Conditions[0], s.Conditions[2] = s.Conditions[2], s.Conditions[0]
		}},
		{name: "Available message (its count)", change: func(s *cachev1alpha1.MemcachedStatus) { s.Conditions[0].Message = "2" }},
		{name: "one more ready and listed", change: func(s *cachev1alpha1.MemcachedStatus) {
			s.ReadyReplicas, s.Servers = 2, append(s.Servers, "b:11211")
		}},
		{name: "Available before its servers are listed", change: func(s *cachev1alpha1.MemcachedStatus) {
			s.ReadyReplicas, s.Conditions[0].Status = 2, metav1.ConditionTrue
		}},
		{name: "Progressing settles before its servers are listed", change: func(s *cachev1alpha1.MemcachedStatus) {
			s.ReadyReplicas, s.Conditions[1].Status = 2, metav1.ConditionFalse
		}},
		{name: "Available with every server listed", change: func(s *cachev1alpha1.MemcachedStatus) {
			s.Conditions[0].Status = metav1.ConditionTrue
		}, want: true},
		{name: "an instance no longer ready", change: func(s *cachev1alpha1.MemcachedStatus) { s.ReadyReplicas = 0 }, want: true},
		{name: "a server gone", change: func(s *cachev1alpha1.MemcachedStatus) { s.Servers = nil }, want: true},
		{name: "a server replaced", change: func(s *cachev1alpha1.MemcachedStatus) { s.Servers = []string{"z:11211"} }, want: true},
		{name: "Progressing turns False with every server listed", change: func(s *cachev1alpha1.MemcachedStatus) {
			s.Conditions[1].Status = metav1.ConditionFalse
		}, want: true},
		{name: "Degraded", change: func(s *cachev1alpha1.MemcachedStatus) { s.Conditions[2].Status = metav1.ConditionTrue }, want: true},
		{name: "observed generation", change: func(s *cachev1alpha1.MemcachedStatus) { s.ObservedGeneration = 2 }, want: true},
		{name: "service", change: func(s *cachev1alpha1.MemcachedStatus) { s.ServiceName = "x" }, want: true},
		{name: "selector", change: func(s *cachev1alpha1.MemcachedStatus) { s.Selector = "app=x" }, want: true},
		{name: "TLS", change: func(s *cachev1alpha1.MemcachedStatus) { s.TLS = ptr.To(true) }, want: true},
		{name: "auth", change: func(s *cachev1alpha1.MemcachedStatus) { s.Auth = nil }, want: true},
		{name: "a condition missing", change: func(s *cachev1alpha1.MemcachedStatus) { s.Conditions = s.Conditions[:2] }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := *base.DeepCopy()
			tt.change(&other)
			if got := urgent(&base, &other); got != tt.want {
				t.Fatalf("urgent = %v, want %v", got, tt.want)
			}
		})
	}
}
