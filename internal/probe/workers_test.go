package probe_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
	"github.com/runbook-dev/runbook/internal/probe/probetest"
)

const (
	ok   = autorebootv1alpha1.ResultSuccess
	fail = autorebootv1alpha1.ResultFailure
)

func probeSpec(obj types.NamespacedName, policy string, failureThreshold int32, hash string) probe.WorkerSpec {
	return probe.WorkerSpec{
		Key:  probe.WorkerKey{Object: obj, Policy: policy},
		Hash: hash,
		Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(1)}},
			PeriodSeconds:    1,
			FailureThreshold: failureThreshold,
		}},
	}
}

func startWorkers(t *testing.T, f probe.Factory) (*probe.Workers, *clocktesting.FakeClock) {
	t.Helper()
	return probetest.StartWorkers(t, f, probetest.DiscardMetrics{})
}

func TestWorkersLifecycle(t *testing.T) {
	f := probetest.NewProbers()
	w, _ := startWorkers(t, f)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}

	w.Ensure(a, []probe.WorkerSpec{probeSpec(a, "p1", 3, "h1"), probeSpec(a, "p2", 3, "h2")})
	w.Ensure(b, []probe.WorkerSpec{probeSpec(b, "p1", 3, "h1")})
	if got := w.Len(); got != 3 {
		t.Fatalf("workers = %d (%v), want 3", got, w.Keys())
	}
	probetest.WaitFor(t, "probers created", func() bool { c, _ := f.Counts("p2"); return c == 1 })

	// Same spec again: nothing restarts.
	w.Ensure(a, []probe.WorkerSpec{probeSpec(a, "p1", 3, "h1"), probeSpec(a, "p2", 3, "h2")})
	if c, cl := f.Counts("p2"); c != 1 || cl != 0 {
		t.Fatalf("unchanged spec restarted p2: created %d closed %d", c, cl)
	}
	// Only p2 of a changes: only it restarts.
	w.Ensure(a, []probe.WorkerSpec{probeSpec(a, "p1", 3, "h1"), probeSpec(a, "p2", 3, "h2-new")})
	probetest.WaitFor(t, "p2 restarted", func() bool { c, cl := f.Counts("p2"); return c == 2 && cl == 1 })
	want := []string{"ns/a/p1@h1", "ns/a/p2@h2-new", "ns/b/p1@h1"}
	if got := w.Keys(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	// A policy removed from the spec stops.
	w.Ensure(a, []probe.WorkerSpec{probeSpec(a, "p2", 3, "h2-new")})
	if got := w.Keys(); len(got) != 2 {
		t.Fatalf("keys after removing p1 of a = %v", got)
	}
	// Deleting a stops its workers and leaves b alone.
	w.Remove(a)
	if got := w.Keys(); len(got) != 1 || got[0] != "ns/b/p1@h1" {
		t.Fatalf("keys after removing a = %v", got)
	}
	probetest.WaitFor(t, "a's probers closed", func() bool { _, cl := f.Counts("p2"); return cl == 2 })
}

func TestWorkersDeclaredBeforeStartRunWhenLeading(t *testing.T) {
	f := probetest.NewProbers()
	fc := clocktesting.NewFakeClock(time.Now())
	w := probe.NewWorkers(fc, f, probetest.DiscardMetrics{}, logr.Discard())
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []probe.WorkerSpec{probeSpec(obj, "early", 3, "h")})
	if c, _ := f.Counts("early"); c != 0 {
		t.Fatal("a worker started before the manager started the runnable (not leader)")
	}
	if !w.NeedLeaderElection() {
		t.Fatal("workers must run only in the leader")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Start(ctx); close(done) }()
	probetest.WaitFor(t, "worker started", func() bool { c, _ := f.Counts("early"); return c == 1 })
	cancel()
	<-done
	if _, cl := f.Counts("early"); cl != 1 {
		t.Fatal("worker not stopped when the manager stopped")
	}
}

func TestWorkerPublishesOnlyTransitions(t *testing.T) {
	f := probetest.NewProbers()
	w, fc := startWorkers(t, f)
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []probe.WorkerSpec{probeSpec(obj, "steady", 3, "h")})
	for range 50 {
		probetest.Tick(t, fc, w, obj, "steady")
	}
	events := len(w.Events())
	if events != 1 {
		t.Fatalf("50 successful probes produced %d notifications, want 1", events)
	}
	v := w.Snapshot(obj)["steady"]
	if v.State.LastResult != ok || v.Unacked {
		t.Fatalf("state = %+v", v)
	}
}

func TestWorkerFiresAtThresholdAndAck(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("p", ok, fail, fail, fail, fail)
	w, fc := startWorkers(t, f)
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []probe.WorkerSpec{probeSpec(obj, "p", 3, "h")})
	for range 3 {
		probetest.Tick(t, fc, w, obj, "p")
	}
	if v := w.Snapshot(obj)["p"]; v.State.FireSeq != 0 || v.State.LastResult != fail || v.State.ConsecutiveFailures != 1 {
		t.Fatalf("after 2 failures: %+v", v)
	}
	probetest.Tick(t, fc, w, obj, "p")
	v := w.Snapshot(obj)["p"]
	if v.State.FireSeq != 1 || !v.Unacked || v.State.ConsecutiveFailures != 3 {
		t.Fatalf("after 3 failures: %+v", v)
	}
	if !v.State.FiredAt.Equal(fc.Now()) {
		t.Fatalf("fired at %v, want the injected clock's %v", v.State.FiredAt, fc.Now())
	}
	w.Ack(obj, "p", "other-hash", 1)
	if !w.Snapshot(obj)["p"].Unacked {
		t.Fatal("an ack for another spec hash was applied")
	}
	w.Ack(obj, "p", "h", 1)
	if w.Snapshot(obj)["p"].Unacked {
		t.Fatal("ack not applied")
	}
	// One more failure: below the threshold again, no new fire.
	probetest.Tick(t, fc, w, obj, "p")
	if v := w.Snapshot(obj)["p"]; v.State.FireSeq != 1 || v.Unacked {
		t.Fatalf("fired again after one failure: %+v", v)
	}
}

// A probe that keeps failing while its restart is due does not fire (and
// notify the controller) on every period: the fires would merge into that
// restart. Once status says the restart is done, the next failure fires.
func TestWorkerMergesFiresWhileTheRestartIsDue(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("p", fail)
	w, fc := startWorkers(t, f)
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []probe.WorkerSpec{probeSpec(obj, "p", 1, "h")})
	expect := func(step string, seq uint64, notifications int) {
		t.Helper()
		if v := w.Snapshot(obj)["p"]; v.State.FireSeq != seq {
			t.Fatalf("%s: fire seq %d, want %d", step, v.State.FireSeq, seq)
		}
		if n := len(w.Events()); n != notifications {
			t.Fatalf("%s: %d notifications, want %d", step, n, notifications)
		}
		for range notifications {
			<-w.Events()
		}
	}
	probetest.Tick(t, fc, w, obj, "p")
	expect("first failure", 1, 1)
	for range 3 {
		probetest.Tick(t, fc, w, obj, "p")
	}
	expect("failures before the fire is in status", 1, 0)
	w.Ack(obj, "p", "h", 1)
	w.MarkPending(obj, "p", true)
	for range 3 {
		probetest.Tick(t, fc, w, obj, "p")
	}
	expect("failures while status holds the restart pending", 1, 0)
	w.MarkPending(obj, "p", false)
	probetest.Tick(t, fc, w, obj, "p")
	expect("first failure after the restart", 2, 1)
	w.MarkPending(obj, "other", true) // an unknown policy is ignored
}

func TestStartWithAnEndedContextLaunchesNothing(t *testing.T) {
	w := probe.NewWorkers(clocktesting.NewFakeClock(time.Now()), probetest.NewProbers(), probetest.DiscardMetrics{}, logr.Discard())
	obj := types.NamespacedName{Namespace: "ns", Name: "a"}
	w.Ensure(obj, []probe.WorkerSpec{probeSpec(obj, "p", 1, "h")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Len() != 1 {
		t.Fatalf("%d workers declared, want 1 (declared, never launched)", w.Len())
	}
}

// The workers of one RebootPolicy probe at their phases of the period:
// the second declared half a period after the first.
func TestWorkersProbeAtTheirPhase(t *testing.T) {
	f := probetest.NewProbers()
	w, fc := startWorkers(t, f)
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []probe.WorkerSpec{probeSpec(obj, "first", 3, "h"), probeSpec(obj, "second", 3, "h")})
	probetest.WaitFor(t, "both timers set", func() bool { return fc.Waiters() == 2 })
	steps := []struct {
		step          time.Duration
		first, second int64
	}{
		{499 * time.Millisecond, 0, 0},
		{time.Millisecond, 0, 1},
		{500 * time.Millisecond, 1, 1},
		{500 * time.Millisecond, 1, 2},
		{500 * time.Millisecond, 2, 2},
	}
	for i, s := range steps {
		want := map[string]int64{"first": s.first, "second": s.second}
		fc.Step(s.step)
		for policy, n := range want {
			probetest.WaitFor(t, policy+" probed and published", func() bool {
				return f.Calls(policy).Load() == n && w.Snapshot(obj)[policy].Observed == uint64(n)
			})
		}
		// The workers are back on their timers before the next step.
		probetest.WaitFor(t, "both timers set", func() bool { return fc.Waiters() == 2 })
		for policy, n := range want {
			if got := f.Calls(policy).Load(); got != n {
				t.Fatalf("step %d: %s probed %d times, want %d", i, policy, got, n)
			}
		}
	}
}
