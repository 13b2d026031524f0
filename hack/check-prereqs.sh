#!/usr/bin/env bash
# Fails loudly, naming the fix, when something the test suite needs is absent.
# A missing prerequisite must never turn into a silently skipped test.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fail=0
need() { echo "missing prerequisite: $1" >&2; echo "  fix: $2" >&2; fail=1; }

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl; do
  [ -x "$root/bin/k8s/$b" ] || need "bin/k8s/$b" "make k8s-binaries"
done
for b in kubelet kube-proxy containerd containerd-shim-runc-v2 ctr crictl coredns; do
  [ -x "$root/bin/node/$b" ] || need "bin/node/$b (the real node)" "make node-binaries"
done
[ -x /usr/sbin/runc ] || need "runc with seccomp (the real node)" "apt-get install -y runc"
[ -x /usr/lib/cni/bridge ] || need "CNI plugins (the real node)" "apt-get install -y containernetworking-plugins"
[ "$(id -u)" = 0 ] || need "root (the real node creates namespaces, mounts and iptables rules)" "run the tests as root"
command -v git >/dev/null || need "git (hack/demo clones the repository to run the README's make demo as written)" "apt-get install -y git"
command -v openssl >/dev/null || need openssl "apt-get install -y openssl"
command -v memcached >/dev/null || need "memcached (real-server test of the generated command line)" "apt-get install -y memcached"
(exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null || need "MariaDB on 127.0.0.1:3306 (sql trigger tests)" "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
(exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null || need "PostgreSQL on 127.0.0.1:5432 (sql trigger tests)" "pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start"
exit $fail
