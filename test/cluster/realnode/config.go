package realnode

import (
	"fmt"
	"os"
	"path/filepath"
)

// paths of the node's state inside its folder.
func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.dir}, elem...)...) }

// containerd's socket is in the node's own /run (a tmpfs of its mount
// namespace, like the shims' sockets and runc's state, which containerd puts
// under /run/containerd whatever its configuration says): commands that talk
// to it run in that namespace (nodeCommand).
func (n *Node) containerdSocket() string { return "/run/containerd/containerd.sock" }
func (n *Node) runtimeEndpoint() string  { return "unix://" + n.containerdSocket() }

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// runcBinary is Debian's runc: built with seccomp, which a runc built by
// `go install` lacks (containerd's default profile needs it).
const runcBinary = "/usr/sbin/runc"

func (n *Node) writeConfigs(pauseRef string) error {
	files := map[string]string{
		n.path("containerd.toml"):                     n.containerdConfig(pauseRef),
		n.path("cni", "net.d", "10-runbook.conflist"): n.cniConfig(),
		n.path("kubelet.yaml"):                        n.kubeletConfig(),
		n.path("kube-proxy.yaml"):                     n.kubeProxyConfig(),
		n.path("crictl.yaml"):                         fmt.Sprintf("runtime-endpoint: %s\nimage-endpoint: %s\n", n.runtimeEndpoint(), n.runtimeEndpoint()),
		// Pods get no resolver of the machine's: names outside the cluster
		// must not resolve to anything they could try to reach.
		n.path("resolv.conf"): "# the real node's pods resolve no outside names\n",
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	kubeconfig, err := os.ReadFile(n.opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the cluster's kubeconfig: %w", err)
	}
	return os.WriteFile(n.path("kubeconfig.yaml"), kubeconfig, 0o600)
}

// containerdConfig: runc through the v2 shim with the cgroupfs driver (no
// systemd here), pod sandboxes from the imported pause image, the CNI
// configuration of this node. restrict_oom_score_adj: without
// CAP_SYS_RESOURCE a process may not lower its oom_score_adj, which every
// sandbox asks for; with it containerd clamps the value instead of failing.
// The node's network namespaces are mounted under its state folder; the
// plugins that would create machine-wide paths (NRI's socket, /opt/containerd)
// are off.
func (n *Node) containerdConfig(pauseRef string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
imports = []
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
  "io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, n.path("containerd", "root"), n.path("containerd", "state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
		pauseRef, runcBinary, cniBinDir, n.path("cni", "net.d"))
}

// cniConfig: a bridge inside the node's namespace, the node as the pods'
// gateway (kube-proxy's rules run there), no masquerade: the node's namespace
// has no route out of the machine and pods need none.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "runbook-real-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    }
  ]
}
`, PodCIDR, n.path("cni", "ipam"))
}

// kubeletConfig: what this machine needs (cgroup v1 in hybrid mode without
// systemd: failCgroupV1 false and cgroupfs; no CAP_SYS_RESOURCE: no QoS
// cgroups or node-allocatable enforcement to write limits into), the
// apiserver's client certificate accepted for logs and exec (authorized by
// the apiserver), no read-only port, images never garbage-collected (they are
// imported, nothing could pull them back), eviction only when really short.
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: %[1]q
address: %[2]q
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[3]q
authorization:
  mode: Webhook
resolvConf: %[4]q
clusterDNS: [%[8]q]
clusterDomain: %[9]s
podLogsDir: %[7]q
registerWithTaints:
- key: %[5]s
  value: %[6]q
  effect: NoSchedule
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
serializeImagePulls: false
localStorageCapacityIsolation: false
`, n.runtimeEndpoint(), n.IP, n.opts.ClientCA, n.path("resolv.conf"), TaintKey, TaintValue, n.path("pod-logs"), DNSServiceIP, ClusterDomain)
}

// kubeProxyConfig: iptables mode inside the node's namespace; the machine's
// conntrack limits and timeouts are left as they are (they need privileges
// this machine does not grant, and the defaults are ample); localhost
// NodePorts would need route_localnet, which nothing here uses.
func (n *Node) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %[1]q
hostnameOverride: %[2]q
clusterCIDR: %[3]q
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
`, n.path("kubeconfig.yaml"), n.Name, PodCIDR)
}
