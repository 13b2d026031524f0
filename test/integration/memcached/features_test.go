package memcached

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
)

// eventuallyStatefulSet waits for the StatefulSet of a Memcached to satisfy check.
func eventuallyStatefulSet(t *testing.T, ns, name string, check func(g Gomega, s *appsv1.StatefulSet)) *appsv1.StatefulSet {
	t.Helper()
	s := &appsv1.StatefulSet{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.client.Get(context.Background(), key(ns, name), s)).To(Succeed())
		check(g, s)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return s
}

// playStatefulSetController sets what kube-controller-manager would after
// the StatefulSet runs n ready pods: its status and the EndpointSlice of the
// headless Service, whose endpoints carry the pods' hostnames (listed here
// out of order, as the slice controller may).
func playStatefulSetController(t *testing.T, ns, name string, n int) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		s := &appsv1.StatefulSet{}
		g.Expect(env.client.Get(ctx, key(ns, name), s)).To(Succeed())
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: int32(n), ReadyReplicas: int32(n),
			AvailableReplicas: int32(n), UpdatedReplicas: int32(n), CurrentReplicas: int32(n)}
		g.Expect(env.client.Status().Update(ctx, s)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed())
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-slice"}}
	_, err := ctrlCreateOrUpdate(ctx, slice, func() {
		slice.Labels = map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			"app.kubernetes.io/managed-by": "runbook"}
		slice.AddressType = discoveryv1.AddressTypeIPv4
		slice.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("memcache"), Port: ptr.To[int32](11211)}}
		slice.Endpoints = nil
		for i := n - 1; i >= 0; i-- {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{fmt.Sprintf("10.2.0.%d", 10+i)}, Hostname: ptr.To(fmt.Sprintf("%s-%d", name, i)),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
	})
	g.Expect(err).NotTo(HaveOccurred())
}

// ctrlCreateOrUpdate creates obj after mutate, or updates the stored one.
func ctrlCreateOrUpdate(ctx context.Context, obj client.Object, mutate func()) (bool, error) {
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
		mutate()
		return true, env.client.Create(ctx, obj)
	} else if err != nil {
		return false, err
	}
	mutate()
	return false, env.client.Update(ctx, obj)
}

func namedServers(ns, name string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d.%s.%s.svc:11211", name, i, name, ns))
	}
	return out
}

func eventuallyServers(t *testing.T, ns, name string, want []string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		mc := &cachev1alpha1.Memcached{}
		g.Expect(env.client.Get(context.Background(), key(ns, name), mc)).To(Succeed())
		g.Expect(mc.Status.Servers).To(Equal(want))
		g.Expect(mc.Status.ReadyReplicas).To(Equal(int32(len(want))))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// StatefulSet mode: stable names in status.servers, in ordinal order
// (name-10 after name-9), through scaling up and down; the kind cannot be
// switched.
func TestStatefulSetMode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "named"
	mc := newMemcached(ns, name, cachev1alpha1.MemcachedSpec{WorkloadKind: cachev1alpha1.WorkloadStatefulSet, Size: ptr.To[int32](3)})
	create(t, mc)
	eventuallyStatefulSet(t, ns, name, func(g Gomega, s *appsv1.StatefulSet) {
		g.Expect(s.Spec.Replicas).To(HaveValue(Equal(int32(3))))
		g.Expect(s.Spec.ServiceName).To(Equal(name))
		g.Expect(s.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
		g.Expect(metav1.IsControlledBy(s, mc)).To(BeTrue())
	})
	g.Expect(apierrors.IsNotFound(env.client.Get(ctx, key(ns, name), &appsv1.Deployment{}))).To(BeTrue(), "no Deployment in StatefulSet mode")
	eventuallyCondition(t, ns, name, cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonInstancesUnavailable)

	playStatefulSetController(t, ns, name, 3)
	eventuallyServers(t, ns, name, namedServers(ns, name, 3))
	eventuallyCondition(t, ns, name, cachev1alpha1.ConditionAvailable, metav1.ConditionTrue, cachev1alpha1.ReasonAllInstancesAvailable)

	for _, size := range []int{11, 2} {
		g.Expect(env.client.Get(ctx, key(ns, name), mc)).To(Succeed())
		mc.Spec.Size = ptr.To(int32(size))
		g.Expect(env.client.Update(ctx, mc)).To(Succeed())
		eventuallyStatefulSet(t, ns, name, func(g Gomega, s *appsv1.StatefulSet) {
			g.Expect(s.Spec.Replicas).To(HaveValue(Equal(int32(size))))
		})
		playStatefulSetController(t, ns, name, size)
		eventuallyServers(t, ns, name, namedServers(ns, name, size))
	}

	g.Expect(env.client.Get(ctx, key(ns, name), mc)).To(Succeed())
	mc.Spec.WorkloadKind = cachev1alpha1.WorkloadDeployment
	err := env.client.Update(ctx, mc)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "switching the kind: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("workloadKind cannot be changed"))
}

func TestPodOverridesAreRendered(t *testing.T) {
	ns := newNamespace(t)
	create(t, newMemcached(ns, "over", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
		PodLabels:                     map[string]string{"team": "shop"},
		PodAnnotations:                map[string]string{"example.com/owner": "shop"},
		ServiceAccountName:            "cache",
		TerminationGracePeriodSeconds: ptr.To[int64](45),
		PreStopDelaySeconds:           10,
		ExtraEnv:                      []cachev1alpha1.EnvVar{{Name: "TZ", Value: "UTC"}},
		ExtraVolumes: []cachev1alpha1.ExtraVolume{{Name: "extstore", MountPath: "/data",
			EmptyDir: &cachev1alpha1.EmptyDirVolume{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
	}, ExtraArgs: []string{"-o", "ext_path=/data/extstore:512m"}}))
	eventuallyDeployment(t, ns, "over", func(g Gomega, d *appsv1.Deployment) {
		tpl := d.Spec.Template
		g.Expect(tpl.Labels).To(HaveKeyWithValue("team", "shop"))
		g.Expect(d.Spec.Selector.MatchLabels).NotTo(HaveKey("team"))
		g.Expect(tpl.Annotations).To(HaveKeyWithValue("example.com/owner", "shop"))
		g.Expect(tpl.Spec.ServiceAccountName).To(Equal("cache"))
		g.Expect(tpl.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		g.Expect(tpl.Spec.TerminationGracePeriodSeconds).To(HaveValue(Equal(int64(45))))
		c := memcachedContainer(g, d)
		g.Expect(c.Lifecycle).NotTo(BeNil())
		g.Expect(c.Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(10)))
		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "TZ", Value: "UTC"}))
		g.Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", "/data")))
		g.Expect(tpl.Spec.Volumes).To(ContainElement(HaveField("Name", "extstore")))
		g.Expect(strings.Join(c.Args, " ")).To(HaveSuffix("-o ext_path=/data/extstore:512m"))
	})
	eventuallyCondition(t, ns, "over", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
}

func TestNetworkPolicyRenderedAndRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mc := newMemcached(ns, "fenced", cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true},
		NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true, Clients: []cachev1alpha1.NetworkPolicyPeer{
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}}}})
	create(t, mc)
	np := &networkingv1.NetworkPolicy{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "fenced"), np)).To(Succeed())
		g.Expect(metav1.IsControlledBy(np, mc)).To(BeTrue())
		g.Expect(np.Spec.PodSelector.MatchLabels).To(HaveKeyWithValue("app.kubernetes.io/instance", "fenced"))
		g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
		g.Expect(np.Spec.Ingress).To(HaveLen(2))
		g.Expect(np.Spec.Ingress[0].Ports[0].Port.IntValue()).To(Equal(11211))
		g.Expect(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(Equal(map[string]string{"app": "shop"}))
		g.Expect(np.Spec.Ingress[1].Ports[0].Port.IntValue()).To(Equal(9150))
		g.Expect(np.Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels).To(Equal(map[string]string{"metrics": "enabled"}))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "fenced"), mc)).To(Succeed())
		mc.Spec.NetworkPolicy.Enabled = false
		g.Expect(env.client.Update(ctx, mc)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.client.Get(ctx, key(ns, "fenced"), &networkingv1.NetworkPolicy{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the disabled NetworkPolicy is deleted")

	// A foreign NetworkPolicy of the same name is left alone, and reported
	// only while one is wanted.
	foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fenced"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}}}
	create(t, foreign)
	eventuallyCondition(t, ns, "fenced", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	g.Expect(env.client.Get(ctx, key(ns, "fenced"), foreign)).To(Succeed(), "a foreign NetworkPolicy is not deleted")
}

// usableSecret is a Secret the Memcacheds of its namespace may use.
func usableSecret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{cachev1alpha1.UsableLabel: "true"}}, Data: data}
}

func degradedMessage(t *testing.T, ns, name string) string {
	t.Helper()
	mc := &cachev1alpha1.Memcached{}
	NewWithT(t).Expect(env.client.Get(context.Background(), key(ns, name), mc)).To(Succeed())
	return meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded).Message
}

// TLS and auth Secrets that are missing, or not opted in, degrade the
// Memcached with a reason and nothing is applied; once they exist and are
// labelled, it recovers by itself (Secrets are not watched: they are read
// again every --memcached-secret-resync-period, here shortened). A renewal
// then rolls the pods: only the Secret fingerprint of the template changes.
func TestSecretsMissingThenCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "secure"
	create(t, newMemcached(ns, name, cachev1alpha1.MemcachedSpec{
		TLS:  &cachev1alpha1.TLSSpec{SecretName: "cert", ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cert"}},
		Auth: &cachev1alpha1.AuthSpec{SecretName: "users"},
	}))
	eventuallyCondition(t, ns, name, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonSecretNotUsable)
	g.Expect(degradedMessage(t, ns, name)).To(ContainSubstring("Secret cert does not exist or is not labelled"))
	g.Expect(apierrors.IsNotFound(env.client.Get(ctx, key(ns, name), &appsv1.Deployment{}))).To(BeTrue(), "nothing is applied")
	g.Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(env.client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		g.Expect(evs.Items).To(ContainElement(And(HaveField("Reason", cachev1alpha1.EventSecretNotUsable), HaveField("Type", corev1.EventTypeWarning))))
	}).WithTimeout(timeout).Should(Succeed())

	// An existing Secret without the opt-in label reads the same: the
	// Memcached cannot tell it from a missing one.
	certData := testCertificate(t, "CA 1")
	cert := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert"}, Type: corev1.SecretTypeTLS, Data: certData}
	create(t, cert)
	g.Consistently(func() string { return degradedMessage(t, ns, name) }).WithTimeout(3 * secretRecheck).
		Should(ContainSubstring("Secret cert does not exist or is not labelled"))
	cert.Labels = map[string]string{cachev1alpha1.UsableLabel: "true"}
	g.Expect(env.client.Update(ctx, cert)).To(Succeed())
	g.Eventually(func() string { return degradedMessage(t, ns, name) }).WithTimeout(timeout).
		Should(ContainSubstring("Secret users does not exist"))

	// An auth file memcached could not use is refused, without echoing it.
	users := usableSecret(ns, "users", map[string][]byte{"authfile": []byte("app:hunter two\n")})
	create(t, users)
	g.Eventually(func() string { return degradedMessage(t, ns, name) }).WithTimeout(timeout).
		Should(ContainSubstring("authfile line 1 has a blank"))
	g.Expect(degradedMessage(t, ns, name)).NotTo(ContainSubstring("hunter"))
	users.Data = map[string][]byte{"authfile": []byte("app:hunter2\n")}
	g.Expect(env.client.Update(ctx, users)).To(Succeed())

	eventuallyCondition(t, ns, name, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	d := eventuallyDeployment(t, ns, name, func(g Gomega, d *appsv1.Deployment) {
		args := strings.Join(memcachedContainer(g, d).Args, " ")
		g.Expect(args).To(ContainSubstring("-Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_min_version=2,ssl_ca_cert=/etc/memcached/tls/client-ca.crt,ssl_verify_mode=2"))
		g.Expect(args).To(ContainSubstring("-Y /etc/memcached/auth/authfile"))
		g.Expect(d.Spec.Template.Annotations).To(HaveKey(mccontroller.AnnotationSecretHash))
	})
	mc := &cachev1alpha1.Memcached{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, name), mc)).To(Succeed())
		g.Expect(mc.Status.TLS).To(HaveValue(BeTrue()))
		g.Expect(mc.Status.Auth).To(HaveValue(BeTrue()))
	}).WithTimeout(timeout).Should(Succeed())
	svc := &corev1.Service{}
	g.Expect(env.client.Get(ctx, key(ns, name), svc)).To(Succeed())
	g.Expect(svc.Annotations).To(And(HaveKeyWithValue(mccontroller.AnnotationTLS, "true"),
		HaveKeyWithValue(mccontroller.AnnotationMutualTLS, "true"), HaveKeyWithValue(mccontroller.AnnotationAuth, "true")))
	for _, obj := range []client.Object{mc, d, svc} {
		g.Expect(fmt.Sprint(obj)).NotTo(ContainSubstring("hunter2"), "%T carries the password", obj)
	}

	// The renewal.
	before := d.Spec.Template.Annotations
	g.Expect(env.client.Get(ctx, key(ns, "cert"), cert)).To(Succeed())
	cert.Data = testCertificate(t, "CA 2")
	g.Expect(env.client.Update(ctx, cert)).To(Succeed())
	eventuallyDeployment(t, ns, name, func(g Gomega, d *appsv1.Deployment) {
		after := d.Spec.Template.Annotations
		g.Expect(after[mccontroller.AnnotationSecretHash]).NotTo(Equal(before[mccontroller.AnnotationSecretHash]))
		g.Expect(after[mccontroller.AnnotationConfigHash]).To(Equal(before[mccontroller.AnnotationConfigHash]))
	})
	g.Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(env.client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		g.Expect(evs.Items).To(ContainElement(HaveField("Reason", cachev1alpha1.EventSecretRotated)))
	}).WithTimeout(timeout).Should(Succeed())
}

// A Memcached can only name Secrets of its own namespace (the references
// have no namespace), and one of another namespace with the same name is
// never used: the Memcached stays Degraded.
func TestSecretOfAnotherNamespaceIsNotUsed(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	create(t, usableSecret(other, "cert", testCertificate(t, "CA")))
	create(t, newMemcached(ns, "elsewhere", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}}))
	eventuallyCondition(t, ns, "elsewhere", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonSecretNotUsable)
	NewWithT(t).Consistently(func() error {
		return env.client.Get(context.Background(), key(ns, "elsewhere"), &appsv1.Deployment{})
	}).WithTimeout(3 * secretRecheck).Should(Satisfy(apierrors.IsNotFound))
}

// memoryMiB must leave headroom below the memory limit (equal is refused);
// without a limit the container gets the documented default.
func TestMemoryHeadroom(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name    string
		spec    cachev1alpha1.MemcachedSpec
		wantErr string
		limit   string
	}{
		{name: "equal", spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](256), Resources: memoryLimitOf("256Mi")},
			wantErr: "memoryMiB 256 leaves 0 MiB of the 256 MiB memory limit"},
		{name: "one-mib-short", spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](232), Resources: memoryLimitOf("256Mi")},
			wantErr: "set memoryMiB to at most 231"},
		{name: "just-enough", spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](231), Resources: memoryLimitOf("256Mi")}, limit: "256Mi"},
		{name: "no-limit", spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](1024)}, limit: "1137Mi"},
		{name: "no-limit-default-memory", spec: cachev1alpha1.MemcachedSpec{}, limit: "80Mi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			create(t, newMemcached(ns, tt.name, tt.spec))
			if tt.wantErr != "" {
				eventuallyCondition(t, ns, tt.name, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonInvalidSpec)
				NewWithT(t).Expect(degradedMessage(t, ns, tt.name)).To(ContainSubstring(tt.wantErr))
				return
			}
			eventuallyDeployment(t, ns, tt.name, func(g Gomega, d *appsv1.Deployment) {
				limits := memcachedContainer(g, d).Resources.Limits
				g.Expect(limits.Memory().String()).To(Equal(tt.limit))
			})
		})
	}
}

// The CRD refuses the cheap cases of the new fields at admission.
func TestValidationOfTheNewFields(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		msg  string
	}{
		{"the issue's bundle", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-Mm1048576"}}, "extraArgs must not set options the controller manages"},
		{"the issue's memory prefix", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"--memory-limi=99999"}}, "extraArgs must not set options the controller manages"},
		{"the issue's threads prefix", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"--threa=5000"}}, "extraArgs must not set options the controller manages"},
		{"-Z", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-Z"}}, "extraArgs must not set options the controller manages"},
		{"-S", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-S"}}, "extraArgs must not set options the controller manages"},
		{"auth with the exporter", cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "u"},
			Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}, "auth cannot be combined with exporter.enabled"},
		{"TLS 1.1", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "c", MinVersion: "TLS1.1"}}, `spec.tls.minVersion: Unsupported value: "TLS1.1"`},
		{"preStop as long as the grace period", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{PreStopDelaySeconds: 30}},
			"preStopDelaySeconds must be shorter than terminationGracePeriodSeconds"},
		{"a selector label", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{PodLabels: map[string]string{"app.kubernetes.io/instance": "x"}}},
			"podLabels must not set app.kubernetes.io/name"},
		{"a controller annotation", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{PodAnnotations: map[string]string{mccontroller.AnnotationSecretHash: "x"}}},
			"podAnnotations must not set cache.runbook.dev/ annotations"},
		{"a volume over the controller's files", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{ExtraVolumes: []cachev1alpha1.ExtraVolume{
			{Name: "x", MountPath: "/etc/memcached/tls", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}}}}, "not /etc/memcached or below"},
		{"two volumes on one path", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{ExtraVolumes: []cachev1alpha1.ExtraVolume{
			{Name: "a", MountPath: "/data", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}, {Name: "b", MountPath: "/data", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}}}},
			"extraVolumes must have distinct mountPaths"},
		{"an environment variable memcached or OpenSSL reads", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
			ExtraEnv: []cachev1alpha1.EnvVar{{Name: "OPENSSL_CONF", Value: "/x"}}}}, "extraEnv must not set"},
		{"a NetworkPolicy without clients", cachev1alpha1.MemcachedSpec{NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true}},
			"networkPolicy.enabled needs at least one entry in clients"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantInvalid(t, newMemcached(ns, fmt.Sprintf("v%d", i), tt.spec), tt.msg) })
	}
}

// What only the controller can see in extraArgs is InvalidSpec before
// anything is applied.
func TestExtraArgsOnlyTheControllerCatches(t *testing.T) {
	ns := newNamespace(t)
	for i, args := range [][]string{
		{"-o", "modern,ssl_min_version=0"},
		{"--ext", "ssl_verify_mode=0"},
		{"--liste=x"},
	} {
		name := fmt.Sprintf("args%d", i)
		create(t, newMemcached(ns, name, cachev1alpha1.MemcachedSpec{ExtraArgs: args,
			TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}}))
		eventuallyCondition(t, ns, name, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonInvalidSpec)
		NewWithT(t).Expect(apierrors.IsNotFound(env.client.Get(context.Background(), key(ns, name), &appsv1.Deployment{}))).To(BeTrue())
	}
}

// An idle Memcached with TLS and auth is reconciled again every resync
// period to read its Secrets, and writes nothing when they did not change.
func TestSecretResyncWritesNothingWhenIdle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "idle"
	create(t, usableSecret(ns, "cert", testCertificate(t, "CA")))
	create(t, usableSecret(ns, "users", map[string][]byte{"authfile": []byte("app:pw\n")}))
	create(t, newMemcached(ns, name, cachev1alpha1.MemcachedSpec{
		TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}, Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}}))
	eventuallyDeployment(t, ns, name, func(g Gomega, d *appsv1.Deployment) {})
	eventuallyCondition(t, ns, name, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	// Settled: a forced reconcile writes nothing.
	g.Eventually(func(g Gomega) {
		mark := env.writes.count()
		_, err := env.reconciler.Reconcile(ctx, ctrlRequest(ns, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(writesTo(env.writes.since(mark), "/namespaces/"+ns+"/")).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	mark := env.writes.count()
	// Three resync periods of the suite.
	g.Consistently(func() []string { return writesTo(env.writes.since(mark), "/namespaces/"+ns+"/") }).
		WithTimeout(6 * secretRecheck).WithPolling(interval).Should(BeEmpty())
}

func ctrlRequest(ns, name string) ctrl.Request { return ctrl.Request{NamespacedName: key(ns, name)} }
