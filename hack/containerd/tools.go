//go:build tools

// Package containerd pins the container runtime of the local cluster's real
// node: containerd with its CRI plugin, the runc shim and ctr (image import).
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
