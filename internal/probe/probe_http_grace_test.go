package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestAnswerGrace(t *testing.T) {
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{0, 0},
		{-time.Second, 0},
		{time.Second, time.Second},
		{maxAnswerGrace, maxAnswerGrace},
		{30 * time.Second, maxAnswerGrace},
	} {
		if got := answerGrace(tc.timeout); got != tc.want {
			t.Errorf("answerGrace(%s) = %s, want %s", tc.timeout, got, tc.want)
		}
	}
}

// slowServer answers each request only when the test says so, and counts
// connections and requests whose context ended before an answer.
type slowServer struct {
	srv       *httptest.Server
	conns     atomic.Int64
	abandoned atomic.Int64
	arrived   chan struct{}
	// answer lets one held request answer; closed, it lets all.
	answer chan struct{}
	gone   chan struct{}
}

func newSlowServer(t *testing.T) *slowServer {
	s := &slowServer{arrived: make(chan struct{}, 16), answer: make(chan struct{}), gone: make(chan struct{}, 16)}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.arrived <- struct{}{}
		select {
		case <-s.answer:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
			s.abandoned.Add(1)
			s.gone <- struct{}{}
		}
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	t.Cleanup(func() {
		select {
		case <-s.answer:
		default:
			close(s.answer)
		}
	})
	return s
}

// A probe reports a timeout at its deadline whatever the request does
// after it; the request runs on for the grace, and the connection of an
// answer that comes within it serves the next probe instead of a new dial.
// An answer that never comes ends the request at the grace.
func TestHTTPProbeTimeoutKeepsConnectionForALateAnswer(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, tc := range []struct {
		name string
		// answerLate: the server answers after the probe's deadline
		// (within the grace); otherwise it never answers.
		answerLate bool
		wantConns  int64
		abandoned  int64
	}{
		{name: "late answer within the grace", answerLate: true, wantConns: 1, abandoned: 0},
		{name: "no answer", answerLate: false, wantConns: 2, abandoned: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlowServer(t)
			host, port := splitHostPort(t, s.srv.Listener.Addr().String())
			f := testProbers(t, nil, Settings{}, s.srv.Listener.Addr().String())
			p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: httpTrigger(host, port, "/")})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			hp := p.(*httpProber)
			ended := make(chan struct{}, 1)
			hp.answered = func() { ended <- struct{}{} }

			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			o := p.Probe(ctx)
			if o.Result != fail || !strings.HasSuffix(o.Message, ": timed out") {
				t.Fatalf("probe past its deadline: %+v, want a Failure that timed out", o)
			}
			if took := time.Since(start); took >= timeout+answerGrace(timeout) {
				t.Fatalf("the probe took %s: it waited for the grace (%s) instead of its timeout", took, answerGrace(timeout))
			}
			<-s.arrived
			if tc.answerLate {
				s.answer <- struct{}{}
			} else {
				<-s.gone // the request's own deadline ended it
			}
			<-ended
			close(s.answer)
			// The next probe: the late answer's connection, or a new one.
			if o := p.Probe(context.Background()); o.Result != ok {
				t.Fatalf("next probe: %+v", o)
			}
			if got := s.conns.Load(); got != tc.wantConns {
				t.Errorf("%d connections, want %d", got, tc.wantConns)
			}
			if got := s.abandoned.Load(); got != tc.abandoned {
				t.Errorf("%d requests abandoned, want %d", got, tc.abandoned)
			}
		})
	}
}

// A worker that stops ends its probe's request at once: no grace for a
// connection nothing will probe on.
func TestHTTPProbeStoppedWorkerEndsItsRequest(t *testing.T) {
	s := newSlowServer(t)
	host, port := splitHostPort(t, s.srv.Listener.Addr().String())
	f := testProbers(t, nil, Settings{}, s.srv.Listener.Addr().String())
	p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: httpTrigger(host, port, "/")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A timeout whose grace (5 s) would outlast the test's patience below.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	result := make(chan Observation, 1)
	go func() { result <- p.Probe(ctx) }()
	<-s.arrived
	cancel()
	<-result
	select {
	case <-s.gone:
	case <-time.After(answerGrace(30*time.Second) / 2):
		t.Fatal("the request of a stopped worker ran on into its grace")
	}
}
