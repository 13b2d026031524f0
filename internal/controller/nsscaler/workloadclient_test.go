package nsscaler

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestWriterRateLimit(t *testing.T) {
	base := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 50, Burst: 100}
	cases := []struct {
		name        string
		qps         float64
		wantLimiter bool
		wantQPS     float32
	}{
		{"default: no token bucket, the write concurrency bounds the writes", 0, false, 0},
		{"--nsscaler-write-qps=20", 20, true, 20},
		{"below one per second", 0.5, true, 0.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writerRateLimit(rest.CopyConfig(base), tc.qps)
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rl := cs.AppsV1().RESTClient().GetRateLimiter()
			if (rl != nil) != tc.wantLimiter {
				t.Fatalf("rate limiter %v, want one: %v", rl, tc.wantLimiter)
			}
			if rl != nil && rl.QPS() != tc.wantQPS {
				t.Fatalf("QPS %v, want %v", rl.QPS(), tc.wantQPS)
			}
		})
	}
}
