package memcached

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
)

// shipperSidecar is a log shipper as users write one.
func shipperSidecar() cachev1alpha1.ExtraContainer {
	return cachev1alpha1.ExtraContainer{Name: "shipper", Image: "example.com/shipper:1",
		Env:          []cachev1alpha1.ContainerEnvVar{{Name: "LEVEL", Value: "info"}},
		Ports:        []cachev1alpha1.ContainerPort{{Name: "http", ContainerPort: 2020}},
		VolumeMounts: []cachev1alpha1.ContainerVolumeMount{{Name: "logs", MountPath: "/logs", ReadOnly: true}},
		SecurityContext: &cachev1alpha1.ExtraContainerSecurity{
			ContainerSecurity: cachev1alpha1.ContainerSecurity{RunAsUser: ptr.To[int64](2000)},
			AddCapabilities:   []corev1.Capability{"NET_BIND_SERVICE"}}}
}

func overridesSpec() cachev1alpha1.MemcachedSpec {
	return cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
		ExtraVolumes: []cachev1alpha1.ExtraVolume{{Name: "logs", MountPath: "/logs", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}},
		PodSecurityContext: &cachev1alpha1.PodSecurity{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000),
			FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000},
			SeccompProfile: &cachev1alpha1.Profile{Type: cachev1alpha1.ProfileRuntimeDefault}},
		ContainerSecurityContext: &cachev1alpha1.ContainerSecurity{RunAsUser: ptr.To[int64](1001)},
		InitContainers:           []cachev1alpha1.ExtraContainer{{Name: "warm", Image: "example.com/warm:1", Args: []string{"--once"}}},
		Sidecars:                 []cachev1alpha1.ExtraContainer{shipperSidecar()},
	}}
}

// restrictedProblems is what the Pod Security restricted level refuses in
// a pod template, by pod-security-admission's own checks.
func restrictedProblems(g Gomega, tpl *corev1.PodTemplateSpec) string {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	res := policy.AggregateCheckResults(eval.EvaluatePod(api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}, &tpl.ObjectMeta, &tpl.Spec))
	if res.Allowed {
		return ""
	}
	return res.ForbiddenReason() + ": " + res.ForbiddenDetail()
}

// restrictedNamespace is a namespace whose pods the apiserver's
// PodSecurity admission holds to the restricted level, with the default
// ServiceAccount a pod needs to be admitted (no controller-manager here).
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	obj := &corev1.Namespace{}
	g.Expect(env.client.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	obj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	g.Expect(env.client.Update(ctx, obj)).To(Succeed())
	g.Expect(env.client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
	return ns
}

// admitPod asks the apiserver (dry run: nothing is stored) to admit a pod
// of the template; PodSecurity admission runs on it.
func admitPod(ns string, tpl *corev1.PodTemplateSpec) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-", Labels: tpl.Labels, Annotations: tpl.Annotations},
		Spec: *tpl.Spec.DeepCopy()}
	return env.client.Create(context.Background(), pod, client.DryRunAll)
}

// A valid sidecar, init container and securityContext are rendered into the
// Deployment, the pod passes the restricted level both by the library's
// checks and by the apiserver's PodSecurity admission, and removing the
// overrides removes them and rolls the pods.
func TestOverridesAreAppliedAndRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := restrictedNamespace(t)

	// The apiserver does enforce restricted here: a privileged pod is refused.
	bad := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x",
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}
	err := admitPod(ns, bad)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a privileged pod in a restricted namespace: %v", err)

	create(t, newMemcached(ns, "over", overridesSpec()))
	d := eventuallyDeployment(t, ns, "over", func(g Gomega, d *appsv1.Deployment) {
		pod := d.Spec.Template.Spec
		g.Expect(pod.InitContainers).To(HaveLen(2))
		g.Expect(pod.InitContainers[0].Name).To(Equal("warm"))
		g.Expect(pod.InitContainers[0].RestartPolicy).To(BeNil())
		g.Expect(pod.InitContainers[1].Name).To(Equal("shipper"))
		g.Expect(pod.InitContainers[1].RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
		g.Expect(pod.InitContainers[1].SecurityContext.Capabilities.Add).To(Equal([]corev1.Capability{"NET_BIND_SERVICE"}))
		g.Expect(pod.InitContainers[1].SecurityContext.RunAsUser).To(HaveValue(Equal(int64(2000))))
		g.Expect(pod.SecurityContext.RunAsUser).To(HaveValue(Equal(int64(1000))))
		g.Expect(pod.SecurityContext.FSGroup).To(HaveValue(Equal(int64(3000))))
		g.Expect(pod.SecurityContext.SupplementalGroups).To(Equal([]int64{4000}))
		g.Expect(memcachedContainer(g, d).SecurityContext.RunAsUser).To(HaveValue(Equal(int64(1001))))
		g.Expect(memcachedContainer(g, d).SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		g.Expect(restrictedProblems(g, &d.Spec.Template)).To(BeEmpty())
	})
	g.Expect(admitPod(ns, &d.Spec.Template)).To(Succeed(), "PodSecurity admission refuses the rendered pod")
	eventuallyCondition(t, ns, "over", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	before := d.Spec.Template.Annotations[mccontroller.AnnotationConfigHash]

	mc := &cachev1alpha1.Memcached{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "over"), mc)).To(Succeed())
		mc.Spec.PodOverrides = cachev1alpha1.PodOverrides{}
		g.Expect(env.client.Update(ctx, mc)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed())
	d = eventuallyDeployment(t, ns, "over", func(g Gomega, d *appsv1.Deployment) {
		pod := d.Spec.Template.Spec
		g.Expect(pod.InitContainers).To(BeEmpty())
		g.Expect(pod.SecurityContext.RunAsUser).To(HaveValue(Equal(int64(11211))))
		g.Expect(pod.SecurityContext.SupplementalGroups).To(BeEmpty())
		g.Expect(memcachedContainer(g, d).SecurityContext.RunAsUser).To(BeNil())
		g.Expect(d.Spec.Template.Annotations[mccontroller.AnnotationConfigHash]).NotTo(Equal(before), "the pods roll")
	})
	g.Expect(admitPod(ns, &d.Spec.Template)).To(Succeed())
}

func TestSidecarsInAStatefulSet(t *testing.T) {
	ns := newNamespace(t)
	spec := overridesSpec()
	spec.WorkloadKind = cachev1alpha1.WorkloadStatefulSet
	create(t, newMemcached(ns, "named", spec))
	eventuallyStatefulSet(t, ns, "named", func(g Gomega, s *appsv1.StatefulSet) {
		g.Expect(s.Spec.Template.Spec.InitContainers).To(HaveLen(2))
		g.Expect(s.Spec.Template.Spec.InitContainers[1].RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
		g.Expect(restrictedProblems(g, &s.Spec.Template)).To(BeEmpty())
	})
}

// Overrides outside the restricted level, or reaching the controller's
// containers, volumes and files, are refused by the CRD with a message.
func TestHostileOverridesAreRefusedByTheCRD(t *testing.T) {
	ns := newNamespace(t)
	hostile := func(mutate func(o *cachev1alpha1.PodOverrides)) cachev1alpha1.MemcachedSpec {
		spec := overridesSpec()
		mutate(&spec.PodOverrides)
		return spec
	}
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		msg  string
	}{
		{"root pod", hostile(func(o *cachev1alpha1.PodOverrides) { o.PodSecurityContext.RunAsUser = ptr.To[int64](0) }), "runAsUser: Invalid value: 0"},
		{"root memcached", hostile(func(o *cachev1alpha1.PodOverrides) { o.ContainerSecurityContext.RunAsUser = ptr.To[int64](0) }), "runAsUser: Invalid value: 0"},
		{"root sidecar", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].SecurityContext.RunAsUser = ptr.To[int64](0) }), "runAsUser: Invalid value: 0"},
		{"host users", hostile(func(o *cachev1alpha1.PodOverrides) { o.PodSecurityContext.HostUsers = ptr.To(true) }), "hostUsers may only be set to false"},
		{"unconfined seccomp", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.PodSecurityContext.SeccompProfile = &cachev1alpha1.Profile{Type: "Unconfined"}
		}), `Unsupported value: "Unconfined"`},
		{"unconfined AppArmor", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.Sidecars[0].SecurityContext.AppArmorProfile = &cachev1alpha1.Profile{Type: "Unconfined"}
		}), `Unsupported value: "Unconfined"`},
		{"Localhost without a profile", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.PodSecurityContext.SeccompProfile = &cachev1alpha1.Profile{Type: cachev1alpha1.ProfileLocalhost}
		}), "localhostProfile is required for type Localhost"},
		{"escaping profile path", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.PodSecurityContext.SeccompProfile = &cachev1alpha1.Profile{Type: cachev1alpha1.ProfileLocalhost, LocalhostProfile: ptr.To("../x")}
		}), "localhostProfile must be relative"},
		{"SYS_ADMIN", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.Sidecars[0].SecurityContext.AddCapabilities = []corev1.Capability{"SYS_ADMIN"}
		}),
			`Unsupported value: "SYS_ADMIN"`},
		{"a sidecar named memcached", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].Name = "memcached" }), "container names memcached, exporter and memcached-* are the controller's"},
		{"an init container named exporter", hostile(func(o *cachev1alpha1.PodOverrides) { o.InitContainers[0].Name = "exporter" }), "are the controller's"},
		{"one name twice", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].Name = "warm" }), "sidecars and initContainers must have distinct names"},
		{"the TLS volume", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].VolumeMounts[0].Name = "memcached-tls" }), "volume names starting with memcached- are the controller's"},
		{"a volume that is not an extraVolume", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.InitContainers[0].VolumeMounts = []cachev1alpha1.ContainerVolumeMount{{Name: "kube-api-access", MountPath: "/x"}}
		}),
			"initContainers may mount only the spec's extraVolumes"},
		{"over /etc/memcached", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].VolumeMounts[0].MountPath = "/etc/memcached" }), "not /etc/memcached or below"},
		{"memcached's port", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].Ports[0].ContainerPort = 11211 }), "ports 11211 and 9150 are memcached's"},
		{"value and secretKeyRef", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.Sidecars[0].Env = []cachev1alpha1.ContainerEnvVar{{Name: "X", Value: "v", SecretKeyRef: &cachev1alpha1.SecretKeyRef{Name: "s", Key: "k"}}}
		}), "either value or secretKeyRef"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantInvalid(t, newMemcached(ns, fmt.Sprintf("h%d", i), tt.spec), tt.msg) })
	}
}

// hostileUnstructured is a Memcached written by hand with the fields of a
// full corev1 securityContext and container that the CRD has no place for.
func hostileUnstructured(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.runbook.dev/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"podSecurityContext": map[string]any{"runAsUser": int64(1000), "runAsNonRoot": false, "hostNetwork": true, "hostPID": true},
			"containerSecurityContext": map[string]any{"privileged": true, "allowPrivilegeEscalation": true,
				"readOnlyRootFilesystem": false, "capabilities": map[string]any{"add": []any{"SYS_ADMIN"}}},
			"sidecars": []any{map[string]any{"name": "evil", "image": "x",
				"securityContext": map[string]any{"privileged": true, "allowPrivilegeEscalation": true, "runAsNonRoot": false},
				"ports":           []any{map[string]any{"containerPort": int64(80), "hostPort": int64(80)}},
				"volumeMounts":    []any{},
				"envFrom":         []any{map[string]any{"secretRef": map[string]any{"name": "manager-token"}}},
				"env":             []any{map[string]any{"name": "T", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "manager-token", "key": "token"}}}},
			}},
			"volumes": []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}},
		},
	}}
	return u
}

// Fields outside the types (privileged, host namespaces, hostPort, hostPath,
// envFrom, valueFrom) are refused under strict field validation, as kubectl
// sends it; under the API's default they are dropped, and the rendered pod
// has none of them and passes restricted.
func TestFieldsOutsideRestrictedNeverReachThePod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := restrictedNamespace(t)
	err := env.client.Create(ctx, hostileUnstructured(ns, "strict"), client.FieldValidation(metav1.FieldValidationStrict))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(And(ContainSubstring("privileged"), ContainSubstring("hostPort"), ContainSubstring(`unknown field "spec.volumes"`)))

	g.Expect(env.client.Create(ctx, hostileUnstructured(ns, "pruned"), client.FieldValidation(metav1.FieldValidationIgnore))).To(Succeed())
	d := eventuallyDeployment(t, ns, "pruned", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Template.Spec.InitContainers).To(HaveLen(1))
	})
	pod := d.Spec.Template.Spec
	g.Expect(pod.HostNetwork || pod.HostPID || pod.HostIPC).To(BeFalse())
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	for _, v := range pod.Volumes {
		g.Expect(v.HostPath).To(BeNil())
	}
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		g.Expect(c.SecurityContext.Privileged).To(BeNil(), c.Name)
		g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), c.Name)
		g.Expect(c.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), c.Name)
		g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty(), c.Name)
		g.Expect(c.EnvFrom).To(BeEmpty(), c.Name)
		for _, e := range c.Env {
			g.Expect(e.ValueFrom).To(BeNil(), c.Name)
		}
		for _, p := range c.Ports {
			g.Expect(p.HostPort).To(BeZero(), c.Name)
		}
	}
	g.Expect(memcachedContainer(g, d).SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	g.Expect(restrictedProblems(g, &d.Spec.Template)).To(BeEmpty())
	g.Expect(admitPod(ns, &d.Spec.Template)).To(Succeed())
}

// A sidecar's env from a Secret without the usable label degrades the
// Memcached and is never rendered; the running template stays as it was.
// Labelled, the Secret's key is referenced (never copied).
func TestSidecarEnvFromAnUnusableSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newMemcached(ns, "env", overridesSpec()))
	before := eventuallyDeployment(t, ns, "env", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Template.Spec.InitContainers).To(HaveLen(2))
	})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-password"}, Data: map[string][]byte{"password": []byte("s3cret-value")}}
	create(t, secret)

	mc := &cachev1alpha1.Memcached{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "env"), mc)).To(Succeed())
		mc.Spec.Sidecars[0].Env = append(mc.Spec.Sidecars[0].Env, cachev1alpha1.ContainerEnvVar{Name: "PASSWORD",
			SecretKeyRef: &cachev1alpha1.SecretKeyRef{Name: "db-password", Key: "password"}})
		g.Expect(env.client.Update(ctx, mc)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed())
	eventuallyCondition(t, ns, "env", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonSecretNotUsable)
	g.Expect(degradedMessage(t, ns, "env")).To(ContainSubstring("Secret db-password does not exist or is not labelled"))
	g.Consistently(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(env.client.Get(ctx, key(ns, "env"), d)).To(Succeed())
		g.Expect(d.Spec.Template).To(Equal(before.Spec.Template), "the refused Secret reaches the pod template")
	}).WithTimeout(3 * secretRecheck).Should(Succeed())

	secret.Labels = map[string]string{cachev1alpha1.UsableLabel: "true"}
	g.Expect(env.client.Update(ctx, secret)).To(Succeed())
	eventuallyCondition(t, ns, "env", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	d := eventuallyDeployment(t, ns, "env", func(g Gomega, d *appsv1.Deployment) {
		env := d.Spec.Template.Spec.InitContainers[1].Env
		g.Expect(env).To(ContainElement(corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db-password"}, Key: "password"}}}))
	})
	g.Expect(fmt.Sprint(d)).NotTo(ContainSubstring("s3cret-value"))
}

// More Secrets in the extra containers' env than the controller reads per
// reconcile: the CRD cannot count them across containers, so the first
// reconcile reports InvalidSpec and applies nothing.
func TestTooManyEnvSecretsIsInvalidSpec(t *testing.T) {
	ns := newNamespace(t)
	x := cachev1alpha1.ExtraContainer{Name: "many", Image: "x"}
	for i := range 9 {
		n := fmt.Sprintf("s%d", i)
		x.Env = append(x.Env, cachev1alpha1.ContainerEnvVar{Name: n, SecretKeyRef: &cachev1alpha1.SecretKeyRef{Name: n, Key: "k"}})
	}
	create(t, newMemcached(ns, "many", cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{Sidecars: []cachev1alpha1.ExtraContainer{x}}}))
	eventuallyCondition(t, ns, "many", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonInvalidSpec)
	g := NewWithT(t)
	g.Expect(degradedMessage(t, ns, "many")).To(ContainSubstring("reads 9 Secrets; at most 8"))
	g.Expect(apierrors.IsNotFound(env.client.Get(context.Background(), key(ns, "many"), &appsv1.Deployment{}))).To(BeTrue(), "nothing is applied")
}
