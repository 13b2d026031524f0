package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestClientMetricsShowTheRateLimit: a client held back by its own QPS
// limit shows the wait in rest_client_rate_limiter_duration_seconds, apart
// from the requests' own duration.
func TestClientMetricsShowTheRateLimit(t *testing.T) {
	registerClientMetrics()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`))
	}))
	defer srv.Close()
	// 20 requests a second, no burst: the 2nd to 4th request wait ~50 ms each.
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 20, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := histogram(t, "rest_client_rate_limiter_duration_seconds")
	beforeReq := histogram(t, "rest_client_request_duration_seconds")
	for range 4 {
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "a", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waits := histogram(t, "rest_client_rate_limiter_duration_seconds")
	if n := waits.count - before.count; n != 4 {
		t.Errorf("rate limiter observations = %d, want 4 (one per request)", n)
	}
	// Three waits of ~50 ms each; a limiter that was not consulted adds ~0.
	if w := waits.sum - before.sum; w < 0.1 {
		t.Errorf("rate limiter waited %.3fs in all, want >= 0.1s (3 requests at 20/s)", w)
	}
	if n := histogram(t, "rest_client_request_duration_seconds").count - beforeReq.count; n != 4 {
		t.Errorf("request duration observations = %d, want 4", n)
	}
}

type histo struct {
	count uint64
	sum   float64
}

// histogram adds up every series of a histogram in the manager's registry.
func histogram(t *testing.T, name string) histo {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var h histo
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		if f.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("%s is a %s, want a histogram", name, f.GetType())
		}
		for _, m := range f.GetMetric() {
			h.count += m.GetHistogram().GetSampleCount()
			h.sum += m.GetHistogram().GetSampleSum()
		}
	}
	return h
}
