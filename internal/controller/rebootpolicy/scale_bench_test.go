package rebootpolicy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

// BenchmarkHTTPProbeWorkers runs BENCH_PROBES (default 10,000) httpGet
// workers at a 1 s period in process against a local server for
// BENCH_SECONDS (default 10), for profiling the per-probe cost with
// -cpuprofile and -memprofile (the server's share shows as net/http's
// (*conn).serve).
func BenchmarkHTTPProbeWorkers(b *testing.B) {
	n := envInt(b, "BENCH_PROBES", 10000)
	secs := envInt(b, "BENCH_SECONDS", 10)
	var served atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	// Connections the probes opened: about one per namespace when
	// keep-alive works, one per probe in the storm of a saturated run.
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	host, port := splitHostPort(b, srv.Listener.Addr().String())
	f := testProbers(b, nil, probe.Settings{}, srv.Listener.Addr().String())
	for range b.N {
		m := NewMetrics()
		w := probe.NewWorkers(clock.RealClock{}, f, m, logr.Discard())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Start(ctx) }()
		go func() {
			// The controller's part: take the transitions.
			for {
				select {
				case <-w.Events():
				case <-ctx.Done():
					return
				}
			}
		}()
		for i := range n {
			tr := httpTrigger(host, port, fmt.Sprintf("/p/%d", i))
			tr.Probe.PeriodSeconds = 1
			// 100 probes per namespace, the default --probe-max-per-namespace.
			key := probe.WorkerKey{Object: nsName(fmt.Sprintf("ns-%d", i/100), fmt.Sprintf("rbp-%d", i)), Policy: "http"}
			w.Ensure(key.Object, []probe.WorkerSpec{{Key: key, Hash: "h", Trigger: tr}})
		}
		time.Sleep(2 * time.Second) // past the start jitter
		before, t0, cpu0 := served.Load(), time.Now(), processCPU(b)
		time.Sleep(time.Duration(secs) * time.Second) // the measured window
		window := time.Since(t0).Seconds()
		b.ReportMetric(float64(served.Load()-before)/window, "req/s")
		b.ReportMetric(float64(conns.Load()), "conns")
		b.ReportMetric((processCPU(b)-cpu0).Seconds()/window, "cores")
		for _, r := range []string{autorebootv1alpha1.ResultSuccess, autorebootv1alpha1.ResultFailure, autorebootv1alpha1.ResultError} {
			var d dto.Metric
			_ = m.probeResults.WithLabelValues(probe.TypeHTTP, r).Write(&d)
			b.ReportMetric(d.GetCounter().GetValue(), r)
		}
		cancel()
		<-done
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s=%q", name, v)
	}
	return n
}

// processCPU is the user and system CPU time of this process (probers and
// server alike).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
