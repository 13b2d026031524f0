package rebootpolicy

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	corev1 "k8s.io/api/core/v1"
)

// externalServer stands for a dependency outside the cluster. Tests mount
// their handlers under a prefix of their own, so that one allowed address
// serves them all.
type externalServer struct {
	*httptest.Server
	mu       sync.Mutex
	handlers map[string]http.Handler
}

func startExternalServer() (*externalServer, error) {
	e := &externalServer{handlers: map[string]http.Handler{}}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	if e.Server == nil {
		return nil, fmt.Errorf("no external test server")
	}
	return e, nil
}

func (e *externalServer) serve(w http.ResponseWriter, r *http.Request) {
	prefix, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	e.mu.Lock()
	h := e.handlers["/"+prefix]
	e.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h.ServeHTTP(w, r)
}

// handle mounts h until the test ends and returns its path prefix.
func (e *externalServer) handle(t *testing.T, h http.Handler) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "/" + hex.EncodeToString(b)
	e.mu.Lock()
	e.handlers[prefix] = h
	e.mu.Unlock()
	t.Cleanup(func() {
		e.mu.Lock()
		delete(e.handlers, prefix)
		e.mu.Unlock()
	})
	return prefix
}

// get is an httpGet action for path on the external server.
func (e *externalServer) get(path string) *corev1.HTTPGetAction {
	host, port, _ := net.SplitHostPort(e.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return &corev1.HTTPGetAction{Host: host, Port: intstr.FromInt(p), Path: path}
}

// Trigger types as in the manager's metric labels.
const (
	typeSQL   = "sql"
	typeHTTP  = "httpGet"
	typeTCP   = "tcpSocket"
	typeWatch = "watch"
)

// probesRun is how many probes of type the manager has run so far.
func probesRun(t *testing.T, typ string) float64 {
	return counterSum(t, "runbook_rebootpolicy_probe_results_total", "type", typ)
}

// dialsDenied is how many dials the network policy refused by category.
func dialsDenied(t *testing.T, category string) float64 {
	return counterSum(t, "runbook_probe_dials_denied_total", "category", category)
}

func counterSum(t *testing.T, metric, label, value string) float64 {
	t.Helper()
	families, err := metricsRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// waitProbes waits until the manager has run n more probes of typ: the
// clock-free way to let several periods pass.
func waitProbes(t *testing.T, typ string, n int) {
	t.Helper()
	start := probesRun(t, typ)
	NewWithT(t).Eventually(func() float64 { return probesRun(t, typ) }, timeout, interval).
		Should(BeNumerically(">=", start+float64(n)))
}
