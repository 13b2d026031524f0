// Package metricsauth guards the manager's metrics endpoint: only a caller
// whose bearer token the apiserver authenticates (a TokenReview) and who
// may get the requested non-resource URL (a SubjectAccessReview, e.g.
// `get` on /metrics) is served. It does what controller-runtime's
// metrics/filters does through client-go's typed clients alone; that
// package links k8s.io/apiserver (with CEL, OpenTelemetry, konnectivity and
// component-base), a large share of the binary and of the manager's fixed
// resident memory (test/bench/startup; figures in test/bench/RESULTS.md),
// for two API calls.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Defaults of Options.
const (
	// DefaultTTL: a scrape every 15 s costs at most one TokenReview and one
	// SubjectAccessReview, and a revoked token or permission stops working
	// within 10 s.
	DefaultTTL = 10 * time.Second
	// DefaultMaxEntries bounds the decisions kept (a few hundred bytes
	// each): callers sending random tokens cannot grow the manager.
	DefaultMaxEntries = 1024
	// DefaultTimeout bounds each review, so a slow apiserver does not pile
	// up scrapes.
	DefaultTimeout = 10 * time.Second
)

// Options tune an Authorizer; zero values take the defaults.
type Options struct {
	// TTL is how long a decision (allowed, unauthenticated or forbidden) is
	// reused for the same token, verb and path.
	TTL time.Duration
	// MaxEntries is the most decisions kept at once.
	MaxEntries int
	// Timeout bounds each review request.
	Timeout time.Duration
	// Clock is the cache's time source (a fake one in tests).
	Clock clock.PassiveClock
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Authorizer decides whether a request may be served, asking the
// apiserver and remembering its answers for a while.
type Authorizer struct {
	tokens    authnclient.TokenReviewInterface
	access    authzclient.SubjectAccessReviewInterface
	decisions *decisionCache
	timeout   time.Duration
}

// New returns an Authorizer asking tokens for TokenReviews and access for
// SubjectAccessReviews (a clientset's AuthenticationV1() and
// AuthorizationV1()).
func New(tokens authnclient.TokenReviewsGetter, access authzclient.SubjectAccessReviewsGetter, opts Options) *Authorizer {
	opts = opts.withDefaults()
	return &Authorizer{
		tokens:    tokens.TokenReviews(),
		access:    access.SubjectAccessReviews(),
		decisions: newDecisionCache(opts.MaxEntries, opts.TTL, opts.Clock),
		timeout:   opts.Timeout,
	}
}

// FilterProvider is a metrics server's FilterProvider
// (metricsserver.Options) built on the manager's own REST config and HTTP
// client.
func FilterProvider(opts Options) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		authn, err := authnclient.NewForConfigAndClient(cfg, hc)
		if err != nil {
			return nil, fmt.Errorf("token review client: %w", err)
		}
		authz, err := authzclient.NewForConfigAndClient(cfg, hc)
		if err != nil {
			return nil, fmt.Errorf("subject access review client: %w", err)
		}
		return New(authn, authz, opts).Filter, nil
	}
}

// Filter wraps next: 401 without a bearer token or with one the apiserver
// does not authenticate, 403 when its user may not use the request's verb
// (the method in lower case) on its path, 500 when the apiserver could not
// answer; next serves the rest.
func (a *Authorizer) Filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req.Header.Get("Authorization"))
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		d, err := a.decide(req.Context(), token, strings.ToLower(req.Method), req.URL.Path)
		if err != nil {
			log.Error(err, "Checking a metrics request failed")
			http.Error(w, "Authentication or authorization failed", http.StatusInternalServerError)
			return
		}
		switch d.status {
		case http.StatusUnauthorized:
			log.V(4).Info("Unauthenticated metrics request")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case http.StatusForbidden:
			log.V(4).Info("Metrics request denied", "user", d.user, "reason", d.reason)
			http.Error(w, "Authorization denied for user "+d.user, http.StatusForbidden)
		default:
			next.ServeHTTP(w, req)
		}
	}), nil
}

// bearerToken is the token of an "Authorization: Bearer <token>" header
// (the scheme's case ignored, as the apiserver does).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// decision is the outcome of the reviews of one token, verb and path.
type decision struct {
	status int // http.StatusOK, StatusUnauthorized or StatusForbidden
	user   string
	reason string
}

// decide answers from the cache or asks the apiserver. Failed reviews are
// not remembered: the next scrape asks again.
func (a *Authorizer) decide(ctx context.Context, token, verb, path string) (decision, error) {
	key := decisionKey(token, verb, path)
	if d, ok := a.decisions.get(key); ok {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	d, err := a.review(ctx, token, verb, path)
	if err != nil {
		return decision{}, err
	}
	a.decisions.put(key, d)
	return d, nil
}

func (a *Authorizer) review(ctx context.Context, token, verb, path string) (decision, error) {
	tr, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return decision{status: http.StatusUnauthorized}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("subject access review for %s: %w", u.Username, err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return decision{status: http.StatusForbidden, user: u.Username, reason: sar.Status.Reason}, nil
	}
	return decision{status: http.StatusOK, user: u.Username}, nil
}

// decisionKey identifies a token, verb and path without keeping the token
// in memory.
func decisionKey(token, verb, path string) [sha256.Size]byte {
	return sha256.Sum256([]byte(verb + "\x00" + path + "\x00" + token))
}
