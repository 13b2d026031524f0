package main

import (
	"context"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
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

// TestProbeSampleFollowsMovedHealthServer: when another demo holds the
// sample's ports, the probe sample the demo applies names the ports this
// demo's health server listens on, and nothing else in the stream changes.
func TestProbeSampleFollowsMovedHealthServer(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "autoreboot_v1alpha1_rebootpolicy_probe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	other := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\ndata:\n  port: \"18080\"\n"
	stream := []byte(other + "---\n" + string(sample))
	for _, want := range []string{"port: 18080", "port: 18081", "port: 18082"} {
		if !strings.Contains(string(sample), want) {
			t.Fatalf("positive control: the probe sample lacks %q", want)
		}
	}

	same, err := moveProbePorts(stream, demoHealthAddrs, demoHealthAddrs)
	if err != nil || string(same) != string(stream) {
		t.Fatalf("with the sample's own ports the stream must stay as it is (err %v)", err)
	}

	moved := healthAddrs{http: "127.0.0.1:40001", tcp: "127.0.0.1:40002", grpc: "127.0.0.1:40003"}
	out, err := moveProbePorts(stream, demoHealthAddrs, moved)
	if err != nil {
		t.Fatal(err)
	}
	var policy autorebootv1alpha1.RebootPolicy
	docs := strings.Split(string(out), "---\n")
	if len(docs) != 3 || docs[1] != other {
		t.Fatalf("want the ConfigMap unchanged and the policy after it, got:\n%s", out)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &policy); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, p := range policy.Spec.Policies {
		switch pr := p.Trigger.Probe; {
		case pr.HTTPGet != nil:
			got[p.Name] = pr.HTTPGet.Port.IntValue()
		case pr.TCPSocket != nil:
			got[p.Name] = pr.TCPSocket.Port.IntValue()
		case pr.GRPC != nil:
			got[p.Name] = int(pr.GRPC.Port)
		}
	}
	want := map[string]int{"upstream-http": 40001, "cache-tcp": 40002, "backend-grpc": 40003}
	if !maps.Equal(got, want) {
		t.Errorf("probe ports %v, want %v", got, want)
	}
	if policy.Name != "nginx-on-health" || policy.Spec.Target.Name != "nginx" || policy.Spec.Policies[0].Trigger.Probe.HTTPGet.Path != "/healthz" {
		t.Errorf("the rest of the policy changed: %+v", policy)
	}
}

// TestDemoHealthServerMovesWhenTaken: with the probe sample's HTTP port
// taken (here by the test; on a shared machine maybe by another demo), the
// demo's health server listens on free ports, says it moved, and answers
// there, instead of failing the demo.
func TestDemoHealthServerMovesWhenTaken(t *testing.T) {
	if l, err := net.Listen("tcp", healthHTTPAddr); err == nil {
		defer func() { _ = l.Close() }()
	} // else: someone else holds it, which is the case under test too
	h, moved, err := startDemoHealthServer()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !moved || h.addrs.http == healthHTTPAddr || h.addrs.tcp == healthTCPAddr || h.addrs.grpc == healthGRPCAddr {
		t.Fatalf("moved=%v addrs=%+v: want all three on free ports", moved, h.addrs)
	}
	resp, err := http.Get("http://" + h.addrs.http + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz on the moved address: %s", resp.Status)
	}
}
