package memcached

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
)

// TestRealMemcachedAcceptsGeneratedArgs proves the command line the
// controller generates with a real memcached (the Debian package): it takes
// the args from the Deployment the controller built, starts memcached with
// them on a free port and checks `stats settings` over the text protocol.
func TestRealMemcachedAcceptsGeneratedArgs(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Fatalf("memcached is not installed (apt-get install -y memcached): %v", err)
	}
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		want map[string]string
	}{
		{
			name: "explicit settings",
			spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](100), MaxConnections: 321, Threads: 3, MaxItemSizeKiB: 2048,
				ExtraArgs: []string{"-o", "no_lru_crawler"}},
			want: map[string]string{"maxbytes": strconv.Itoa(100 << 20), "maxconns": "321", "num_threads": "3",
				"item_size_max": strconv.Itoa(2048 << 10), "udpport": "0", "lru_crawler": "no"},
		},
		{
			name: "memory derived from the limit, verbose",
			spec: cachev1alpha1.MemcachedSpec{Verbosity: 2, MaxConnections: 50, Threads: 1,
				Resources: memoryLimitOf("256Mi")},
			want: map[string]string{"maxbytes": strconv.Itoa((256 - 25) << 20), "maxconns": "50", "num_threads": "1",
				"item_size_max": strconv.Itoa(1024 << 10), "verbosity": "2"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			name := fmt.Sprintf("real%d", i)
			create(t, newMemcached(ns, name, tt.spec))
			args := deploymentArgs(t, ns, name)

			port, err := cluster.FreePort()
			g.Expect(err).NotTo(HaveOccurred())
			args = withPort(args, port)
			if os.Geteuid() == 0 {
				// memcached refuses to run as root without -u; the pod runs
				// as the non-root user of the image instead.
				args = append(args, "-u", unprivilegedUser(t))
			}
			ctx, cancel := context.WithCancel(context.Background())
			cmd := exec.CommandContext(ctx, bin, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			g.Expect(cmd.Start()).To(Succeed())
			t.Cleanup(func() { cancel(); _ = cmd.Wait() })

			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			var conn net.Conn
			g.Eventually(func() error {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				conn = c
				return err
			}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(Succeed(), "memcached %v: %s", args, &stderr)
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			rd := bufio.NewReader(conn)

			// It serves: a set and a get round-trip.
			fmt.Fprintf(conn, "set k 0 0 5\r\nhello\r\n")
			g.Expect(readLine(rd)).To(Equal("STORED"))
			fmt.Fprintf(conn, "get k\r\n")
			g.Expect(readLine(rd)).To(Equal("VALUE k 0 5"))
			g.Expect(readLine(rd)).To(Equal("hello"))
			g.Expect(readLine(rd)).To(Equal("END"))

			// It runs with the settings the spec asked for.
			fmt.Fprintf(conn, "stats settings\r\n")
			stats := map[string]string{}
			for {
				line := readLine(rd)
				if line == "END" {
					break
				}
				f := strings.Fields(line)
				g.Expect(f).To(HaveLen(3), "line %q", line)
				stats[f[1]] = f[2]
			}
			for k, v := range tt.want {
				g.Expect(stats).To(HaveKeyWithValue(k, v), "stats settings %s", k)
			}
			g.Expect(stats).To(HaveKeyWithValue("tcpport", strconv.Itoa(port)))
		})
	}
}

func readLine(rd *bufio.Reader) string {
	s, err := rd.ReadString('\n')
	if err != nil {
		return "read error: " + err.Error()
	}
	return strings.TrimRight(s, "\r\n")
}

// withPort replaces the value of -p (the container port) with port.
func withPort(args []string, port int) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "-p" {
			out[i+1] = strconv.Itoa(port)
		}
	}
	return out
}

func unprivilegedUser(t *testing.T) string {
	for _, name := range []string{"memcache", "nobody"} {
		if _, err := user.Lookup(name); err == nil {
			return name
		}
	}
	t.Fatal("running as root and neither user memcache nor nobody exists")
	return ""
}
