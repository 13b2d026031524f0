package memcached

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

// defaultScraperNamespaceLabel selects the namespaces whose pods may scrape
// the exporter when networkPolicy.metricsScrapers is empty: the label the
// manager's own metrics NetworkPolicy admits.
var defaultScraperNamespaceLabel = map[string]string{"metrics": "enabled"}

// networkPolicySettings is spec.networkPolicy when enabled, with the
// scrapers defaulted.
type networkPolicySettings struct {
	Clients  []cachev1alpha1.NetworkPolicyPeer
	Scrapers []cachev1alpha1.NetworkPolicyPeer
}

// resolveNetworkPolicy sets s.NetworkPolicy and checks its selectors the
// way the apiserver will (a bad one would fail every apply).
func resolveNetworkPolicy(s *settings, np *cachev1alpha1.NetworkPolicySpec) error {
	if np == nil || !np.Enabled {
		return nil
	}
	if len(np.Clients) == 0 {
		return &invalidSpecError{Msg: "networkPolicy.enabled needs at least one entry in clients"}
	}
	out := &networkPolicySettings{Clients: np.Clients, Scrapers: np.MetricsScrapers}
	if len(out.Scrapers) == 0 {
		out.Scrapers = []cachev1alpha1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: defaultScraperNamespaceLabel}}}
	}
	if err := checkPeers("clients", out.Clients); err != nil {
		return err
	}
	if err := checkPeers("metricsScrapers", out.Scrapers); err != nil {
		return err
	}
	s.NetworkPolicy = out
	return nil
}

func checkPeers(what string, peers []cachev1alpha1.NetworkPolicyPeer) error {
	for i, p := range peers {
		if p.PodSelector == nil && p.NamespaceSelector == nil {
			return &invalidSpecError{Msg: fmt.Sprintf("networkPolicy.%s[%d] needs a podSelector, a namespaceSelector or both", what, i)}
		}
		for _, sel := range []*metav1.LabelSelector{p.PodSelector, p.NamespaceSelector} {
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				return &invalidSpecError{Msg: fmt.Sprintf("networkPolicy.%s[%d] has an invalid selector: %v", what, i, err)}
			}
		}
	}
	return nil
}

// reconcileNetworkPolicy applies the NetworkPolicy when it is enabled and
// deletes the owned one when it is not.
func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	live, err := getLive(ctx, r.Client, key, &networkingv1.NetworkPolicy{})
	if err != nil {
		return err
	}
	switch {
	case live != nil && !metav1.IsControlledBy(live, mc):
		if s.NetworkPolicy != nil {
			obs.foreign = append(obs.foreign, describeForeign("NetworkPolicy", live, mc))
		}
		return nil
	case !apply:
		return nil
	case s.NetworkPolicy == nil:
		return r.deleteNetworkPolicy(ctx, mc, live, obs)
	}
	var cached client.Object
	if live != nil {
		cached = live
	}
	applied, err := r.applyIfChanged(ctx, inputsOf(mc, s), func() (runtime.ApplyConfiguration, error) { return desiredNetworkPolicy(mc, s) }, cached, &networkingv1.NetworkPolicy{}, func() (any, error) { return networkingv1ac.ExtractNetworkPolicy(live, FieldManager) })
	if err != nil {
		return err
	}
	r.eventForApply(mc, obs, "NetworkPolicy", live == nil, applied)
	return nil
}

// deleteNetworkPolicy deletes exactly the owned NetworkPolicy that was seen
// (nil: there is none).
func (r *Reconciler) deleteNetworkPolicy(ctx context.Context, mc *cachev1alpha1.Memcached, np *networkingv1.NetworkPolicy, obs *observation) error {
	if np == nil {
		return nil
	}
	if err := r.Client.Delete(ctx, np, client.Preconditions{UID: &np.UID, ResourceVersion: &np.ResourceVersion}); client.IgnoreNotFound(err) != nil {
		return err
	}
	obs.events.Normal(mc, nil, cachev1alpha1.EventDeleted, "Delete", "Deleted NetworkPolicy %s: it is disabled", mc.Name)
	return nil
}

// desiredNetworkPolicy admits the clients to the memcache port and, with
// the exporter, the scrapers to the metrics port; nothing else reaches the
// instances. Egress is not restricted.
func desiredNetworkPolicy(mc *cachev1alpha1.Memcached, s settings) (*networkingv1ac.NetworkPolicyApplyConfiguration, error) {
	rules := []*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration{}
	clients, err := ingressRule(cachev1alpha1.MemcachedPort, s.NetworkPolicy.Clients)
	if err != nil {
		return nil, err
	}
	rules = append(rules, clients)
	if s.Exporter {
		scrapers, err := ingressRule(cachev1alpha1.ExporterPort, s.NetworkPolicy.Scrapers)
		if err != nil {
			return nil, err
		}
		rules = append(rules, scrapers)
	}
	return networkingv1ac.NetworkPolicy(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(rules...)), nil
}

func ingressRule(port int32, peers []cachev1alpha1.NetworkPolicyPeer) (*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration, error) {
	rule := networkingv1ac.NetworkPolicyIngressRule().
		WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(port)))
	for _, p := range peers {
		peer := networkingv1ac.NetworkPolicyPeer()
		if p.PodSelector != nil {
			sel, err := convertInto(p.PodSelector, &metav1ac.LabelSelectorApplyConfiguration{})
			if err != nil {
				return nil, err
			}
			peer.WithPodSelector(sel)
		}
		if p.NamespaceSelector != nil {
			sel, err := convertInto(p.NamespaceSelector, &metav1ac.LabelSelectorApplyConfiguration{})
			if err != nil {
				return nil, err
			}
			peer.WithNamespaceSelector(sel)
		}
		rule.WithFrom(peer)
	}
	return rule, nil
}
