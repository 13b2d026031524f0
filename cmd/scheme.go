package main

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// kubernetesAPIs are the built-in API groups the manager's scheme knows:
// the ones whose typed objects the controllers get, list, watch, write or
// report events about, and coordination.k8s.io, whose Lease the leader
// election's events are about. Each group registered costs resident memory
// for its types' tables whether or not it is ever used, so the manager does
// not add all of client-go's; TestSchemeCoversControllers fails when a
// controller starts to import a group missing here (or this lists one no
// longer imported). Kinds the controllers read as unstructured or as
// metadata only (custom resources, CRDs, ServiceMonitors, KEDA objects)
// need no registration.
var kubernetesAPIs = runtime.SchemeBuilder{
	corev1.AddToScheme,
	appsv1.AddToScheme,
	batchv1.AddToScheme,
	coordinationv1.AddToScheme,
	discoveryv1.AddToScheme,
	networkingv1.AddToScheme,
	policyv1.AddToScheme,
}

// newScheme is the manager's scheme before the controllers add their own
// API groups (registerControllers).
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := kubernetesAPIs.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}
