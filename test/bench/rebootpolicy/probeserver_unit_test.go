package rebootpolicy

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// The benchmark's server answers like an HTTP/1.1 server on a kept-alive
// connection, fails paths on demand and measures intervals between
// arrivals.
func TestProbeServer(t *testing.T) {
	s := newProbeServer(3)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.serve(l)
	defer s.close()
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	get := func(path string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s%s", l.Addr(), path), nil)
		req.Header.Set("X-Probe", "yes")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	from := time.Now()
	for _, tc := range []struct {
		path string
		want int
	}{{"/p/0", 200}, {"/p/1", 200}, {"/p/3", 404}, {"/x", 404}, {"/p/-1", 404}} {
		if got := get(tc.path); got != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, got, tc.want)
		}
	}
	s.failing[1].Store(true)
	if got := get("/p/1"); got != http.StatusServiceUnavailable {
		t.Errorf("failing path: %d", got)
	}
	if got := s.conns.Load(); got != 1 {
		t.Errorf("%d connections, want 1 kept alive", got)
	}
	// Two arrivals of /p/1 a moment apart: one interval, about a period
	// off.
	d := s.drifts(from, time.Now())
	if len(d) != 1 || d[0] > period || d[0] < period-time.Second/2 {
		t.Errorf("drifts %v, want one of almost %s", d, period)
	}
}
