package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkHTTPProbe is one httpGet probe after another on a kept-alive
// connection to a local server, as a worker runs them: the CPU and the
// allocations of a probe (the server's share included in ns/op).
func BenchmarkHTTPProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	host, port := splitHostPort(b, srv.Listener.Addr().String())
	f := testProbers(b, nil, Settings{}, srv.Listener.Addr().String())
	p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: httpTrigger(host, port, "/")})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	dp := p.(DeadlineProber)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var o Observation
		dp.ProbeWithin(ctx, time.Second, func(r Observation) { o = r })
		if o.Result != ok {
			b.Fatalf("probe: %+v", o)
		}
	}
}
