package memcached

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// endpointSliceControllerName is the managed-by value of the EndpointSlices
// Kubernetes maintains for a Service with a selector. Slices written by
// anyone else are ignored, so a hand-made slice cannot inject servers.
const endpointSliceControllerName = "endpointslice-controller.k8s.io"

// readyServers lists the host:port of every ready endpoint of the headless
// Service, from its EndpointSlices: exactly what the Service's DNS name
// resolves to, so status.servers and DNS agree. Sorted and without
// duplicates, so the status only changes when the set does.
func readyServers(ctx context.Context, c client.Reader, namespace, service string) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{
		discoveryv1.LabelServiceName: service,
		discoveryv1.LabelManagedBy:   endpointSliceControllerName,
	}); err != nil {
		return nil, fmt.Errorf("listing EndpointSlices of Service %s/%s: %w", namespace, service, err)
	}
	return serversFromSlices(list.Items), nil
}

func serversFromSlices(slicesIn []discoveryv1.EndpointSlice) []string {
	var out []string
	for i := range slicesIn {
		s := &slicesIn[i]
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port := cachev1alpha1.MemcachedPort
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == cachev1alpha1.MemcachedPortName && p.Port != nil {
				port = *p.Port
			}
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				out = append(out, net.JoinHostPort(addr, strconv.Itoa(int(port))))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
