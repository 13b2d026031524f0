package metricsauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// apiserver is a fake clientset answering reviews: tokens maps a valid
// token to its user, allowed lists the users who may get /metrics, and
// the counters say how many reviews were asked.
type apiserver struct {
	cs       *fake.Clientset
	tokens   map[string]string
	allowed  map[string]bool
	fail     bool
	reviews  atomic.Int32
	accesses atomic.Int32
	lastSAR  atomic.Pointer[authorizationv1.SubjectAccessReviewSpec]
}

func newAPIServer() *apiserver {
	a := &apiserver{
		cs:      fake.NewClientset(),
		tokens:  map[string]string{"good": "alice", "reader": "bob"},
		allowed: map[string]bool{"bob": true},
	}
	a.cs.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.reviews.Add(1)
		if a.fail {
			return true, nil, errors.New("apiserver unavailable")
		}
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if user, ok := a.tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: user, UID: "uid-" + user, Groups: []string{"system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"scope": {"x"}},
			}}
		}
		return true, tr, nil
	})
	a.cs.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.accesses.Add(1)
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		a.lastSAR.Store(&sar.Spec)
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = a.allowed[sar.Spec.User] && nr != nil && nr.Verb == "get" && nr.Path == "/metrics"
		return true, sar, nil
	})
	return a
}

func (a *apiserver) handler(t *testing.T, opts Options) http.Handler {
	t.Helper()
	h, err := New(a.cs.AuthenticationV1(), a.cs.AuthorizationV1(), opts).Filter(logr.Discard(),
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(h http.Handler, path, auth string) int {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestFilter(t *testing.T) {
	cases := []struct {
		name                string
		path, auth          string
		fail                bool
		want                int
		reviews, accesses   int32
		wantUser, wantGroup string
	}{
		{name: "no header", path: "/metrics", want: http.StatusUnauthorized},
		{name: "basic auth", path: "/metrics", auth: "Basic Ym9iOnB3", want: http.StatusUnauthorized},
		{name: "bearer without token", path: "/metrics", auth: "Bearer ", want: http.StatusUnauthorized},
		{name: "token with a space", path: "/metrics", auth: "Bearer a b", want: http.StatusUnauthorized},
		{name: "invalid token", path: "/metrics", auth: "Bearer nope", want: http.StatusUnauthorized, reviews: 1},
		{name: "valid, not allowed", path: "/metrics", auth: "Bearer good", want: http.StatusForbidden, reviews: 1, accesses: 1, wantUser: "alice"},
		{name: "allowed", path: "/metrics", auth: "Bearer reader", want: http.StatusOK, reviews: 1, accesses: 1, wantUser: "bob", wantGroup: "system:authenticated"},
		{name: "scheme in lower case", path: "/metrics", auth: "bearer reader", want: http.StatusOK, reviews: 1, accesses: 1},
		{name: "allowed user, other path", path: "/debug", auth: "Bearer reader", want: http.StatusForbidden, reviews: 1, accesses: 1},
		{name: "apiserver down", path: "/metrics", auth: "Bearer reader", fail: true, want: http.StatusInternalServerError, reviews: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPIServer()
			a.fail = tc.fail
			h := a.handler(t, Options{})
			if got := get(h, tc.path, tc.auth); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			if r, s := a.reviews.Load(), a.accesses.Load(); r != tc.reviews || s != tc.accesses {
				t.Fatalf("%d token reviews and %d access reviews, want %d and %d", r, s, tc.reviews, tc.accesses)
			}
			sar := a.lastSAR.Load()
			if tc.wantUser != "" && (sar == nil || sar.User != tc.wantUser || sar.UID != "uid-"+tc.wantUser || len(sar.Extra["scope"]) != 1) {
				t.Fatalf("access review for %+v, want user %s with its uid and extra", sar, tc.wantUser)
			}
			if tc.wantGroup != "" && (len(sar.Groups) != 1 || sar.Groups[0] != tc.wantGroup) {
				t.Fatalf("access review groups %v, want [%s]", sar.Groups, tc.wantGroup)
			}
		})
	}
}

// TestFilterCache: a decision is reused until its TTL (allowed, forbidden
// and unauthenticated alike), a failed review is not, and a scrape every
// 15 s costs one review of each kind.
func TestFilterCache(t *testing.T) {
	cases := []struct {
		name string
		auth string
		want int
		// reviews and accesses after the 3 requests within the TTL, then
		// after one more past it.
		reviews, accesses         int32
		reviewsAfter, accessAfter int32
	}{
		{name: "allowed", auth: "Bearer reader", want: http.StatusOK, reviews: 1, accesses: 1, reviewsAfter: 2, accessAfter: 2},
		{name: "forbidden", auth: "Bearer good", want: http.StatusForbidden, reviews: 1, accesses: 1, reviewsAfter: 2, accessAfter: 2},
		{name: "unauthenticated", auth: "Bearer nope", want: http.StatusUnauthorized, reviews: 1, reviewsAfter: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPIServer()
			clk := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
			h := a.handler(t, Options{Clock: clk})
			for range 3 {
				if got := get(h, "/metrics", tc.auth); got != tc.want {
					t.Fatalf("status %d, want %d", got, tc.want)
				}
				clk.SetTime(clk.Now().Add(DefaultTTL / 4))
			}
			if r, s := a.reviews.Load(), a.accesses.Load(); r != tc.reviews || s != tc.accesses {
				t.Fatalf("within the TTL: %d token and %d access reviews, want %d and %d", r, s, tc.reviews, tc.accesses)
			}
			clk.SetTime(clk.Now().Add(15 * time.Second))
			if got := get(h, "/metrics", tc.auth); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			if r, s := a.reviews.Load(), a.accesses.Load(); r != tc.reviewsAfter || s != tc.accessAfter {
				t.Fatalf("past the TTL: %d token and %d access reviews, want %d and %d", r, s, tc.reviewsAfter, tc.accessAfter)
			}
		})
	}

	t.Run("errors are not cached", func(t *testing.T) {
		a := newAPIServer()
		a.fail = true
		h := a.handler(t, Options{})
		for range 2 {
			if got := get(h, "/metrics", "Bearer reader"); got != http.StatusInternalServerError {
				t.Fatalf("status %d, want 500", got)
			}
		}
		if r := a.reviews.Load(); r != 2 {
			t.Fatalf("%d token reviews, want 2", r)
		}
	})
}

// TestFilterCacheBound: a flood of random tokens keeps at most MaxEntries
// decisions, and a caller seen recently is still served from the cache.
func TestFilterCacheBound(t *testing.T) {
	a := newAPIServer()
	const maxEntries = 64
	auth := New(a.cs.AuthenticationV1(), a.cs.AuthorizationV1(), Options{MaxEntries: maxEntries})
	h, err := auth.Filter(logr.Discard(), http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 * maxEntries {
		if got := get(h, "/metrics", fmt.Sprintf("Bearer random-%d", i)); got != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", got)
		}
		if n := auth.decisions.len(); n > maxEntries {
			t.Fatalf("%d decisions held after %d tokens, want at most %d", n, i+1, maxEntries)
		}
	}
	if n := auth.decisions.len(); n != maxEntries {
		t.Fatalf("%d decisions held, want %d", n, maxEntries)
	}
	before := a.reviews.Load()
	last := fmt.Sprintf("Bearer random-%d", 10*maxEntries-1)
	if get(h, "/metrics", last); a.reviews.Load() != before {
		t.Fatal("the most recent token was evicted")
	}
	if get(h, "/metrics", "Bearer random-0"); a.reviews.Load() != before+1 {
		t.Fatal("the oldest token was not evicted")
	}
}

func TestBearerToken(t *testing.T) {
	cases := []struct {
		header, token string
		ok            bool
	}{
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer    ", "", false},
		{"Bearer abc", "abc", true},
		{"  BEARER abc  ", "abc", true},
		{"Bearer abc def", "", false},
		{"Token abc", "", false},
		{"Bearerabc", "", false},
	}
	for _, tc := range cases {
		token, ok := bearerToken(tc.header)
		if token != tc.token || ok != tc.ok {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}
