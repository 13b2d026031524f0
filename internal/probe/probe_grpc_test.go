package probe

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	port := l.Addr().(*net.TCPAddr).Port

	closedPort := closedPort(t)
	f := testProbers(t, nil, Settings{}, l.Addr().String(), "127.0.0.1:"+strconv.Itoa(closedPort))
	probe := func(service *string, port int) Observation {
		p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: autorebootv1alpha1.Trigger{ProbeHost: "127.0.0.1",
			Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port), Service: service}}}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		return p.Probe(context.Background())
	}
	if o := probe(nil, port); o.Result != ok {
		t.Errorf("serving: %+v", o)
	}
	if o := probe(ptr.To("db"), port); o.Result != fail || o.Message == "" {
		t.Errorf("not serving: %+v", o)
	}
	if o := probe(nil, closedPort); o.Result != fail || o.Message != "grpc 127.0.0.1:"+strconv.Itoa(closedPort)+": connection failed" {
		t.Errorf("closed port: %+v", o)
	}
}

// A health server answering with a huge message must not make the manager
// buffer it.
func TestGRPCResponseIsBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hugeHealth{})
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	f := testProbers(t, nil, Settings{}, l.Addr().String())
	p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: autorebootv1alpha1.Trigger{ProbeHost: "127.0.0.1",
		Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(l.Addr().(*net.TCPAddr).Port)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if o := p.Probe(context.Background()); o.Result != fail || strings.Contains(o.Message, "xxxx") {
		t.Fatalf("huge health response: %+v", o)
	}
}

type hugeHealth struct {
	healthpb.UnimplementedHealthServer
}

func (hugeHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	// An unknown field of 1 MiB: a valid message far beyond the bound.
	var resp healthpb.HealthCheckResponse
	resp.ProtoReflect().SetUnknown(append([]byte{0xfa, 0x01, 0x80, 0x80, 0x40}, []byte(strings.Repeat("x", 1<<20))...))
	return &resp, nil
}
