package memcached

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// endpointSliceControllerName is the managed-by value of the EndpointSlices
// Kubernetes maintains for a Service with a selector. Slices written by
// anyone else are ignored, so a hand-made slice cannot inject servers.
const endpointSliceControllerName = "endpointslice-controller.k8s.io"

// readyServers lists the ready endpoints of the headless Service, from its
// EndpointSlices: exactly what the Service's DNS names resolve to, so
// status.servers and DNS agree. For a Deployment they are pod IPs, sorted;
// for a StatefulSet the instances' stable names, in ordinal order. Without
// duplicates, so the status only changes when the set does.
func readyServers(ctx context.Context, c client.Reader, kind cachev1alpha1.WorkloadKind, namespace, service string) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{indexSliceService: service}); err != nil {
		return nil, fmt.Errorf("listing EndpointSlices of Service %s/%s: %w", namespace, service, err)
	}
	if kind == cachev1alpha1.WorkloadStatefulSet {
		return namedServersFromSlices(list.Items, namespace, service), nil
	}
	return serversFromSlices(list.Items), nil
}

func serversFromSlices(slicesIn []discoveryv1.EndpointSlice) []string {
	var out []string
	for i := range slicesIn {
		forEachReadyEndpoint(&slicesIn[i], func(ep *discoveryv1.Endpoint, port int32) {
			for _, addr := range ep.Addresses {
				out = append(out, net.JoinHostPort(addr, strconv.Itoa(int(port))))
			}
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// namedServersFromSlices: <hostname>.<service>.<namespace>.svc:<port> of
// each ready endpoint with a hostname (the EndpointSlice controller sets it
// for pods whose subdomain is the Service, as a StatefulSet's are), sorted
// by the ordinal at the end of the hostname.
func namedServersFromSlices(slicesIn []discoveryv1.EndpointSlice, namespace, service string) []string {
	type server struct {
		ordinal int
		addr    string
	}
	var found []server
	for i := range slicesIn {
		forEachReadyEndpoint(&slicesIn[i], func(ep *discoveryv1.Endpoint, port int32) {
			if ep.Hostname == nil || *ep.Hostname == "" {
				return
			}
			host := *ep.Hostname + "." + service + "." + namespace + ".svc"
			found = append(found, server{ordinal: ordinalOf(*ep.Hostname), addr: net.JoinHostPort(host, strconv.Itoa(int(port)))})
		})
	}
	slices.SortFunc(found, func(a, b server) int {
		return cmp.Or(cmp.Compare(a.ordinal, b.ordinal), strings.Compare(a.addr, b.addr))
	})
	out := make([]string, 0, len(found))
	for _, s := range found {
		out = append(out, s.addr)
	}
	return slices.Compact(out)
}

// ordinalOf is the N of a StatefulSet pod name <name>-N (-1 when there is
// none, which sorts first).
func ordinalOf(hostname string) int {
	i := strings.LastIndexByte(hostname, '-')
	n, err := strconv.Atoi(hostname[i+1:])
	if i < 0 || err != nil || n < 0 {
		return -1
	}
	return n
}

// forEachReadyEndpoint calls f for each endpoint of an IP slice whose ready
// condition is not false, with the slice's memcache port.
func forEachReadyEndpoint(s *discoveryv1.EndpointSlice, f func(ep *discoveryv1.Endpoint, port int32)) {
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		return
	}
	port := cachev1alpha1.MemcachedPort
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name == cachev1alpha1.MemcachedPortName && p.Port != nil {
			port = *p.Port
		}
	}
	for j := range s.Endpoints {
		ep := &s.Endpoints[j]
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			continue
		}
		f(ep, port)
	}
}
