package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// ProbeWithin reports a timeout at the probe's deadline, from its timer,
// while the request waits out the grace on the caller's goroutine: the
// caller gets the report first, ProbeWithin returns only once the late
// answer is in, and the next probe reuses that answer's connection.
func TestHTTPProbeWithinReportsAtTheDeadlineAndReturnsWithTheAnswer(t *testing.T) {
	const timeout = time.Second
	s := newSlowServer(t)
	host, port := splitHostPort(t, s.srv.Listener.Addr().String())
	f := testProbers(t, nil, Settings{}, s.srv.Listener.Addr().String())
	p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: httpTrigger(host, port, "/")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dp := p.(DeadlineProber)

	var mu sync.Mutex
	var order []string
	note := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, what)
	}
	reports := make(chan Observation, 2)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		dp.ProbeWithin(context.Background(), timeout, func(o Observation) {
			note("report")
			reports <- o
		})
		note("return")
	}()
	<-s.arrived
	o := <-reports
	if o.Result != fail || !strings.HasSuffix(o.Message, ": timed out") {
		t.Fatalf("report of a probe whose answer is late: %+v, want a Failure that timed out", o)
	}
	// The late answer, within the grace.
	note("answer")
	s.answer <- struct{}{}
	<-returned
	mu.Lock()
	got := strings.Join(order, ",")
	mu.Unlock()
	if got != "report,answer,return" {
		t.Errorf("order %s, want report,answer,return: the report waits for nothing, the return for the answer", got)
	}
	if len(reports) != 0 {
		t.Errorf("a second report: %+v", <-reports)
	}

	close(s.answer)
	var next Observation
	dp.ProbeWithin(context.Background(), timeout, func(o Observation) { next = o })
	if next.Result != ok {
		t.Fatalf("next probe: %+v", next)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1: the late answer's connection serves the next probe", n)
	}
}

// A worker whose target answers later than the probe's timeout has one
// request at a time: its next probe waits for the late one (answered or
// given up at the end of its grace) rather than going out beside it on a
// second connection. With a 2 s timeout the grace ends 4 s after the
// probe started, past the next period (3 s).
func TestHTTPWorkerHasOneRequestAtATime(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	ended := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-r.Context().Done() // never answers: the request ends at its grace
		mu.Lock()
		inFlight--
		mu.Unlock()
		ended <- struct{}{}
	}))
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	w := NewWorkers(clock.RealClock{}, testProbers(t, nil, Settings{}, srv.Listener.Addr().String()), discardMetrics{}, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Start(ctx)
	}()
	defer func() { cancel(); <-done }()
	go func() {
		for range w.Events() {
		}
	}()

	obj := nsName("app", "rbp")
	tr := httpTrigger(host, port, "/")
	tr.Probe.PeriodSeconds, tr.Probe.TimeoutSeconds, tr.Probe.FailureThreshold = 3, 2, 1
	w.Ensure(obj, []WorkerSpec{{Key: WorkerKey{Object: obj, Policy: "p"}, Hash: "h", Trigger: tr}})

	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the first request did not end within 30s")
	}
	mu.Lock()
	m := most
	mu.Unlock()
	if m != 1 {
		t.Fatalf("%d requests of one worker at once, want 1", m)
	}
	if v := w.Snapshot(obj)["p"]; v.State.LastResult != fail || v.Observed == 0 {
		t.Errorf("worker state %+v, want the timeout reported (at its deadline, before the grace ended)", v)
	}
}
