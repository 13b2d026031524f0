package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The addresses the probe sample (config/samples/..._probe.yaml) checks.
// They are fixed because the sample names them; the manager is started with
// --probe-allow for the addresses the health server actually listens on.
const (
	healthHTTPAddr = "127.0.0.1:18080"
	healthTCPAddr  = "127.0.0.1:18081"
	healthGRPCAddr = "127.0.0.1:18082"
)

var probeNames = []string{"http", "tcp", "grpc"}

// healthServer is what the probe sample's three probes reach: an HTTP
// /healthz, a TCP port and a grpc.health.v1 server. Each can be made to fail
// on purpose, to watch the RebootPolicy restart nginx:
//
//	curl -X POST http://127.0.0.1:18080/fail/tcp    # and /heal/tcp
type healthServer struct {
	// addrs are the HTTP, TCP and gRPC addresses.
	addrs   healthAddrs
	mu      sync.Mutex
	failing map[string]bool
	http    *http.Server
	tcp     net.Listener
	grpc    *grpc.Server
	grpcH   *health.Server
}

// healthAddrs are where the health server listens.
type healthAddrs struct{ http, tcp, grpc string }

// demoHealthAddrs are the addresses the probe sample names.
var demoHealthAddrs = healthAddrs{http: healthHTTPAddr, tcp: healthTCPAddr, grpc: healthGRPCAddr}

// startDemoHealthServer listens on the addresses the probe sample names.
// When one of them is taken (another demo on this machine — a second clone,
// a test — or any other program), it listens on free loopback ports instead
// and reports moved: the demo then applies the probe sample with those ports
// and prints them, so two demos run side by side instead of one failing.
func startDemoHealthServer() (h *healthServer, moved bool, err error) {
	h, err = startHealthServer(demoHealthAddrs)
	if !errors.Is(err, syscall.EADDRINUSE) {
		return h, false, err
	}
	h, err = startHealthServer(healthAddrs{http: "127.0.0.1:0", tcp: "127.0.0.1:0", grpc: "127.0.0.1:0"})
	return h, err == nil, err
}

// startHealthServer listens on addrs (port 0: a free port); h.addrs are the
// addresses it listens on.
func startHealthServer(addrs healthAddrs) (*healthServer, error) {
	h := &healthServer{failing: map[string]bool{}, grpcH: health.NewServer()}
	listen := func(addr, what string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("the %s health endpoint of the probe sample needs %s: %w", what, addr, err)
		}
		return l, nil
	}
	hl, err := listen(addrs.http, "HTTP")
	if err != nil {
		return nil, err
	}
	if h.tcp, err = listen(addrs.tcp, "TCP"); err != nil {
		_ = hl.Close()
		return nil, err
	}
	gl, err := listen(addrs.grpc, "gRPC")
	if err != nil {
		_ = hl.Close()
		_ = h.tcp.Close()
		return nil, err
	}
	// The TCP endpoint "heals" by listening again on the same port.
	h.addrs = healthAddrs{http: hl.Addr().String(), tcp: h.tcp.Addr().String(), grpc: gl.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if h.isFailing("http") {
			http.Error(w, "failing on purpose (curl -X POST http://"+h.addrs.http+"/heal/http)", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /fail/{probe}", func(w http.ResponseWriter, r *http.Request) { h.set(w, r.PathValue("probe"), true) })
	mux.HandleFunc("POST /heal/{probe}", func(w http.ResponseWriter, r *http.Request) { h.set(w, r.PathValue("probe"), false) })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, h.describe()) })
	h.http = &http.Server{Handler: mux}
	go func() { _ = h.http.Serve(hl) }()
	go serveTCP(h.tcp)
	h.grpc = grpc.NewServer()
	healthpb.RegisterHealthServer(h.grpc, h.grpcH)
	h.grpcH.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	go func() { _ = h.grpc.Serve(gl) }()
	return h, nil
}

// serveTCP accepts and closes connections on l until it is closed. A TCP
// probe succeeds once the connection is established, so "tcp" fails by
// closing the listener (connection refused) and heals by listening again.
func serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}

// setTCP stops or resumes listening on the TCP address; h.mu is held.
func (h *healthServer) setTCP(fail bool) error {
	switch {
	case fail && h.tcp != nil:
		err := h.tcp.Close()
		h.tcp = nil
		return err
	case !fail && h.tcp == nil:
		l, err := net.Listen("tcp", h.addrs.tcp)
		if err != nil {
			return err
		}
		h.tcp = l
		go serveTCP(l)
	}
	return nil
}

func (h *healthServer) isFailing(probe string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failing[probe]
}

func (h *healthServer) set(w http.ResponseWriter, probe string, fail bool) {
	found := false
	for _, p := range probeNames {
		found = found || p == probe
	}
	if !found {
		http.Error(w, fmt.Sprintf("unknown probe %q: one of %s", probe, strings.Join(probeNames, ", ")), http.StatusNotFound)
		return
	}
	h.mu.Lock()
	h.failing[probe] = fail
	var err error
	if probe == "tcp" {
		err = h.setTCP(fail)
	}
	h.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if probe == "grpc" {
		st := healthpb.HealthCheckResponse_SERVING
		if fail {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		h.grpcH.SetServingStatus("", st)
	}
	_, _ = fmt.Fprint(w, h.describe())
}

func (h *healthServer) describe() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, p := range probeNames {
		st := "healthy"
		if h.failing[p] {
			st = "failing"
		}
		fmt.Fprintf(&b, "%-5s %s\n", p, st)
	}
	return b.String()
}

func (h *healthServer) Close() {
	_ = h.http.Close()
	h.mu.Lock()
	_ = h.setTCP(true)
	h.mu.Unlock()
	h.grpc.Stop()
}
