package probe

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func TestValidateTrigger(t *testing.T) {
	http := func(change func(g *corev1.HTTPGetAction)) autorebootv1alpha1.Trigger {
		g := &corev1.HTTPGetAction{Host: "svc.team.svc", Port: intstr.FromInt(8080), Path: "/healthz"}
		change(g)
		return autorebootv1alpha1.Trigger{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: g}}}
	}
	tcp := func(host string, port intstr.IntOrString) autorebootv1alpha1.Trigger {
		return autorebootv1alpha1.Trigger{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: host, Port: port}}}}
	}
	header := func(name, value string) func(g *corev1.HTTPGetAction) {
		return func(g *corev1.HTTPGetAction) { g.HTTPHeaders = []corev1.HTTPHeader{{Name: name, Value: value}} }
	}
	cases := []struct {
		name    string
		trigger autorebootv1alpha1.Trigger
		valid   bool
	}{
		{"plain httpGet", http(func(*corev1.HTTPGetAction) {}), true},
		{"IPv6 host", http(func(g *corev1.HTTPGetAction) { g.Host = "fd00::1" }), true},
		{"upper-case DNS name", http(func(g *corev1.HTTPGetAction) { g.Host = "DB.Example.com" }), true},
		{"host with a port", http(func(g *corev1.HTTPGetAction) { g.Host = "db:8080" }), false},
		{"host with a scheme", http(func(g *corev1.HTTPGetAction) { g.Host = "http://db" }), false},
		{"bracketed IPv6 host", http(func(g *corev1.HTTPGetAction) { g.Host = "[fd00::1]" }), false},
		{"host with a space", http(func(g *corev1.HTTPGetAction) { g.Host = "a b" }), false},
		{"port 0", http(func(g *corev1.HTTPGetAction) { g.Port = intstr.FromInt(0) }), false},
		{"port 70000", http(func(g *corev1.HTTPGetAction) { g.Port = intstr.FromInt(70000) }), false},
		{"named port", http(func(g *corev1.HTTPGetAction) { g.Port = intstr.FromString("http") }), false},
		{"scheme ftp", http(func(g *corev1.HTTPGetAction) { g.Scheme = "FTP" }), false},
		{"scheme HTTPS", http(func(g *corev1.HTTPGetAction) { g.Scheme = corev1.URISchemeHTTPS }), true},
		{"absolute URL as path", http(func(g *corev1.HTTPGetAction) { g.Path = "http://other/" }), false},
		{"header name with a space", http(header("X Bad", "v")), false},
		{"header value with a newline", http(header("X-Ok", "a\nInjected: 1")), false},
		{"header value with a NUL", http(header("X-Ok", "a\x00")), false},
		{"Host header that is no host", http(header("Host", "a/b")), false},
		{"good header", http(header("Authorization", "Bearer x")), true},
		{"tcp ok", tcp("10.1.2.3", intstr.FromInt(5432)), true},
		{"tcp named port", tcp("10.1.2.3", intstr.FromString("pg")), false},
		{"tcp port out of range", tcp("10.1.2.3", intstr.FromInt(65536)), false},
		{"grpc port 0", autorebootv1alpha1.Trigger{ProbeHost: "h", Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 0}}}}, false},
		{"bad probeHost", autorebootv1alpha1.Trigger{ProbeHost: "h/x", Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}}, false},
	}
	for _, tc := range cases {
		err := ValidateTrigger(tc.trigger)
		if (err == nil) != tc.valid {
			t.Errorf("%s: err = %v, want valid=%v", tc.name, err, tc.valid)
		}
	}
}
