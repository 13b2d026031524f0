package probe

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// ValidateTrigger finds what the CRD cannot check in a trigger: a host
// that is neither an address nor a DNS name, a header Go would refuse to
// send, a path that is no URL path. Such a policy gets no worker and an
// InvalidSpec condition; were it probed, the refusal would look like the
// dependency failing and restart the target.
func ValidateTrigger(t autorebootv1alpha1.Trigger) error {
	if t.ProbeHost != "" {
		if err := validateHost(t.ProbeHost); err != nil {
			return fmt.Errorf("trigger.probeHost: %w", err)
		}
	}
	if t.Probe == nil {
		return nil
	}
	switch h := t.Probe.ProbeHandler; {
	case h.HTTPGet != nil:
		return validateHTTPGet(h.HTTPGet)
	case h.TCPSocket != nil:
		return validateTCPSocket(h.TCPSocket)
	case h.GRPC != nil:
		return validatePort("probe.grpc.port", int(h.GRPC.Port))
	}
	return nil
}

func validateHTTPGet(g *corev1.HTTPGetAction) error {
	if g.Host != "" {
		if err := validateHost(g.Host); err != nil {
			return fmt.Errorf("probe.httpGet.host: %w", err)
		}
	}
	if g.Port.Type != 0 {
		return fmt.Errorf("probe.httpGet.port %q: named ports need a pod", g.Port.StrVal)
	}
	if err := validatePort("probe.httpGet.port", g.Port.IntValue()); err != nil {
		return err
	}
	switch g.Scheme {
	case "", corev1.URISchemeHTTP, corev1.URISchemeHTTPS:
	default:
		return fmt.Errorf("probe.httpGet.scheme %q: must be HTTP or HTTPS", g.Scheme)
	}
	if g.Path != "" {
		if u, err := url.Parse(g.Path); err != nil || u.IsAbs() || u.Host != "" {
			return fmt.Errorf("probe.httpGet.path: not a URL path")
		}
	}
	for _, hd := range g.HTTPHeaders {
		if !httpguts.ValidHeaderFieldName(hd.Name) {
			return fmt.Errorf("probe.httpGet.httpHeaders: %q is not a valid header name", hd.Name)
		}
		if !httpguts.ValidHeaderFieldValue(hd.Value) {
			return fmt.Errorf("probe.httpGet.httpHeaders: the value of %s is not a valid header value", hd.Name)
		}
		if strings.EqualFold(hd.Name, "Host") {
			if err := validateHost(hd.Value); err != nil {
				return fmt.Errorf("probe.httpGet.httpHeaders: Host: %w", err)
			}
		}
	}
	return nil
}

func validateTCPSocket(s *corev1.TCPSocketAction) error {
	if s.Host != "" {
		if err := validateHost(s.Host); err != nil {
			return fmt.Errorf("probe.tcpSocket.host: %w", err)
		}
	}
	if s.Port.Type != 0 {
		return fmt.Errorf("probe.tcpSocket.port %q: named ports need a pod", s.Port.StrVal)
	}
	return validatePort("probe.tcpSocket.port", s.Port.IntValue())
}

func validatePort(field string, port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%s %d: must be between 1 and 65535", field, port)
	}
	return nil
}

// validateHost accepts an IP address or a DNS name (any case), nothing
// else: no port, no brackets, no scheme, no path.
func validateHost(host string) error {
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%q is neither an IP address nor a DNS name", host)
	}
	return nil
}
