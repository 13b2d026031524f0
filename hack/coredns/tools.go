//go:build tools

// Package coredns pins the cluster DNS server of the local cluster's real
// node (CoreDNS with its kubernetes plugin).
package coredns

import _ "github.com/coredns/coredns"
