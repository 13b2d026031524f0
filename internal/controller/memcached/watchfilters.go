package memcached

import (
	"net"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// The watches' filters. An update of a watched object causes a reconcile
// only when it changes something the reconcile reads: the object's
// metadata that the controller owns or checks (labels, annotations, owner
// references, deletion), its spec (drift), and of the status only what the
// Memcached status is computed from. The other updates — a
// PodDisruptionBudget's disruption counts, a Deployment's
// unavailableReplicas or condition heartbeats, resourceVersion and
// managedFields timestamps — would each cost a reconcile that writes
// nothing.
//
// The creation of an object a Memcached controls is the controller's own
// apply, whose answer the creating reconcile already used (or, when the
// manager starts, the initial list, while every Memcached is reconciled
// anyway): it passes only for objects no Memcached controls (a foreign
// object taking the name must be reported). An EndpointSlice's creation
// passes when it already lists endpoints. Deletions always pass.

// metadataChanged: what every filter passes on.
func metadataChanged(o, n client.Object) bool {
	return o.GetGeneration() != n.GetGeneration() ||
		o.GetUID() != n.GetUID() ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
		!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences())
}

// watchFilter builds the predicate of the watch of T: an update passes
// when relevant(old, new), a creation when created(new); objects of
// another type pass.
func watchFilter[T client.Object](relevant func(o, n T) bool, created func(T) bool) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(T)
			n, ok2 := e.ObjectNew.(T)
			if !ok1 || !ok2 {
				return true
			}
			return metadataChanged(o, n) || relevant(o, n)
		},
		CreateFunc: func(e event.CreateEvent) bool {
			o, ok := e.Object.(T)
			return !ok || created(o)
		},
	}
}

// ownedFilter is the filter of an owned kind: creations pass for objects
// no Memcached controls.
func ownedFilter[T client.Object](relevant func(o, n T) bool) predicate.Predicate {
	return watchFilter(relevant, func(o T) bool { return !controlledByMemcached(o) })
}

// controlledByMemcached: o's controller is a Memcached (of any name; a
// leftover of a deleted one is reported like a foreign object, but only
// the reconcile of the Memcached of its name can tell).
func controlledByMemcached(o client.Object) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.Kind == "Memcached" && ref.APIVersion == cachev1alpha1.GroupVersion.String() &&
		ref.Name == o.GetName()
}

// sliceListsEndpoints: a new EndpointSlice matters only with endpoints.
func sliceListsEndpoints(s *discoveryv1.EndpointSlice) bool { return len(s.Endpoints) > 0 }

// deploymentChanged: the generation covers the spec; of the status, what
// deploymentState reads.
func deploymentChanged(o, n *appsv1.Deployment) bool {
	os, ns := &o.Status, &n.Status
	return os.ObservedGeneration != ns.ObservedGeneration || os.Replicas != ns.Replicas ||
		os.ReadyReplicas != ns.ReadyReplicas || os.AvailableReplicas != ns.AvailableReplicas ||
		os.UpdatedReplicas != ns.UpdatedReplicas || !sameTrouble(rolloutTroubleOf(o), rolloutTroubleOf(n))
}

// sameTrouble compares what setDegraded reports of a rollout's trouble
// (the conditions' messages), not where the conditions are stored.
func sameTrouble(a, b rolloutTrouble) bool {
	msg := func(c *appsv1.DeploymentCondition) *string {
		if c == nil {
			return nil
		}
		return &c.Message
	}
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(msg(a.progressDeadline), msg(b.progressDeadline)) && eq(msg(a.replicaFailure), msg(b.replicaFailure))
}

// statefulSetChanged: the generation covers the spec; of the status, what
// statefulSetState reads.
func statefulSetChanged(o, n *appsv1.StatefulSet) bool {
	os, ns := &o.Status, &n.Status
	return os.ObservedGeneration != ns.ObservedGeneration || os.Replicas != ns.Replicas ||
		os.ReadyReplicas != ns.ReadyReplicas || os.AvailableReplicas != ns.AvailableReplicas ||
		os.UpdatedReplicas != ns.UpdatedReplicas
}

// A Service has no generation: its spec is compared.
func serviceChanged(o, n *corev1.Service) bool {
	return !equality.Semantic.DeepEqual(&o.Spec, &n.Spec)
}

// A PodDisruptionBudget's status is the disruption controller's: only the
// spec matters, compared too in case a generation is not kept.
func pdbChanged(o, n *policyv1.PodDisruptionBudget) bool {
	return !equality.Semantic.DeepEqual(&o.Spec, &n.Spec)
}

func networkPolicyChanged(o, n *networkingv1.NetworkPolicy) bool {
	return !equality.Semantic.DeepEqual(&o.Spec, &n.Spec)
}

// endpointSliceChanged: the endpoints and ports readyServers reads.
func endpointSliceChanged(o, n *discoveryv1.EndpointSlice) bool {
	return o.AddressType != n.AddressType || !equality.Semantic.DeepEqual(o.Endpoints, n.Endpoints) ||
		!equality.Semantic.DeepEqual(o.Ports, n.Ports)
}

// indexSliceService indexes the EndpointSlices the EndpointSlice
// controller maintains by the name of their Service, so that readyServers
// reads the slices of one Service without scanning its namespace.
const indexSliceService = "memcached.runbook.dev/slice-service"

func sliceService(o client.Object) []string {
	l := o.GetLabels()
	if l[discoveryv1.LabelManagedBy] != endpointSliceControllerName || l[discoveryv1.LabelServiceName] == "" {
		return nil
	}
	return []string{l[discoveryv1.LabelServiceName]}
}

// The news for the status: the events that change what a
// Memcached's status reports, which status.PrioritizeNews puts ahead of
// creations and spec work, so that readiness shows while a burst of new
// Memcacheds waits for its first reconciles. Of a workload, every change
// of the status its filter passes (the replica counts, the observed
// generation behind Progressing, the rollout trouble behind Degraded); of
// an EndpointSlice, its ready endpoints (status.servers). A creation of an
// owned workload is the controller's own apply, not news.
var (
	deploymentNews  = status.News[*appsv1.Deployment]{Updated: deploymentChanged}
	statefulSetNews = status.News[*appsv1.StatefulSet]{Updated: statefulSetChanged}
	sliceNews       = status.News[*discoveryv1.EndpointSlice]{
		Created: func(s *discoveryv1.EndpointSlice) bool { return len(readyEndpointsOf(s)) > 0 },
		Updated: func(o, n *discoveryv1.EndpointSlice) bool {
			return !slices.Equal(readyEndpointsOf(o), readyEndpointsOf(n))
		},
	}
)

// readyEndpointsOf: what s gives status.servers, sorted: each ready
// address with its port and hostname.
func readyEndpointsOf(s *discoveryv1.EndpointSlice) []string {
	var out []string
	forEachReadyEndpoint(s, func(ep *discoveryv1.Endpoint, port int32) {
		for _, addr := range ep.Addresses {
			out = append(out, ptr.Deref(ep.Hostname, "")+"/"+net.JoinHostPort(addr, strconv.Itoa(int(port))))
		}
	})
	slices.Sort(out)
	return out
}
