package memcached

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

func readyPod(name, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{instanceLabel: "mc"}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func deploymentReady(n int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mc", Labels: map[string]string{instanceLabel: "mc"}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: n}}
}

func sliceOf(addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "mc-x", Labels: map[string]string{discoveryv1.LabelServiceName: "mc"}}}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func memcachedWith(ready int32, servers ...string) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "mc"},
		Status: cachev1alpha1.MemcachedStatus{ReadyReplicas: ready, Servers: servers}}
}

// Two pods turn ready; the times are split at the inputs the controller
// reads, and a status that lists a pod before the count says so does not
// count as true.
func TestTruthMeasuresEachReadinessChange(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := newTruth()
	tr.memcached(memcachedWith(0), at(0))
	tr.pod(readyPod("a", "10.0.0.1"), at(100))
	tr.deployment(deploymentReady(1), at(300))
	tr.slice(sliceOf("10.0.0.1"), at(400)) // inputs of a: 400
	tr.memcached(memcachedWith(1, "10.0.0.1:11211"), at(450))
	tr.pod(readyPod("b", "10.0.0.2"), at(1000))
	tr.slice(sliceOf("10.0.0.1", "10.0.0.2"), at(1100))
	tr.memcached(memcachedWith(1, "10.0.0.1:11211", "10.0.0.2:11211"), at(1150)) // count still 1: not b's truth
	tr.deployment(deploymentReady(2), at(1200))                                  // inputs of b: 1200
	tr.memcached(memcachedWith(2, "10.0.0.1:11211", "10.0.0.2:11211"), at(1900))
	tr.memcached(memcachedWith(2, "10.0.0.1:11211", "10.0.0.2:11211"), at(2500)) // the same status again

	rep := tr.report()
	if rep.changes != 2 || rep.unreflected != 0 {
		t.Fatalf("changes %d unreflected %d, want 2 and 0", rep.changes, rep.unreflected)
	}
	want := []struct{ e2e, kcm, runbook time.Duration }{
		{350 * time.Millisecond, 300 * time.Millisecond, 50 * time.Millisecond},
		{900 * time.Millisecond, 200 * time.Millisecond, 700 * time.Millisecond},
	}
	for i, w := range want {
		if rep.endToEnd[i] != w.e2e || rep.kcm[i] != w.kcm || rep.runbook[i] != w.runbook {
			t.Errorf("change %d: end-to-end %s kcm %s runbook %s, want %s %s %s", i, rep.endToEnd[i], rep.kcm[i], rep.runbook[i], w.e2e, w.kcm, w.runbook)
		}
	}
	if got := tr.changedStatuses()["mc"]; got != 3 {
		t.Errorf("%d status changes, want 3", got)
	}

	write := func(code int) benchkit.AuditEvent {
		var e benchkit.AuditEvent
		raw := fmt.Sprintf(`{"verb":"patch","objectRef":{"resource":"memcacheds","subresource":"status","namespace":"ns","name":"mc"},"responseStatus":{"code":%d}}`, code)
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	writes := []benchkit.AuditEvent{write(200), write(200), write(409), write(200)}
	if noop, accepted := noopStatusWrites(writes, "ns", tr.changedStatuses()); noop != 0 || accepted != 3 {
		t.Errorf("noop %d accepted %d, want 0 and 3", noop, accepted)
	}
	writes = append(writes, write(200))
	if noop, _ := noopStatusWrites(writes, "ns", tr.changedStatuses()); noop != 1 {
		t.Errorf("a fourth accepted write for three changes: noop %d, want 1", noop)
	}
}

// A pod that never reaches status is counted as such.
func TestTruthCountsUnreflectedChanges(t *testing.T) {
	tr := newTruth()
	now := time.Now()
	tr.pod(readyPod("a", "10.0.0.1"), now)
	tr.deployment(deploymentReady(1), now)
	tr.slice(sliceOf("10.0.0.1"), now)
	if rep := tr.report(); rep.changes != 1 || rep.unreflected != 1 {
		t.Fatalf("changes %d unreflected %d, want 1 and 1", rep.changes, rep.unreflected)
	}
}
