package alerts

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestQueryQuotesOnlyTheNamespace(t *testing.T) {
	for _, tc := range []struct{ ns, want string }{
		{"team-a", `count by (alertname) (ALERTS{alertstate="firing",namespace="team-a"})`},
		// Not a namespace name the apiserver allows; quoted all the same.
		{`x"} or vector(1) or ALERTS{namespace="y`, `count by (alertname) (ALERTS{alertstate="firing",namespace="x\"} or vector(1) or ALERTS{namespace=\"y"})`},
		{"a\\b\n", `count by (alertname) (ALERTS{alertstate="firing",namespace="a\\b\n"})`},
	} {
		if got := Query(tc.ns); got != tc.want {
			t.Errorf("Query(%q) = %s, want %s", tc.ns, got, tc.want)
		}
	}
}

func TestParseAnswer(t *testing.T) {
	long := strings.Repeat("e", 5000)
	for _, tc := range []struct {
		name        string
		code        int
		body        string
		want        []string
		err         string
		unreachable bool
	}{
		{name: "firing", code: 200, body: `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"alertname":"Zed"},"value":[1,"1"]},{"metric":{"alertname":"HighErrors"},"value":[1,"3"]},{"metric":{"alertname":"Zed"},"value":[1,"1"]}]}}`,
			want: []string{"HighErrors", "Zed"}},
		{name: "none", code: 200, body: `{"status":"success","data":{"resultType":"vector","result":[]}}`, want: []string{}},
		// A name carrying matchers is just a string that matches no
		// policy's name (the caller compares exactly).
		{name: "odd names", code: 200, body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"alertname":"A\",namespace=~\".*"},"value":[1,"1"]}]}}`,
			want: []string{`A",namespace=~".*`}},
		{name: "garbage", code: 200, body: `<html>nginx</html>`, err: "not a query result"},
		{name: "truncated", code: 200, body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":`, err: "not a query result"},
		{name: "status error", code: 200, body: `{"status":"error","errorType":"execution","error":"boom"}`, err: `status "error": execution: boom`},
		{name: "matrix", code: 200, body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`, err: `a "matrix", not a vector`},
		{name: "no alertname", code: 200, body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}`, err: "without alertname"},
		{name: "data not an object", code: 200, body: `{"status":"success","data":"vector"}`, err: "not a query result"},
		{name: "bad request", code: 400, body: `{"status":"error","errorType":"bad_data","error":"parse error"}`, err: "HTTP 400: bad_data: parse error"},
		{name: "unavailable", code: 503, body: `Service Unavailable`, err: "HTTP 503", unreachable: true},
		{name: "too many", code: 429, body: ``, err: "HTTP 429", unreachable: true},
		{name: "redirect", code: 302, body: ``, err: "HTTP 302"},
		{name: "hostile error text", code: 422, body: `{"status":"error","errorType":"x","error":"line1\nline2` + long + `"}`, err: "line1 line2eee"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAnswer(tc.code, []byte(tc.body))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("%q, want %q", got, tc.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
			if e.Unreachable != tc.unreachable {
				t.Errorf("unreachable %v, want %v", e.Unreachable, tc.unreachable)
			}
			if len(err.Error()) > 2*maxErrorText || strings.Contains(err.Error(), "\n") {
				t.Errorf("message not clipped to one short line: %d bytes", len(err.Error()))
			}
		})
	}
}

func TestNewClientRefusesWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Settings{
		{URL: "ftp://prometheus:21"},
		{URL: "http://"},
		{URL: "prometheus:9090"},
		{URL: "http://prometheus:9090/?query=up"},
		{URL: "http://prometheus:9090/#x"},
		{URL: "https://prometheus:9090", CAFile: filepath.Join(dir, "missing")},
		{URL: "https://prometheus:9090", CAFile: notPEM},
		{URL: "http://prometheus:9090", BearerTokenFile: filepath.Join(dir, "missing")},
	} {
		if _, err := NewClient(s); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	if _, err := NewClient(Settings{URL: "http://prometheus.monitoring.svc:9090/prom/"}); err != nil {
		t.Error(err)
	}
}

// prometheusStub answers /api/v1/query under prefix with handle.
func prometheusStub(t *testing.T, prefix string, handle func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != prefix+"/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestFiringAsksForTheNamespaceWithTheToken(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		if err := os.WriteFile(token, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first\n")
	var mu sync.Mutex
	var auths, queries []string
	srv := prometheusStub(t, "/prom", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auths = append(auths, r.Header.Get("Authorization"))
		queries = append(queries, r.URL.Query().Get("query"))
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"alertname":"HighErrors"},"value":[1,"2"]}]}}`)
	})
	c, err := NewClient(Settings{URL: srv.URL + "/prom", BearerTokenFile: token})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Firing(context.Background(), "team-a")
	if err != nil || fmt.Sprint(got) != "[HighErrors]" {
		t.Fatalf("%v %v", got, err)
	}
	write("rotated")
	if _, err := c.Firing(context.Background(), "team-b"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(auths) != "[Bearer first Bearer rotated]" {
		t.Errorf("Authorization %q: the token is read before each query", auths)
	}
	if queries[0] != Query("team-a") || queries[1] != Query("team-b") {
		t.Errorf("queries %q", queries)
	}
}

// TestFiringBoundsHostileAnswers: a huge body, a slow server, a redirect
// and a closed port each give an error (the restarts wait) within the
// bounds, with messages that name no address.
func TestFiringBoundsHostileAnswers(t *testing.T) {
	huge := prometheusStub(t, "", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`)
		row := `{"metric":{"alertname":"` + strings.Repeat("A", 1000) + `"},"value":[1,"1"]},`
		for range 4096 { // 4 MiB, past the 64 KiB bound
			if _, err := fmt.Fprint(w, row); err != nil {
				return
			}
		}
	})
	release := make(chan struct{})
	defer close(release)
	slow := prometheusStub(t, "", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	redirect := prometheusStub(t, "", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
	})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name, url, err string
		unreachable    bool
	}{
		{"huge", huge.URL, "larger than 65536 bytes", false},
		{"slow", slow.URL, "did not answer within 200ms", true},
		{"redirect", redirect.URL, "HTTP 302", false},
		{"closed", closed.URL, "could not be reached", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(Settings{URL: tc.url, Timeout: 200 * time.Millisecond, MaxResponseBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = c.Firing(context.Background(), "team-a")
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.err) || e.Unreachable != tc.unreachable {
				t.Fatalf("error %v (%#v), want %q unreachable=%v", err, e, tc.err, tc.unreachable)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %s", took)
			}
			if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "query=") {
				t.Errorf("message names the address or query: %v", err)
			}
		})
	}
}

func TestFiringOverTLSWithTheCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Settings{URL: srv.URL, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Firing(context.Background(), "ns"); err != nil {
		t.Fatal(err)
	}
	without, err := NewClient(Settings{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := without.Firing(context.Background(), "ns"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unknown CA was accepted: %v", err)
	}
}
