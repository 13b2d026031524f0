package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func httpTrigger(host string, port int, path string) autorebootv1alpha1.Trigger {
	return autorebootv1alpha1.Trigger{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Host: host, Port: intstr.FromInt(port), Path: path}}}}
}

func tcpTrigger(host string, port int) autorebootv1alpha1.Trigger {
	return autorebootv1alpha1.Trigger{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		TCPSocket: &corev1.TCPSocketAction{Host: host, Port: intstr.FromInt(port)}}}}
}

func runProbe(t *testing.T, f *Probers, tr autorebootv1alpha1.Trigger) Observation {
	t.Helper()
	p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	return p.Probe(context.Background())
}

// Every probe kind dials through the network policy: refused addresses are
// an Error (a configuration problem, never a restart), with one message.
func TestRefusedAddressesAreErrorsNotFailures(t *testing.T) {
	f := testProbers(t, nil, Settings{})
	for _, tr := range []autorebootv1alpha1.Trigger{
		httpTrigger("169.254.169.254", 80, "/latest/meta-data"),
		httpTrigger("127.0.0.1", 8081, "/readyz"),
		httpTrigger("localhost", 8081, "/readyz"),
		tcpTrigger("0.0.0.0", 3306),
		tcpTrigger("::1", 22),
		tcpTrigger("::ffff:127.0.0.1", 22),
		{ProbeHost: "fe80::1", Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}}},
		{ProbeHost: "127.0.0.1", Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 80}}}},
	} {
		o := runProbe(t, f, tr)
		if o.Result != errR || o.Reason != autorebootv1alpha1.ReasonAddressNotAllowed {
			t.Errorf("%+v: got %+v, want Error/AddressNotAllowed", tr.Probe.ProbeHandler, o)
		}
	}
}

func TestRedirectToARefusedAddressIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://127.0.0.1:1/latest/meta-data", http.StatusFound))
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	f := testProbers(t, nil, Settings{}, srv.Listener.Addr().String())
	if o := runProbe(t, f, httpTrigger(host, port, "/")); o.Result != errR || o.Reason != autorebootv1alpha1.ReasonAddressNotAllowed {
		t.Fatalf("redirect to loopback: %+v", o)
	}
}

func splitHostPort(t testing.TB, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port := splitHostPort(t, l.Addr().String())
	_ = l.Close()
	return port
}

func TestHTTPAndTCPProbes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("internal detail that must not reach status"))
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	closed := closedPort(t)
	f := testProbers(t, nil, Settings{}, srv.Listener.Addr().String(), "127.0.0.1:"+strconv.Itoa(closed))
	if o := runProbe(t, f, httpTrigger(host, port, "/healthz")); o.Result != ok {
		t.Errorf("healthy endpoint: %+v", o)
	}
	if o := runProbe(t, f, httpTrigger(host, port, "/bad")); o.Result != fail || o.Message != "GET http://"+srv.Listener.Addr().String()+"/bad: HTTP 500" {
		t.Errorf("HTTP 500: %+v", o)
	}
	if o := runProbe(t, f, tcpTrigger(host, port)); o.Result != ok {
		t.Errorf("tcp open port: %+v", o)
	}
	// A closed port is a Failure with the one fixed phrase.
	want := "dial 127.0.0.1:" + strconv.Itoa(closed) + ": connection failed"
	if o := runProbe(t, f, tcpTrigger("127.0.0.1", closed)); o.Result != fail || o.Message != want {
		t.Errorf("tcp closed port: %+v", o)
	}
	if o := runProbe(t, f, httpTrigger("127.0.0.1", closed, "/")); o.Result != fail {
		t.Errorf("http closed port: %+v", o)
	}
	// The allow rule names one port: the neighbour stays refused.
	if o := runProbe(t, f, tcpTrigger("127.0.0.1", closed+1)); o.Reason != autorebootv1alpha1.ReasonAddressNotAllowed && closed+1 != port {
		t.Errorf("a port next to the allowed one: %+v", o)
	}
}

func TestInvalidProbeConfigurationNeverRuns(t *testing.T) {
	f := testProbers(t, nil, Settings{})
	bad := httpTrigger("db:5432", 80, "/")
	if _, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: bad}); err == nil {
		t.Fatal("a host with a port was probed")
	}
}
