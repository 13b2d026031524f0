package autoreboot

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func TestIsLinkLocal(t *testing.T) {
	for addr, want := range map[string]bool{
		"169.254.169.254": true, "169.254.0.1": true, "fe80::1": true, "::ffff:169.254.169.254": true,
		"127.0.0.1": false, "10.0.0.1": false, "::1": false, "fd00::1": false, "8.8.8.8": false,
	} {
		if got := isLinkLocal(netip.MustParseAddr(addr)); got != want {
			t.Errorf("isLinkLocal(%s) = %v, want %v", addr, got, want)
		}
	}
}

func httpTrigger(host string, port int, path string) autorebootv1alpha1.Trigger {
	return autorebootv1alpha1.Trigger{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Host: host, Port: intstr.FromInt(port), Path: path}}}}
}

func TestLinkLocalProbesRefused(t *testing.T) {
	f := newProbers(ProbeSettings{}, nil, clock.RealClock{})
	for _, tr := range []autorebootv1alpha1.Trigger{
		httpTrigger("169.254.169.254", 80, "/latest/meta-data"),
		{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "169.254.169.254", Port: intstr.FromInt(80)}}}},
		{ProbeHost: "fe80::1", Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}}},
		{ProbeHost: "169.254.1.1", Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 80}}}},
	} {
		p, err := f.newProber(workerSpec{Trigger: tr})
		if err != nil {
			t.Fatal(err)
		}
		o := p.probe(context.Background())
		if o.result != errR || o.reason != autorebootv1alpha1.ReasonLinkLocalRefused {
			t.Errorf("%s probe: %+v, want LinkLocalRefused", p.kind(), o)
		}
	}
}

func TestRedirectToLinkLocalRefused(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/latest/meta-data", http.StatusFound))
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	f := newProbers(ProbeSettings{}, nil, clock.RealClock{})
	p, err := f.newProber(workerSpec{Trigger: httpTrigger(host, port, "/")})
	if err != nil {
		t.Fatal(err)
	}
	if o := p.probe(context.Background()); o.reason != autorebootv1alpha1.ReasonLinkLocalRefused {
		t.Fatalf("redirect to metadata: %+v", o)
	}
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func TestHTTPAndTCPProbes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	f := newProbers(ProbeSettings{}, nil, clock.RealClock{})
	probe := func(tr autorebootv1alpha1.Trigger) observation {
		p, err := f.newProber(workerSpec{Trigger: tr})
		if err != nil {
			t.Fatal(err)
		}
		return p.probe(context.Background())
	}
	if o := probe(httpTrigger(host, port, "/healthz")); o.result != ok {
		t.Errorf("healthy endpoint: %+v", o)
	}
	if o := probe(httpTrigger(host, port, "/bad")); o.result != fail {
		t.Errorf("HTTP 500: %+v", o)
	}
	tcp := autorebootv1alpha1.Trigger{ProbeHost: host, Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port)}}}}
	if o := probe(tcp); o.result != ok {
		t.Errorf("tcp open port: %+v", o)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closedPort := splitHostPort(t, l.Addr().String())
	_ = l.Close()
	tcp.Probe.TCPSocket.Port = intstr.FromInt(closedPort)
	if o := probe(tcp); o.result != fail {
		t.Errorf("tcp closed port: %+v", o)
	}
	if o := probe(httpTrigger("127.0.0.1", closedPort, "/")); o.result != fail {
		t.Errorf("http closed port: %+v", o)
	}
}
