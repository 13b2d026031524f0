// Package egress decides whether a probe run on behalf of a namespace
// tenant may connect to an address.
//
// Probes run from the manager's own network position, which usually reaches
// more than a tenant's pods can: the manager's own ports, the apiserver, cloud
// metadata endpoints, and the pods and Services of every other namespace. The
// decision is taken at connect time on the resolved IP (see
// [Policy.Dialer]) rather than on the host name a tenant wrote, because DNS
// answers and HTTP redirects are under the tenant's control.
//
// The rules, first match wins, for a probe of a policy in namespace NS:
//
//  1. Unix sockets: only the exact paths in [Settings.AllowUnixSockets].
//  2. [Settings.Deny] rules deny.
//  3. [Settings.Allow] rules allow, overriding every built-in denial below.
//  4. Built-in denials: unspecified, loopback, cloud metadata, multicast and
//     broadcast, link-local (unless [Settings.AllowLinkLocal]), the manager's
//     own addresses and the apiserver's.
//  5. Service IPs (inside a ServiceCIDR) are allowed only if they belong to a
//     Service of NS.
//  6. Pod IPs are allowed only if every pod holding the IP is in NS and none
//     uses the host network.
//  7. Everything else (outside the cluster) is allowed.
//
// A failed cluster lookup denies: an apiserver hiccup must not open the
// cluster to tenants.
//
// [APICluster] needs list on networking.k8s.io servicecidrs, core services
// and pods and discovery.k8s.io endpointslices, and get on core services;
// the controller that builds it carries the RBAC markers.
package egress
