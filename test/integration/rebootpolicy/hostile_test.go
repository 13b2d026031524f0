package rebootpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

func tcpProbePolicy(name, host string, port int) autorebootv1alpha1.Policy {
	return autorebootv1alpha1.Policy{Name: name, Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: host, Port: intstr.FromInt(port)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}}}
}

func httpProbePolicy(name string, get *corev1.HTTPGetAction) autorebootv1alpha1.Policy {
	return autorebootv1alpha1.Policy{Name: name, Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: get}, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}}}
}

// createRestartableTarget creates a rolled-out Deployment "web" in ns.
func createRestartableTarget(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	dep := newDeployment(ns, "web")
	if err := k8s.Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	markRolledOut(t, dep)
	return dep
}

func webTarget() autorebootv1alpha1.TargetRef {
	return autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}
}

func expectNotRestarted(t *testing.T, ns, rbp string) {
	t.Helper()
	g := NewWithT(t)
	dep := &appsv1.Deployment{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, dep)).To(Succeed())
	g.Expect(restartedAt(dep)).To(BeEmpty(), "the target was restarted")
	g.Expect(getRBP(t, ns, rbp).Status.RestartCount).To(BeZero())
}

// createService creates a ClusterIP Service and returns its IP.
func createService(t *testing.T, ns, name string) string {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := k8s.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), svc) })
	if svc.Spec.ClusterIP == "" {
		t.Fatal("the apiserver gave the Service no cluster IP")
	}
	return svc.Spec.ClusterIP
}

func TestHostileNetworkMatrix(t *testing.T) {
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiHost, apiPortS, _ := net.SplitHostPort(u.Host)
	apiPort, _ := strconv.Atoi(apiPortS)
	// Without the policy these addresses answer: the manager's position
	// reaches the apiserver on loopback.
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("control: the apiserver does not answer on %s: %v", u.Host, err)
	}
	_ = conn.Close()
	other := createNamespace(t, "victim")
	otherIP := createService(t, other, "payments")
	redirect := external.handle(t, http.RedirectHandler(env.Config.Host+"/version", http.StatusFound))
	// At most maxPerNamespace policies per namespace: two namespaces.
	groups := [][]autorebootv1alpha1.Policy{{
		tcpProbePolicy("loopback", "127.0.0.1", apiPort),
		tcpProbePolicy("loopback-v6", "::1", apiPort),
		tcpProbePolicy("unspecified", "0.0.0.0", 3306),
		httpProbePolicy("by-name", &corev1.HTTPGetAction{Host: "localhost", Port: intstr.FromInt(apiPort), Path: "/readyz"}),
		httpProbePolicy("apiserver", &corev1.HTTPGetAction{Host: apiHost, Port: intstr.FromInt(apiPort), Path: "/version", Scheme: corev1.URISchemeHTTPS}),
		httpProbePolicy("redirect", external.get(redirect+"/")),
	}, {
		httpProbePolicy("metadata", &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt(80), Path: "/latest/meta-data/"}),
		tcpProbePolicy("metadata-mapped", "::ffff:169.254.169.254", 80),
		tcpProbePolicy("metadata-v6", "fd00:ec2::254", 80),
		tcpProbePolicy("mapped-loopback", "::ffff:127.0.0.1", apiPort),
		tcpProbePolicy("other-namespace", otherIP, 80),
	}}
	for i, policies := range groups {
		ns := createNamespace(t, fmt.Sprintf("reach%d", i))
		createRestartableTarget(t, ns)
		NewWithT(t).Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), policies...))).To(Succeed())
		for _, p := range policies {
			ps := expectError(t, ns, "rbp", p.Name, autorebootv1alpha1.ReasonAddressNotAllowed)
			NewWithT(t).Expect(ps.Message).To(HaveSuffix("address not allowed by the manager's network policy"), p.Name)
		}
		waitProbes(t, typeTCP, 3)
		expectNotRestarted(t, ns, "rbp")
	}
	// Each address was refused by the rule meant for it (the admin's metric).
	for _, category := range []string{"loopback", "unspecified", "metadata", "service-other-namespace"} {
		NewWithT(t).Expect(dialsDenied(t, category)).To(BeNumerically(">", 0), category)
	}
}

// A Service of the policy's own namespace is reachable: only other
// namespaces' are refused.
func TestOwnNamespaceServiceIsAllowed(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "own")
	ip := createService(t, ns, "db")
	createRestartableTarget(t, ns)
	p := tcpProbePolicy("own", ip, 80)
	p.Trigger.Probe.FailureThreshold = 1000
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), p))).To(Succeed())
	ps := policyStatus(t, ns, "rbp", "own")
	g.Expect(ps.Reason).NotTo(Equal(autorebootv1alpha1.ReasonAddressNotAllowed), "%+v", ps)
	g.Expect(ps.LastResult).NotTo(Equal(autorebootv1alpha1.ResultError), "%+v", ps)
}

func TestHostileFingerprintIsKeyed(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "pin")
	createRestartableTarget(t, ns)
	createUsableSecret(t, ns, "card", map[string]string{"pin": "4711"})
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), autorebootv1alpha1.Policy{Name: "pin", Trigger: autorebootv1alpha1.Trigger{
		Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchSecret, Name: "card", Keys: []string{"pin"}, PeriodSeconds: 1}}}))).To(Succeed())
	waitBaseline(t, ns, "rbp")
	fp := getRBP(t, ns, "rbp").Status.Policies[0].Fingerprint
	g.Expect(fp).To(HavePrefix("h1."))
	// The first round's plain SHA-256 of the same encoding, tried for every
	// 4-digit PIN, finds nothing in status any more.
	for pin := 0; pin < 10000; pin++ {
		g.Expect(fp).NotTo(ContainSubstring(plainWatchFingerprint("pin", fmt.Sprintf("%04d", pin))))
	}
	g.Expect(fp).NotTo(ContainSubstring(plainWatchFingerprint("pin", "4711")))
	// The key lives in the manager's namespace, created on first use.
	var key corev1.Secret
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: fingerprint.DefaultSecretName}, &key)).To(Succeed())
	g.Expect(key.Data[fingerprint.SecretKey]).To(HaveLen(fingerprint.KeySize))
}

// plainWatchFingerprint is what the first round kept in status: SHA-256 of
// the length-prefixed key and value.
func plainWatchFingerprint(k, v string) string {
	var hdr [17]byte
	binary.BigEndian.PutUint64(hdr[0:], uint64(len(k)))
	hdr[8] = 1
	binary.BigEndian.PutUint64(hdr[9:], uint64(len(v)))
	h := sha256.New()
	h.Write(hdr[:])
	h.Write([]byte(k))
	h.Write([]byte(v))
	return hex.EncodeToString(h.Sum(nil))
}

func TestHostileUnlabelledSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "optin")
	createRestartableTarget(t, ns)
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-db"},
		StringData: map[string]string{"dsn": readOnlyUser(t, autorebootv1alpha1.DriverPostgres)}}
	g.Expect(k8s.Create(ctx, admin)).To(Succeed())
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), sqlPolicy("db", autorebootv1alpha1.DriverPostgres, "admin-db", "SELECT 1")))).To(Succeed())
	ps := expectError(t, ns, "rbp", "db", autorebootv1alpha1.ReasonSecretNotUsable)
	g.Expect(ps.Message).To(ContainSubstring(autorebootv1alpha1.UsableLabel + "=true"))
	g.Eventually(func() string {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded)
		if c == nil {
			return ""
		}
		return c.Reason
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonSecretNotUsable))
	// The migration: whoever may write the Secret labels it.
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(admin), admin)).To(Succeed())
	admin.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
	g.Expect(k8s.Update(ctx, admin)).To(Succeed())
	g.Eventually(func() string { return policyStatus(t, ns, "rbp", "db").LastResult }, timeout, interval).Should(Equal(autorebootv1alpha1.ResultSuccess))
}

func TestHostileConfigErrorsNeverRestart(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "config")
	createRestartableTarget(t, ns)
	badHost := tcpProbePolicy("bad-host", "db:5432", 80)
	badHeader := httpProbePolicy("bad-host-header", external.get("/"))
	badHeader.Trigger.Probe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "Host", Value: "a/b"}}
	badName := httpProbePolicy("bad-header-name", external.get("/"))
	badName.Trigger.Probe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "X Bad", Value: "v"}}
	badValue := httpProbePolicy("bad-header-value", external.get("/"))
	badValue.Trigger.Probe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-A", Value: "v\r\nInjected: 1"}}
	refused := tcpProbePolicy("refused", "127.0.0.1", 22)
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), badHost, badHeader, badName, badValue, refused))).To(Succeed())
	for _, p := range []string{"bad-host", "bad-host-header", "bad-header-name", "bad-header-value"} {
		expectError(t, ns, "rbp", p, autorebootv1alpha1.ReasonInvalidSpec)
	}
	expectError(t, ns, "rbp", "refused", autorebootv1alpha1.ReasonAddressNotAllowed)
	g.Expect(workerKeysOf(ns, "rbp")).To(HaveLen(1), "invalid policies got workers")
	waitProbes(t, typeTCP, 3)
	expectNotRestarted(t, ns, "rbp")
}

// A crash-looping Deployment (nothing available, rollout finished) is what
// a probe trigger is for: it is restarted, once.
func TestCrashLoopingTargetIsRestartedOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "crashloop")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 3, UpdatedReplicas: 3, UnavailableReplicas: 3}
	g.Expect(k8s.Status().Update(ctx, dep)).To(Succeed())
	changeConfigMap(t, ns, "settings", "v1")
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), watchPolicy("settings")))).To(Succeed())
	waitBaseline(t, ns, "rbp")
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
	g.Expect(restartedAt(dep)).NotTo(BeEmpty())
	waitProbes(t, typeWatch, 3)
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(Equal(int64(1)), "restarted more than once for one change")
}

func TestFutureRestartStampIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "future")
	dep := newDeployment(ns, "web")
	dep.Spec.Template.Annotations = map[string]string{autorebootv1alpha1.RestartedAtAnnotation: "2099-01-01T00:00:00Z"}
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	markRolledOut(t, dep)
	changeConfigMap(t, ns, "settings", "v1")
	rbp := newRBP(ns, "rbp", webTarget(), watchPolicy("settings"))
	rbp.Spec.MinRestartInterval = &metav1.Duration{Duration: time.Hour}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	waitBaseline(t, ns, "rbp")
	g.Eventually(func() string {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return c.Message
	}, timeout, interval).Should(ContainSubstring("in the future"))
	// An hour of cooldown from 2099 would hold the restart for 73 years.
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() string {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
		return restartedAt(dep)
	}, timeout, interval).ShouldNot(Equal("2099-01-01T00:00:00Z"))
	// The count is written to status after the patch, in the same write
	// that clears the pending trigger: wait for that write, not the patch.
	g.Eventually(func() bool { return getRBP(t, ns, "rbp").Status.Policies[0].PendingTrigger }, timeout, interval).Should(BeFalse())
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(Equal(int64(1)))
}

func TestHostileNamespaceLimit(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "limit")
	createRestartableTarget(t, ns)
	srv := newHealthServer(t)
	probe := func(name string) autorebootv1alpha1.Policy {
		return autorebootv1alpha1.Policy{Name: name, Trigger: autorebootv1alpha1.Trigger{Probe: srv.probe("/"+name, 3)}}
	}
	g.Expect(createRBP(t, newRBP(ns, "first", webTarget(), probe("a"), probe("b"), probe("c"), probe("d")))).To(Succeed())
	g.Eventually(func() []string { return workerKeysOf(ns, "first") }, timeout, interval).Should(HaveLen(4))
	second := newRBP(ns, "second", webTarget(), probe("a"), probe("b"), probe("c"))
	g.Expect(createRBP(t, second)).To(Succeed())
	ps := expectError(t, ns, "second", "c", autorebootv1alpha1.ReasonTooManyProbes)
	g.Expect(ps.Message).To(ContainSubstring(strconv.Itoa(maxPerNamespace)))
	g.Expect(workerKeysOf(ns, "second")).To(HaveLen(2))
	// The older RebootPolicy keeps its slots; removing it frees them.
	g.Expect(k8s.Delete(context.Background(), getRBP(t, ns, "first"))).To(Succeed())
	g.Eventually(func() []string { return workerKeysOf(ns, "second") }, timeout, interval).Should(HaveLen(3))
	g.Eventually(func() string { return policyStatus(t, ns, "second", "c").Reason }, timeout, interval).ShouldNot(Equal(autorebootv1alpha1.ReasonTooManyProbes))
}

// Probes of a namespace never reach beyond what the admin allowed: the
// manager's logs name the rule for the admin, the tenant sees one phrase.
func TestDeniedCategoryStaysOutOfStatus(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "category")
	createRestartableTarget(t, ns)
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), tcpProbePolicy("meta", "169.254.169.254", 80)))).To(Succeed())
	expectError(t, ns, "rbp", "meta", autorebootv1alpha1.ReasonAddressNotAllowed)
	g.Expect(strings.ToLower(visibleStatus(t, ns))).NotTo(ContainSubstring("metadata"))
}

func visibleStatus(t *testing.T, ns string) string {
	var b strings.Builder
	for _, ps := range getRBP(t, ns, "rbp").Status.Policies {
		b.WriteString(ps.Message + ps.Reason)
	}
	for _, c := range getRBP(t, ns, "rbp").Status.Conditions {
		b.WriteString(c.Message + c.Reason)
	}
	return b.String()
}
