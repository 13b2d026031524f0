package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache lifetimes. Service CIDRs and the apiserver's addresses rarely
// change; Services and pod IPs come and go, and a stale answer may allow a
// recycled IP for up to the TTL.
const (
	serviceCIDRTTL = 60 * time.Second
	serviceIPsTTL  = 10 * time.Second
	podsTTL        = 10 * time.Second
	apiServerTTL   = 60 * time.Second
	// maxCacheEntries bounds the caches keyed by what tenants choose.
	maxCacheEntries = 10000
)

// APICluster is the production Cluster: live reads from the apiserver with
// short caches. It is safe for concurrent use.
type APICluster struct {
	reader client.Reader
	host   string
	clock  clock.PassiveClock
	log    logr.Logger

	cidrs      *ttlCache[struct{}, []netip.Prefix]
	serviceIPs *ttlCache[string, []netip.Addr]
	pods       *ttlCache[netip.Addr, []PodRef]
	apiServer  *ttlCache[struct{}, []netip.Addr]
	// noCIDRs is set while no ServiceCIDR is known, to log that once.
	noCIDRs atomic.Bool
}

var _ Cluster = (*APICluster)(nil)

// NewAPICluster reads through reader, which must read live (the manager's
// APIReader: a cache would need cluster-wide watches of pods and Services)
// and whose scheme must know core/v1, discovery/v1 and networking/v1.
// apiServerHost is the apiserver as the manager reaches it (rest.Config.Host:
// a URL, host:port or a host name). log receives the note that Service IPs
// are not recognised, when no ServiceCIDR is known.
func NewAPICluster(reader client.Reader, apiServerHost string, clk clock.PassiveClock, log logr.Logger) *APICluster {
	return &APICluster{
		reader:     reader,
		host:       apiServerHost,
		clock:      clk,
		log:        log,
		cidrs:      newTTLCache[struct{}, []netip.Prefix](serviceCIDRTTL, 1),
		serviceIPs: newTTLCache[string, []netip.Addr](serviceIPsTTL, maxCacheEntries),
		pods:       newTTLCache[netip.Addr, []PodRef](podsTTL, maxCacheEntries),
		apiServer:  newTTLCache[struct{}, []netip.Addr](apiServerTTL, 1),
	}
}

// ServiceCIDRs lists networking.k8s.io/v1 ServiceCIDRs. Where that API is
// not served (clusters before 1.33 without the feature) it returns none
// rather than an error, so that dials do not all fail; Service IPs are then
// judged as ordinary addresses, which the log says once.
func (c *APICluster) ServiceCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	return c.cidrs.load(ctx, c.clock, struct{}{}, c.listServiceCIDRs)
}

func (c *APICluster) listServiceCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	var list networkingv1.ServiceCIDRList
	err := c.reader.List(ctx, &list)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		list.Items = nil
	} else if err != nil {
		return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	cidrs, err := parseServiceCIDRs(list.Items)
	if err != nil {
		return nil, err
	}
	c.noteCIDRs(len(cidrs) > 0)
	return cidrs, nil
}

// parseServiceCIDRs fails on a CIDR it cannot read rather than skip it: a
// skipped range would let tenants reach the Services inside it.
func parseServiceCIDRs(items []networkingv1.ServiceCIDR) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, sc := range items {
		for _, s := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("ServiceCIDR %s: %w", sc.Name, err)
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

func (c *APICluster) noteCIDRs(known bool) {
	if known {
		c.noCIDRs.Store(false)
		return
	}
	if !c.noCIDRs.Swap(true) {
		c.log.Info("No ServiceCIDR found (networking.k8s.io/v1 ServiceCIDR not served, or none exist): " +
			"probes are not stopped from reaching the Services of other namespaces; a Deny rule for the service range stops them (and tenants' own)")
	}
}

// ServiceIPs returns the cluster IPs of the Services in namespace.
func (c *APICluster) ServiceIPs(ctx context.Context, namespace string) ([]netip.Addr, error) {
	if namespace == "" {
		// Listing in "" would list every namespace and allow them all.
		return nil, errors.New("service IPs of an empty namespace")
	}
	return c.serviceIPs.load(ctx, c.clock, namespace, func(ctx context.Context) ([]netip.Addr, error) {
		var list corev1.ServiceList
		if err := c.reader.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("list Services in %s: %w", namespace, err)
		}
		var ips []netip.Addr
		for i := range list.Items {
			ips = append(ips, clusterIPs(&list.Items[i])...)
		}
		return ips, nil
	})
}

// clusterIPs skips "None" (headless) and anything else that is no address.
func clusterIPs(svc *corev1.Service) []netip.Addr {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range raw {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// PodsWithIP lists the pods whose primary IP (status.podIP) is ip. The
// apiserver offers no field selector on status.podIPs, so the second IP of a
// dual-stack pod is not found.
func (c *APICluster) PodsWithIP(ctx context.Context, ip netip.Addr) ([]PodRef, error) {
	ip = ip.WithZone("").Unmap()
	return c.pods.load(ctx, c.clock, ip, func(ctx context.Context) ([]PodRef, error) {
		var list corev1.PodList
		sel := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("status.podIP", ip.String())}
		if err := c.reader.List(ctx, &list, sel); err != nil {
			return nil, fmt.Errorf("list pods with IP %s: %w", ip, err)
		}
		return podRefs(list.Items), nil
	})
}

// podRefs keeps distinct refs only: a node IP is held by every hostNetwork
// pod of the node, and the cache should not hold them all.
func podRefs(pods []corev1.Pod) []PodRef {
	refs := []PodRef{}
	for i := range pods {
		ref := PodRef{Namespace: pods[i].Namespace, HostNetwork: pods[i].Spec.HostNetwork}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	return refs
}

// APIServerAddrs returns the addresses of apiServerHost, the cluster IPs of
// Service default/kubernetes and the addresses of its EndpointSlices: the
// apiserver behind a load balancer, its Service and each instance.
func (c *APICluster) APIServerAddrs(ctx context.Context) ([]netip.Addr, error) {
	return c.apiServer.load(ctx, c.clock, struct{}{}, func(ctx context.Context) ([]netip.Addr, error) {
		host, err := resolveHost(ctx, hostOf(c.host))
		if err != nil {
			return nil, err
		}
		svc, err := c.kubernetesServiceIPs(ctx)
		if err != nil {
			return nil, err
		}
		eps, err := c.kubernetesEndpoints(ctx)
		if err != nil {
			return nil, err
		}
		return slices.Concat(host, svc, eps), nil
	})
}

func (c *APICluster) kubernetesServiceIPs(ctx context.Context) ([]netip.Addr, error) {
	var svc corev1.Service
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, &svc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Service default/kubernetes: %w", err)
	}
	return clusterIPs(&svc), nil
}

func (c *APICluster) kubernetesEndpoints(ctx context.Context) ([]netip.Addr, error) {
	var list discoveryv1.EndpointSliceList
	err := c.reader.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"})
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices of default/kubernetes: %w", err)
	}
	var out []netip.Addr
	for _, slice := range list.Items {
		if slice.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, ep := range slice.Endpoints {
			for _, s := range ep.Addresses {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return nil, fmt.Errorf("EndpointSlice default/%s: %w", slice.Name, err)
				}
				out = append(out, a.Unmap())
			}
		}
	}
	return out, nil
}

// hostOf accepts what rest.Config.Host holds: a URL, host:port or a host.
func hostOf(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Hostname()
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
}

func resolveHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == "" {
		return nil, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.WithZone("").Unmap()}, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve apiserver host %s: %w", host, err)
	}
	for i := range addrs {
		addrs[i] = addrs[i].WithZone("").Unmap()
	}
	return addrs, nil
}
