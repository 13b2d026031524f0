package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Warm restarts on the real node: items written before the kubelet's
// runtime stops the memcached container (with the image's stop signal,
// SIGUSR1) are all there after the kubelet restarts it; a SIGKILL starts
// it empty. It also measures what the memory file costs the container's
// memory cgroup.
func TestMemcachedWarmRestartOnRealPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warm"},
		Spec: cachev1alpha1.MemcachedSpec{
			Size:        new(int32(1)),
			WarmRestart: true,
			MemoryMiB:   new(int32(64)),
		},
	}
	onTheNode(t, &mc.Spec)
	must(t, k8s.Create(ctx, mc))
	addr := waitServers(t, mc, 1, 3*time.Minute)[0]
	pod := memcachedPod(t, ns, 0)
	before := memcgOf(t, pod)

	// 40 MiB of items: 400 values of 100 KiB.
	const items, size = 400, 100 << 10
	value := strings.Repeat("x", size)
	var script strings.Builder
	for i := range items {
		fmt.Fprintf(&script, "set k%d 0 0 %d noreply\r\n%s\r\n", i, size, value)
	}
	script.WriteString("get k399\r\nstats\r\nquit\r\n")
	reply := memcachedTalk(t, addr, script.String())
	statsBefore := statsLine(reply, "curr_items", "get_hits", "bytes", "uptime")
	filled := memcgOf(t, pod)
	t.Logf("before the restart: %s", statsBefore)
	t.Logf("memory cgroup of memcached: empty %s; with %d MiB of items %s; usage grew %d MiB",
		before, items*size>>20, filled, (filled.usage-before.usage)>>20)
	// 64 MiB hold fewer than 400 such items (memcached evicts the oldest).
	kept := statValue(t, reply, "curr_items")
	if kept == 0 || !strings.Contains(reply, "VALUE k399 0 ") {
		t.Fatalf("curr_items %d after %d sets, k399 stored: %v", kept, items, strings.Contains(reply, "VALUE k399 0 "))
	}

	// The runtime stops the container with its stop signal; the kubelet
	// starts it again in the same pod.
	stopContainer(t, pod, false)
	pod = waitRestarted(t, ns, pod.Name, 1)
	reply = memcachedTalk(t, addr, "get k399\r\nstats\r\nquit\r\n")
	t.Logf("after a stop with the stop signal: %s", statsLine(reply, "curr_items", "get_hits", "get_misses", "bytes", "uptime"))
	if got := statValue(t, reply, "curr_items"); got != kept {
		t.Fatalf("curr_items %d after a warm restart, want %d", got, kept)
	}
	if !strings.Contains(reply, "VALUE k399 0 ") || statValue(t, reply, "get_hits") < 1 {
		t.Fatalf("k399 missing after a warm restart")
	}
	t.Logf("memory cgroup of the restarted memcached (same pages, mapped again): %s", memcgOf(t, pod))
	waitLastRestart(t, mc, cachev1alpha1.RestartWarm)

	// SIGKILL: nothing saved, the next memcached starts empty.
	stopContainer(t, pod, true)
	waitRestarted(t, ns, pod.Name, 2)
	reply = memcachedTalk(t, addr, "get k399\r\nstats\r\nquit\r\n")
	t.Logf("after SIGKILL: %s", statsLine(reply, "curr_items", "get_hits", "get_misses", "uptime"))
	if got := statValue(t, reply, "curr_items"); got != 0 {
		t.Fatalf("curr_items %d after SIGKILL, want a cold start", got)
	}
	last := waitLastRestart(t, mc, cachev1alpha1.RestartCold)
	if last.Reason != cachev1alpha1.ReasonKilled {
		t.Errorf("lastRestart %+v, want reason %s", last, cachev1alpha1.ReasonKilled)
	}
}

// memcachedPod is the index-th pod of the namespace.
func memcachedPod(t *testing.T, ns string, index int) *corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	must(t, err)
	if len(pods.Items) <= index {
		t.Fatalf("%d pods in %s", len(pods.Items), ns)
	}
	return &pods.Items[index]
}

// stopContainer stops the pod's memcached container through the runtime,
// as the kubelet does: with its stop signal and a grace period, or with
// SIGKILL at once.
func stopContainer(t *testing.T, pod *corev1.Pod, kill bool) {
	t.Helper()
	timeout := "20"
	if kill {
		timeout = "0"
	}
	out, err := node.Crictl(context.Background(), "stop", "--timeout", timeout, containerID(pod))
	if err != nil {
		t.Fatalf("crictl stop: %v: %s", err, out)
	}
}

// waitRestarted waits until the memcached container restarted restarts
// times and is ready again.
func waitRestarted(t *testing.T, ns, name string, restarts int32) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, 3*time.Minute, fmt.Sprintf("memcached of %s restarted %d times and ready", name, restarts), func() error {
		var err error
		if p, err = cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "memcached" && c.RestartCount >= restarts && c.Ready {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	})
	return p
}

func waitLastRestart(t *testing.T, mc *cachev1alpha1.Memcached, outcome cachev1alpha1.RestartOutcome) *cachev1alpha1.RestartStatus {
	t.Helper()
	var last *cachev1alpha1.RestartStatus
	eventually(t, 2*time.Minute, "status.lastRestart "+string(outcome), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(mc), mc); err != nil {
			return err
		}
		last = mc.Status.LastRestart
		if last == nil || last.Outcome != outcome {
			return fmt.Errorf("lastRestart %+v", last)
		}
		return nil
	})
	t.Logf("status.lastRestart: %s %s: %s", last.Outcome, last.Reason, last.Message)
	return last
}

func statValue(t *testing.T, reply, name string) int {
	t.Helper()
	f := strings.TrimPrefix(statsLine(reply, name), name+"=")
	n, err := strconv.Atoi(f)
	if err != nil {
		t.Fatalf("no stat %s in %q", name, reply)
	}
	return n
}

// memcg is what a container's memory cgroup (v1) charges.
type memcg struct {
	usage, limit, rss, shmem, mappedFile int64
}

func (m memcg) String() string {
	return fmt.Sprintf("usage %d MiB (limit %d MiB): rss %d MiB, shmem %d MiB, mapped_file %d MiB",
		m.usage>>20, m.limit>>20, m.rss>>20, m.shmem>>20, m.mappedFile>>20)
}

// memcgOf reads the memory cgroup of the pod's memcached process: its pid
// from the runtime, its cgroup from /proc.
func memcgOf(t *testing.T, pod *corev1.Pod) memcg {
	t.Helper()
	out, err := node.Crictl(context.Background(), "inspect", containerID(pod))
	must(t, err)
	var info struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	must(t, json.Unmarshal([]byte(out), &info))
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.Info.Pid))
	must(t, err)
	var dir string
	for _, l := range strings.Split(string(cg), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.Contains(","+f[1]+",", ",memory,") {
			dir = filepath.Join("/sys/fs/cgroup/memory", f[2])
		}
	}
	if dir == "" {
		t.Fatalf("no memory cgroup in %s", cg)
	}
	read := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(dir, name))
		must(t, err)
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	m := memcg{usage: read("memory.usage_in_bytes"), limit: read("memory.limit_in_bytes")}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	must(t, err)
	for _, l := range strings.Split(string(stat), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "rss":
			m.rss = n
		case "shmem":
			m.shmem = n
		case "mapped_file":
			m.mappedFile = n
		}
	}
	return m
}
