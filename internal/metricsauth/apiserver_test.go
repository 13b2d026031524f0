package metricsauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/runbook-dev/runbook/test/testenv"
)

// TestFilterAgainstAPIServer: on a real apiserver (envtest, RBAC
// authorization), a ServiceAccount bound to a ClusterRole allowing `get`
// on /metrics is served, another ServiceAccount is forbidden, and a token
// the apiserver did not issue is unauthenticated. The filter is built the
// way the metrics server builds it, from the REST config and HTTP client.
func TestFilterAgainstAPIServer(t *testing.T) {
	testenv.SkipUnderShort(t, "an apiserver (envtest)")
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	env, err := testenv.Start(testenv.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(env.Config)

	const ns = "metricsauth"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metricsauth-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metricsauth-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metricsauth-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	token := func(sa string) string {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")

	hc, err := rest.HTTPClientFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	// A short TTL: RBAC changes reach the authorizer's cache quickly, and a
	// decision taken before the binding was seen expires.
	filter, err := FilterProvider(Options{TTL: 100 * time.Millisecond})(env.Config, hc)
	g.Expect(err).NotTo(HaveOccurred())
	h, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	defer srv.Close()
	status := func(path, tok string) func() int {
		return func() int {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
			g.Expect(err).NotTo(HaveOccurred())
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				return 0
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
	}

	g.Eventually(status("/metrics", scraper)).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
	g.Expect(status("/metrics", stranger)()).To(Equal(http.StatusForbidden))
	g.Expect(status("/other", scraper)()).To(Equal(http.StatusForbidden))
	g.Expect(status("/metrics", "not-a-token")()).To(Equal(http.StatusUnauthorized))
	g.Expect(status("/metrics", "")()).To(Equal(http.StatusUnauthorized))
}
