package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/cluster/realnode"
)

// The demo runs the seed demo's nginx Deployment on a real node (containerd
// and runc on this machine, test/cluster/realnode) when the machine can run
// one, and on kwok's fake nodes otherwise. -real-node=auto decides and says
// why; on and off force it.

// realNodeMode returns whether to start a real node and why.
func (d *demo) realNodeMode() (bool, string) {
	switch d.realNode {
	case "off":
		return false, "-real-node=off"
	case "on":
		return true, "-real-node=on"
	}
	if err := realnode.Available("", ""); err != nil {
		return false, err.Error()
	}
	return true, "root, runc, the CNI plugins, bin/node and bin/node-images are here"
}

// startRealNode joins a real node to the cluster; the teardown stops it
// before the cluster.
func (d *demo) startRealNode(ctx context.Context, c *cluster.Cluster) (*realnode.Node, error) {
	d.say("starting a real node: containerd, kubelet and kube-proxy in their own namespaces (~20 s)")
	n, err := realnode.Start(ctx, realnode.Options{
		Kubeconfig:  c.Kubeconfig,
		ServiceCIDR: cluster.ServiceCIDR,
		ClientCA:    filepath.Join(c.PKIDir(), "ca.crt"),
		Name:        "real-node",
		Start:       d.spawner.start,
		Log:         func(f string, a ...any) { d.say(f, a...) },
	})
	if err != nil {
		return nil, err
	}
	d.atExit(func() {
		d.say("stopping the real node (its pods, containers, namespaces and mounts)")
		n.Stop()
	})
	if _, ok := n.Images["web"]; !ok {
		return nil, fmt.Errorf("the real node has no web image (bin/node-images/images.json) for nginx")
	}
	return n, nil
}

// moveNginxToRealNode makes the seed demo's nginx Deployment run real
// containers: the web image (this machine pulls nothing), the real node's
// label and taint. It returns once the real pods are rolled out.
func moveNginxToRealNode(ctx context.Context, c *cluster.Cluster, n *realnode.Node) error {
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"nodeSelector": map[string]string{realnode.LabelKey: realnode.LabelValue},
		"tolerations": []map[string]string{{
			"key": realnode.TaintKey, "operator": "Equal", "value": realnode.TaintValue, "effect": "NoSchedule",
		}},
		"containers": []map[string]string{{"name": "nginx", "image": n.Images["web"], "imagePullPolicy": "IfNotPresent"}},
	}}}}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "-n", "default", "patch", "deployment", "nginx", "--type", "strategic", "-p", string(b)); err != nil {
		return err
	}
	_, err = c.Kubectl(ctx, "-n", "default", "rollout", "status", "deployment/nginx", "--timeout", "3m")
	return err
}
