//go:build tools

// Package etcd pins the etcd server that the local test cluster stores its state in.
package etcd

import _ "go.etcd.io/etcd/server/v3"
