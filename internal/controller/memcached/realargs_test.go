package memcached

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// The extraArgs validator against the real memcached. Every vector is
// judged by the controller (the CRD's CEL rule, then resolveSettings), and
// every vector is also run: memcached is started with the command line the
// controller would build for it (the managed arguments, then the vector;
// for a refused vector, what would have run without the check) and its
// `stats settings` are compared with the spec. An accepted vector must
// leave every managed setting as the spec says; a refused one shows what
// it would have done: a managed setting changed, or memcached exits.

// vectorSpec is the spec every vector runs with: every managed setting
// away from memcached's own default, so an override to the default shows.
func vectorSpec(ctx string, extra []string) cachev1alpha1.MemcachedSpec {
	spec := cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](96), MaxConnections: 200, Threads: 2, MaxItemSizeKiB: 2048, ExtraArgs: extra}
	switch ctx {
	case "tls":
		spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "cert"}
	case "mtls":
		spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "cert", ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cert"}}
	case "auth":
		spec.Auth = &cachev1alpha1.AuthSpec{SecretName: "users"}
	}
	return spec
}

// argsVector is one extraArgs vector. layer is who refuses it: "cel" (the
// CRD, at admission), "controller" (Degraded/InvalidSpec) or "" (accepted).
// In args, {port2} is a second free port and {dir} a scratch directory;
// at says where the server then listens: "" the pod's port, "port2", or
// "unix" ({dir}/mc.sock). keeps is why a refused vector leaves memcached's
// managed settings alone although it is refused.
type argsVector struct {
	name  string
	ctx   string
	args  []string
	layer string
	at    string
	keeps string
}

var argsVectors = []argsVector{
	// Accepted: tuning that leaves every managed setting alone.
	{name: "a flag", args: []string{"-M"}},
	{name: "bundled flags", args: []string{"-MCF"}},
	{name: "long flag", args: []string{"--disable-evictions"}},
	{name: "unambiguous prefix of a free flag", args: []string{"--disable-e"}},
	{name: "separate value", args: []string{"-R", "40"}},
	{name: "attached value", args: []string{"-R40"}},
	{name: "bundle ending in a free option's value", args: []string{"-MR40"}},
	{name: "--opt=value", args: []string{"--max-reqs-per-event=40"}},
	{name: "prefix and the next argument", args: []string{"--max-reqs", "40"}},
	{name: "sub-options", args: []string{"-o", "modern,no_lru_crawler,idle_timeout=30"}},
	{name: "attached sub-options", args: []string{"-omodern,track_sizes"}},
	{name: "--extended=", args: []string{"--extended=hash_algorithm=jenkins"}},
	{name: "a value that looks like a managed option", args: []string{"-D", "-m"}, layer: "cel",
		keeps: "the CRD's rule judges each argument alone, so it refuses a value that looks like a managed option (write -D: or -D=)"},
	{name: "-- ends the options", args: []string{"--", "-m", "1", "-t", "9"}, layer: "cel",
		keeps: "the CRD's rule judges each argument alone and refuses what follows -- too"},
	{name: "a value that looks like a free option", args: []string{"-D", "-M"}},
	{name: "a stray word, then a flag", args: []string{"stray", "-M"}},
	{name: "growth factor and backlog", args: []string{"-f", "1.5", "-n", "64", "-b", "512"}},
	{name: "protocol without auth", args: []string{"--protocol=ascii"}},
	{name: "ascii protocol with auth", ctx: "auth", args: []string{"-B", "ascii"}},
	{name: "TLS tuning with TLS", ctx: "tls", args: []string{"-o", "ssl_ciphers=ECDHE+AESGCM,ssl_session_cache"}},
	{name: "TLS tuning with mutual TLS", ctx: "mtls", args: []string{"--extended=ssl_wbuf_size=32"}},

	// Refused at admission by the CRD's rule.
	{name: "the issue's bundle", args: []string{"-Mm1048576"}, layer: "cel"},
	{name: "the issue's memory prefix", args: []string{"--memory-limi=99999"}, layer: "cel"},
	{name: "the issue's threads prefix", args: []string{"--threa=5000"}, layer: "cel"},
	{name: "memory, separate value", args: []string{"--memory-limit", "128"}, layer: "cel"},
	{name: "threads, attached", args: []string{"-t3"}, layer: "cel"},
	{name: "threads, one-letter prefix", args: []string{"--t", "3"}, layer: "cel"},
	{name: "connections in a bundle", args: []string{"-Mc", "150"}, layer: "cel"},
	{name: "connections, prefix", args: []string{"--conn=150"}, layer: "cel"},
	{name: "port in a bundle", args: []string{"-Mp", "{port2}"}, layer: "cel", at: "port2"},
	{name: "port, long", args: []string{"--port={port2}"}, layer: "cel", at: "port2"},
	{name: "UDP, prefix", args: []string{"--ud={port2}"}, layer: "cel"},
	{name: "listen address", args: []string{"-l", "127.0.0.1"}, layer: "cel"},
	{name: "item size, prefix", args: []string{"--max-i=4m"}, layer: "cel"},
	{name: "verbosity bundle", args: []string{"-vv"}, layer: "cel"},
	{name: "verbosity prefix", args: []string{"--verb"}, layer: "cel"},
	{name: "unix socket", args: []string{"-s", "{dir}/mc.sock"}, layer: "cel", at: "unix"},
	{name: "unix mask", args: []string{"-a", "777"}, layer: "cel"},
	{name: "TLS without certificates", args: []string{"-Z"}, layer: "cel"},
	{name: "TLS, long", args: []string{"--enable-ssl"}, layer: "cel"},
	{name: "SASL", args: []string{"-S"}, layer: "cel"},
	{name: "SASL in a bundle", args: []string{"-MS"}, layer: "cel"},
	{name: "auth file", args: []string{"-Y", "{dir}/users"}, layer: "cel"},
	{name: "auth file, prefix", args: []string{"--auth-f={dir}/users"}, layer: "cel"},
	{name: "version exits", args: []string{"-V"}, layer: "cel"},
	{name: "help exits", args: []string{"-h"}, layer: "cel"},
	{name: "license exits", args: []string{"--lic"}, layer: "cel"},

	// Refused by the controller, which reads the whole command line.
	{name: "threads after a free option", args: []string{"-o", "modern", "--threa=3"}, layer: "cel"},
	{name: "ambiguous verbose/version prefix", args: []string{"--ver"}, layer: "controller"},
	{name: "memory as the next argument of a bundle", args: []string{"-Mm", "128"}, layer: "cel"},
	{name: "ambiguous prefix", args: []string{"--liste=x"}, layer: "controller"},
	{name: "unknown option", args: []string{"-q"}, layer: "controller"},
	{name: "missing value", args: []string{"-R"}, layer: "controller"},
	{name: "certificate sub-option", ctx: "tls", args: []string{"-o", "ssl_chain_cert={dir}/other.crt"}, layer: "controller"},
	{name: "key sub-option after others", ctx: "tls", args: []string{"-o", "modern,ssl_key={dir}/other.key"}, layer: "controller"},
	{name: "client verification off", ctx: "mtls", args: []string{"-o", "ssl_verify_mode=0"}, layer: "controller"},
	{name: "client CA replaced", ctx: "mtls", args: []string{"-ossl_ca_cert={dir}/other.crt"}, layer: "controller"},
	{name: "TLS 1.0 allowed", ctx: "tls", args: []string{"--extended=ssl_min_version=0"}, layer: "controller"},
	{name: "TLS 1.0 through a prefix", ctx: "tls", args: []string{"--ext", "ssl_min_version=0"}, layer: "controller"},
	// 1.6.18 refuses the name after a blank; 1.6.38, the default image,
	// strips the blank and turns verification off.
	{name: "a blank before a sub-option", ctx: "mtls", args: []string{"-o", " ssl_verify_mode=0"}, layer: "controller"},
	{name: "binary protocol with auth", ctx: "auth", args: []string{"-B", "binary"}, layer: "controller"},
	{name: "auto protocol with auth", ctx: "auth", args: []string{"--protocol=auto"}, layer: "controller"},
	{name: "proxy mode", args: []string{"-o", "proxy_config={dir}/proxy.lua"}, layer: "controller"},
}

func TestExtraArgsVectorsAgainstRealMemcached(t *testing.T) {
	if n := len(argsVectors); n < 30 {
		t.Fatalf("%d vectors, want at least 30", n)
	}
	ca := newTestCA(t, "CA")
	client := statsClient{ca: ca, cert: ca.clientCert(t, "stats")}
	secrets := byName(tlsSecret(t, "cert", ca), authSecret("users", "app:pw\n"))
	cel := regexp.MustCompile(celExtraArgsPattern())
	for _, v := range argsVectors {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			// Writable for the user memcached drops to (a socket, files).
			for _, d := range []string{dir, filepath.Dir(dir)} {
				if err := os.Chmod(d, 0o777); err != nil {
					t.Fatal(err)
				}
			}
			port2 := freePort(t)
			args := make([]string, len(v.args))
			for i, a := range v.args {
				args[i] = strings.NewReplacer("{port2}", strconv.Itoa(port2), "{dir}", dir).Replace(a)
			}
			mc := realMemcached(vectorSpec(v.ctx, args))
			s, err := resolveSettings(&mc.Spec)
			layer := judge(cel, args, err)
			if layer != v.layer {
				t.Fatalf("%q is judged by %q (error: %v), want %q", args, layer, err, v.layer)
			}
			p := renderPod(t, mc, s, secrets)
			got, effect := runVector(t, p, v, client, dir, port2)
			switch {
			case layer == "" && effect != "":
				t.Fatalf("accepted, but memcached %s", effect)
			case layer != "" && effect == "" && v.keeps == "":
				t.Fatalf("refused (%v), but memcached keeps every managed setting with it: %v", err, got)
			case layer != "" && effect != "" && v.keeps != "":
				t.Fatalf("said to keep the managed settings (%s), but memcached %s", v.keeps, effect)
			}
			t.Logf("%s: %q: %s", cmpOr(layer, "accepted"), args, cmpOr(effect, "managed settings as the spec says"))
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// judge says who refuses args: the CRD rule (any argument matches its
// pattern), else the controller (resolveSettings' error), else nobody.
func judge(cel *regexp.Regexp, args []string, err error) string {
	for _, a := range args {
		if cel.MatchString(a) {
			return "cel"
		}
	}
	if err != nil {
		var invalid *invalidSpecError
		if errors.As(err, &invalid) {
			return "controller"
		}
		return "error: " + err.Error()
	}
	return ""
}

// runVector starts memcached with the pod's args and returns its managed
// settings and, when they are not what the spec says, how ("" when they
// are).
func runVector(t *testing.T, p *testPod, v argsVector, client statsClient, dir string, port2 int) (map[string]string, string) {
	t.Helper()
	res := startVector(t, p.args, v.at, dir, port2)
	if res.exited {
		return nil, "exits at start: " + firstLine(res.srv.output())
	}
	addr, network := res.srv.addr, "tcp"
	switch v.at {
	case "port2":
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port2))
	case "unix":
		addr, network = dir+"/mc.sock", "unix"
	}
	st, err := client.managedStats(network, addr, v.ctx)
	if err != nil {
		return nil, "cannot be used as the spec says: " + err.Error()
	}
	want := expectedSettings(v.ctx, p.root, portOf(t, res.srv.addr))
	var diffs []string
	for k, w := range want {
		if st[k] != w {
			diffs = append(diffs, fmt.Sprintf("%s %s (spec: %s)", k, st[k], w))
		}
	}
	if len(diffs) > 0 {
		return st, "runs with " + strings.Join(diffs, ", ")
	}
	return st, ""
}

// startVector starts memcached like startArgs, but a vector that moves the
// listener is waited for where it listens.
func startVector(t *testing.T, args []string, at, dir string, port2 int) startResult {
	t.Helper()
	if at == "" {
		return startArgs(t, args)
	}
	res := startDetached(t, args, freePort(t))
	var network, addr string
	switch at {
	case "port2":
		network, addr = "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port2))
	case "unix":
		network, addr = "unix", dir+"/mc.sock"
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-res.srv.done:
			return startResult{srv: res.srv, exited: true}
		default:
		}
		if c, err := net.DialTimeout(network, addr, time.Second); err == nil {
			_ = c.Close()
			return res
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("memcached %q does not listen on %s %s after 15s: %s", args, network, addr, res.srv.output())
	return res
}

// startDetached starts memcached without waiting for its port.
func startDetached(t *testing.T, args []string, port int) startResult {
	t.Helper()
	srv := launch(t, withPort(t, args, port), port)
	return startResult{srv: srv}
}

// statsClient is a client of the vectors' spec: it trusts the server's CA
// and has a certificate of it.
type statsClient struct {
	ca   *testCA
	cert tls.Certificate
}

// managedStats reads `stats settings` as a client of the spec would:
// over TLS with TLS, with a client certificate with mutual TLS, after
// authenticating with auth.
func (sc statsClient) managedStats(network, addr, ctx string) (map[string]string, error) {
	var c *mcConn
	var err error
	switch ctx {
	case "tls", "mtls":
		cfg := trusting(sc.ca)
		if ctx == "mtls" {
			cfg.Certificates = []tls.Certificate{sc.cert}
		}
		c, err = dialTLSNetwork(network, addr, cfg)
	default:
		c, err = dialNetwork(network, addr)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if ctx == "auth" {
		if r, err := c.authenticate("app", "pw"); err != nil || r != "STORED" {
			return nil, fmt.Errorf("authenticating: %q, %v", r, err)
		}
	}
	return c.statsSettings()
}

// expectedSettings are the managed settings of vectorSpec(ctx) as
// `stats settings` shows them, for a pod rendered under root on port.
func expectedSettings(ctx, root string, port int) map[string]string {
	want := map[string]string{
		"maxbytes": strconv.Itoa(96 << 20), "maxconns": "200", "num_threads": "2", "item_size_max": strconv.Itoa(2048 << 10),
		"tcpport": strconv.Itoa(port), "udpport": "0", "inter": "NULL", "domain_socket": "NULL", "umask": "700",
		"verbosity": "0", "auth_enabled_sasl": "no", "auth_enabled_ascii": "no", "ssl_enabled": "no",
	}
	switch ctx {
	case "tls", "mtls":
		want["ssl_enabled"] = "yes"
		want["ssl_chain_cert"] = root + tlsDir + "/tls.crt"
		want["ssl_key"] = root + tlsDir + "/tls.key"
		want["ssl_min_version"] = "tlsv1.2"
		want["ssl_verify_mode"], want["ssl_ca_cert"] = "0", "NULL"
		if ctx == "mtls" {
			// ssl_verify_mode=2 shows as OpenSSL's flags: SSL_VERIFY_PEER |
			// SSL_VERIFY_FAIL_IF_NO_PEER_CERT.
			want["ssl_verify_mode"], want["ssl_ca_cert"] = "3", root+tlsDir+"/"+clientCAFile
		}
	case "auth":
		want["auth_enabled_ascii"] = root + authDir + "/authfile"
		want["binding_protocol"] = "ascii"
	}
	return want
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
