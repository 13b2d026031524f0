//go:build tools

// Package k8s pins the Kubernetes commands that the local test cluster is
// built from: the control plane, and the kubelet and kube-proxy of its real
// node. It is a throw-away module: nothing imports it.
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
