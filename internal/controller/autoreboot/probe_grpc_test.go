package autoreboot

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
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

	f := newProbers(ProbeSettings{}, nil, clock.RealClock{})
	probe := func(service *string, port int) observation {
		p, err := f.newProber(workerSpec{Trigger: autorebootv1alpha1.Trigger{ProbeHost: "127.0.0.1",
			Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port), Service: service}}}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		return p.probe(context.Background())
	}
	if o := probe(nil, port); o.result != ok {
		t.Errorf("serving: %+v", o)
	}
	if o := probe(ptr.To("db"), port); o.result != fail || o.message == "" {
		t.Errorf("not serving: %+v", o)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	_ = closed.Close()
	if o := probe(nil, closedPort); o.result != fail {
		t.Errorf("closed port: %+v", o)
	}
}
