package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// freeAddr is a loopback address nobody listens on (the health server
// listens there right after; the test's own listener is closed first).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	_ = l.Close()
	return a
}

// TestHealthServerFailsOnPurpose: what the README tells a newcomer to run
// to make the probe sample fail (POST /fail/<probe>) makes exactly that
// probe fail, and /heal/<probe> heals it.
func TestHealthServerFailsOnPurpose(t *testing.T) {
	addrs := healthAddrs{http: freeAddr(t), tcp: freeAddr(t), grpc: freeAddr(t)}
	h, err := startHealthServer(addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	conn, err := grpc.NewClient(addrs.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	probe := map[string]func() bool{
		"http": func() bool {
			resp, err := http.Get("http://" + addrs.http + "/healthz")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		},
		"tcp": func() bool {
			c, err := net.DialTimeout("tcp", addrs.tcp, time.Second)
			if err == nil {
				_ = c.Close()
			}
			return err == nil
		},
		"grpc": func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			return err == nil && r.Status == healthpb.HealthCheckResponse_SERVING
		},
	}
	post := func(path string, want int) {
		t.Helper()
		resp, err := http.Post("http://"+addrs.http+path, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	healthy := func(want map[string]bool) {
		t.Helper()
		for p, ok := range want {
			if got := probe[p](); got != ok {
				t.Errorf("%s probe healthy=%v, want %v", p, got, ok)
			}
		}
	}
	healthy(map[string]bool{"http": true, "tcp": true, "grpc": true})
	for _, p := range probeNames {
		post("/fail/"+p, http.StatusOK)
		want := map[string]bool{"http": true, "tcp": true, "grpc": true}
		want[p] = false
		healthy(want)
		post("/heal/"+p, http.StatusOK)
		healthy(map[string]bool{"http": true, "tcp": true, "grpc": true})
	}
	post("/fail/dns", http.StatusNotFound)
	resp, err := http.Get("http://" + addrs.http + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var b strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	if !strings.Contains(b.String(), "http  healthy") {
		t.Errorf("GET / describes the probes: %q", b.String())
	}
}
