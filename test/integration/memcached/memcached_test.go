package memcached

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
)

func newMemcached(ns, name string, spec cachev1alpha1.MemcachedSpec) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// eventuallyDeployment waits for the Deployment of a Memcached to satisfy check.
func eventuallyDeployment(t *testing.T, ns, name string, check func(g Gomega, d *appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.client.Get(context.Background(), key(ns, name), d)).To(Succeed())
		check(g, d)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return d
}

func eventuallyCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *cachev1alpha1.Memcached {
	t.Helper()
	mc := &cachev1alpha1.Memcached{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.client.Get(context.Background(), key(ns, name), mc)).To(Succeed())
		c := meta.FindStatusCondition(mc.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "condition %s", typ)
		g.Expect(c.Status).To(Equal(status), "condition %s: %s", typ, c.Message)
		g.Expect(c.Reason).To(Equal(reason), "condition %s: %s", typ, c.Message)
		g.Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return mc
}

func memcachedContainer(g Gomega, d *appsv1.Deployment) corev1.Container {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "memcached" {
			return c
		}
	}
	g.Expect(d.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Name", "memcached")))
	return corev1.Container{}
}

func TestDefaultsAndOwnedObjects(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx := context.Background()
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}}
	create(t, mc)

	// The CRD's defaults.
	g.Expect(env.client.Get(ctx, key(ns, "defaults"), mc)).To(Succeed())
	g.Expect(mc.Spec.Size).To(HaveValue(Equal(int32(1))))
	g.Expect(mc.Spec.Image).To(Equal(cachev1alpha1.DefaultImage))
	g.Expect(mc.Spec.MaxConnections).To(Equal(int32(1024)))
	g.Expect(mc.Spec.Threads).To(Equal(int32(4)))
	g.Expect(mc.Spec.MaxItemSizeKiB).To(Equal(int32(1024)))

	d := eventuallyDeployment(t, ns, "defaults", func(g Gomega, d *appsv1.Deployment) {})
	g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(1))))
	c := memcachedContainer(g, d)
	g.Expect(c.Image).To(Equal(cachev1alpha1.DefaultImage))
	g.Expect(c.Args).To(Equal([]string{"-p", "11211", "-U", "0", "-m", "64", "-c", "1024", "-t", "4", "-I", "1024k"}))
	g.Expect(metav1.IsControlledBy(d, mc)).To(BeTrue())
	g.Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", "defaults"))
	g.Expect(d.Spec.Template.Annotations).To(HaveKey(mccontroller.AnnotationConfigHash))

	svc := &corev1.Service{}
	g.Expect(env.client.Get(ctx, key(ns, "defaults"), svc)).To(Succeed())
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(svc.Spec.Ports[0].Name).To(Equal("memcache"))
	g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(11211)))
	g.Expect(metav1.IsControlledBy(svc, mc)).To(BeTrue())

	// size 1: no PodDisruptionBudget by default.
	g.Expect(apierrors.IsNotFound(env.client.Get(ctx, key(ns, "defaults"), &policyv1.PodDisruptionBudget{}))).To(BeTrue())

	// Status: no pods in envtest, so not available, and progressing.
	mc = eventuallyCondition(t, ns, "defaults", cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonInstancesUnavailable)
	g.Expect(mc.Status.ServiceName).To(Equal("defaults"))
	g.Expect(mc.Status.Selector).To(Equal("app.kubernetes.io/instance=defaults,app.kubernetes.io/managed-by=runbook,app.kubernetes.io/name=memcached"))
	eventuallyCondition(t, ns, "defaults", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)

	// A Created event on the Memcached.
	g.Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(env.client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range evs.Items {
			if e.Regarding.Name == "defaults" && e.Regarding.Kind == "Memcached" {
				reasons = append(reasons, e.Reason)
			}
		}
		g.Expect(reasons).To(ContainElement(cachev1alpha1.EventCreated))
	}).WithTimeout(timeout).Should(Succeed())
}

func TestValidationRejectsBadSpecs(t *testing.T) {
	ns := newNamespace(t)
	lim := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
	}
	tests := []struct {
		name string
		obj  *cachev1alpha1.Memcached
		msg  string
	}{
		{"negative size", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](-1)}), "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0"},
		{"size above the bound", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](101)}), "spec.size in body should be less than or equal to 100"},
		{"image with a space", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{Image: "memcached latest"}), "spec.image in body should match"},
		{"zero-less connections", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{MaxConnections: -5}), "spec.maxConnections in body should be greater than or equal to 1"},
		{"too many threads", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{Threads: 65}), "spec.threads in body should be less than or equal to 64"},
		{"verbosity 4", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{Verbosity: 4}), "spec.verbosity in body should be less than or equal to 3"},
		{"extraArgs sets -m", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-m", "64"}}), "extraArgs must not set options the controller manages"},
		{"extraArgs sets --threads=", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-o", "modern", "--threads=2"}}), "extraArgs must not set options the controller manages"},
		{"item size above half the memory", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](8), MaxItemSizeKiB: 8192}), "maxItemSizeKiB must be at most half of memoryMiB"},
		{"preset and custom anti-affinity", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{AntiAffinity: cachev1alpha1.AntiAffinityHard,
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}}), "set either the antiAffinity preset or affinity.podAntiAffinity"},
		{"unknown anti-affinity preset", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{AntiAffinity: "Sometimes"}), `spec.antiAffinity: Unsupported value: "Sometimes"`},
		{"ServiceMonitor without exporter", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{
			ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: true}}}), "exporter.serviceMonitor.enabled requires exporter.enabled"},
		{"PDB maxUnavailable 0", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{PodDisruptionBudget: &cachev1alpha1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0))}}), "maxUnavailable must be an integer >= 1 or a percentage"},
		{"PDB maxUnavailable 150%", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{PodDisruptionBudget: &cachev1alpha1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromString("150%"))}}), "maxUnavailable must be an integer >= 1 or a percentage"},
		{"negative minReadySeconds", newMemcached(ns, "a", cachev1alpha1.MemcachedSpec{MinReadySeconds: -1}), "spec.minReadySeconds in body should be greater than or equal to 0"},
		{"name not a DNS-1035 label", newMemcached(ns, "1cache", cachev1alpha1.MemcachedSpec{}), "metadata.name must be a DNS-1035 label"},
		{"name too long for a label", newMemcached(ns, strings.Repeat("a", 64), cachev1alpha1.MemcachedSpec{}), "metadata.name must be a DNS-1035 label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantInvalid(t, tt.obj, tt.msg) })
	}
	// And the valid neighbours of those specs are accepted.
	ok := newMemcached(ns, "fine", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](0), MemoryMiB: ptr.To[int32](256), Resources: lim("256Mi"),
		ExtraArgs: []string{"-o", "modern", "-B", "ascii"}, PodDisruptionBudget: &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("50%"))}})
	create(t, ok)
}

// wantInvalid creates obj and wants the apiserver to refuse it as Invalid
// with msg in the error (an object it accepts is deleted again).
func wantInvalid(t *testing.T, obj client.Object, msg string) {
	t.Helper()
	err := env.client.Create(context.Background(), obj)
	if err == nil {
		_ = env.client.Delete(context.Background(), obj)
		t.Fatalf("accepted, want rejection with %q", msg)
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("error = %v\nwant an Invalid error containing %q", err, msg)
	}
}

// TestMemoryChecksTheCRDCannotExpress: memory against the container's memory
// limit is checked by the controller (CEL cannot parse the unbounded
// quantities of corev1.ResourceRequirements within the cost budget). Such a
// spec is refused: Degraded/InvalidSpec, a Warning event, nothing applied.
func TestMemoryChecksTheCRDCannotExpress(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		msg  string
	}{
		{"memory-above-limit", cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](512), Resources: memoryLimitOf("256Mi")},
			"memoryMiB 512 exceeds the memory limit of 256 MiB"},
		{"limit-below-minimum", cachev1alpha1.MemcachedSpec{Resources: memoryLimitOf("16Mi")}, "memory limit 16Mi is below the minimum of 32Mi"},
		// 40Mi - 16Mi headroom = 24 MiB of item memory: 16 MiB items do not fit twice.
		{"item-size-above-derived-memory", cachev1alpha1.MemcachedSpec{MaxItemSizeKiB: 16 * 1024, Resources: memoryLimitOf("40Mi")},
			"more than half of the item memory (24 MiB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			create(t, newMemcached(ns, tt.name, tt.spec))
			mc := eventuallyCondition(t, ns, tt.name, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonInvalidSpec)
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded).Message).To(ContainSubstring(tt.msg))
			g.Expect(apierrors.IsNotFound(env.client.Get(context.Background(), key(ns, tt.name), &appsv1.Deployment{}))).To(BeTrue(), "no Deployment for an invalid spec")
			g.Eventually(func(g Gomega) {
				var evs eventsv1.EventList
				g.Expect(env.client.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
				found := false
				for _, e := range evs.Items {
					if e.Regarding.Name == tt.name && e.Reason == cachev1alpha1.EventInvalidSpec && e.Type == corev1.EventTypeWarning {
						found = true
					}
				}
				g.Expect(found).To(BeTrue(), "Warning event InvalidSpec")
			}).WithTimeout(timeout).Should(Succeed())
		})
	}
}

func TestDriftIsCorrected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newMemcached(ns, "drift", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), MemoryMiB: ptr.To[int32](128)}))
	d := eventuallyDeployment(t, ns, "drift", func(g Gomega, d *appsv1.Deployment) {})
	wantArgs := memcachedContainer(g, d).Args
	wantHash := d.Spec.Template.Annotations[mccontroller.AnnotationConfigHash]

	// Someone edits replicas, image and args with another field manager,
	// and adds an annotation the controller does not own.
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To[int32](7)
	d.Spec.Template.Spec.Containers[0].Image = "memcached:evil"
	d.Spec.Template.Spec.Containers[0].Args = []string{"-m", "1"}
	d.Annotations = map[string]string{"team": "shop"}
	g.Expect(env.client.Patch(ctx, d, patch, client.FieldOwner("someone"))).To(Succeed())

	eventuallyDeployment(t, ns, "drift", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(3))))
		c := memcachedContainer(g, d)
		g.Expect(c.Image).To(Equal(cachev1alpha1.DefaultImage))
		g.Expect(c.Args).To(Equal(wantArgs))
		g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(mccontroller.AnnotationConfigHash, wantHash))
		g.Expect(d.Annotations).To(HaveKeyWithValue("team", "shop"), "fields the controller does not own stay")
	})

	// The Service: a changed port and a widened selector are restored.
	svc := &corev1.Service{}
	g.Expect(env.client.Get(ctx, key(ns, "drift"), svc)).To(Succeed())
	patch = client.MergeFrom(svc.DeepCopy())
	svc.Spec.Ports[0].Port = 9999
	svc.Spec.Selector = map[string]string{"app.kubernetes.io/name": "memcached"}
	g.Expect(env.client.Patch(ctx, svc, patch, client.FieldOwner("someone"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "drift"), svc)).To(Succeed())
		g.Expect(svc.Spec.Ports).To(HaveLen(1))
		g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(11211)))
		g.Expect(svc.Spec.Selector).To(HaveKeyWithValue("app.kubernetes.io/instance", "drift"))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// The PodDisruptionBudget (size 3 → on by default).
	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(func() error { return env.client.Get(ctx, key(ns, "drift"), pdb) }).WithTimeout(timeout).Should(Succeed())
	patch = client.MergeFrom(pdb.DeepCopy())
	pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(3))
	g.Expect(env.client.Patch(ctx, pdb, patch, client.FieldOwner("someone"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "drift"), pdb)).To(Succeed())
		g.Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// A deleted Deployment is recreated.
	g.Expect(env.client.Delete(ctx, d)).To(Succeed())
	eventuallyDeployment(t, ns, "drift", func(g Gomega, nd *appsv1.Deployment) {
		g.Expect(nd.UID).NotTo(Equal(d.UID))
	})
}

func TestSpecChangesRollAndScale(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mc := newMemcached(ns, "roll", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	create(t, mc)
	d := eventuallyDeployment(t, ns, "roll", func(g Gomega, d *appsv1.Deployment) {})
	hash := d.Spec.Template.Annotations[mccontroller.AnnotationConfigHash]

	// Scaling changes replicas, not the pod template; the PDB appears.
	g.Expect(env.client.Get(ctx, key(ns, "roll"), mc)).To(Succeed())
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.Size = ptr.To[int32](4)
	g.Expect(env.client.Patch(ctx, mc, patch)).To(Succeed())
	eventuallyDeployment(t, ns, "roll", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(4))))
		g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(mccontroller.AnnotationConfigHash, hash))
	})
	g.Eventually(func() error { return env.client.Get(ctx, key(ns, "roll"), &policyv1.PodDisruptionBudget{}) }).WithTimeout(timeout).Should(Succeed())

	// A settings change rolls the pods: new args, new hash.
	g.Expect(env.client.Get(ctx, key(ns, "roll"), mc)).To(Succeed())
	patch = client.MergeFrom(mc.DeepCopy())
	mc.Spec.Threads = 8
	mc.Spec.Verbosity = 1
	g.Expect(env.client.Patch(ctx, mc, patch)).To(Succeed())
	eventuallyDeployment(t, ns, "roll", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(memcachedContainer(g, d).Args).To(ContainElements("-t", "8", "-v"))
		g.Expect(d.Spec.Template.Annotations[mccontroller.AnnotationConfigHash]).NotTo(Equal(hash))
	})

	// Back to one instance: the PDB goes away again.
	g.Expect(env.client.Get(ctx, key(ns, "roll"), mc)).To(Succeed())
	patch = client.MergeFrom(mc.DeepCopy())
	mc.Spec.Size = ptr.To[int32](1)
	g.Expect(env.client.Patch(ctx, mc, patch)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.client.Get(ctx, key(ns, "roll"), &policyv1.PodDisruptionBudget{}))
	}).WithTimeout(timeout).Should(BeTrue())

	g.Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(env.client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range evs.Items {
			reasons = append(reasons, e.Reason)
		}
		g.Expect(reasons).To(ContainElements(cachev1alpha1.EventCreated, cachev1alpha1.EventScaled,
			cachev1alpha1.EventConfigRollout, cachev1alpha1.EventDeleted))
	}).WithTimeout(timeout).Should(Succeed())
}

func TestForeignObjectIsNotTouched(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	podLabels := map[string]string{"app": "theirs"}
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
			},
		},
	}
	create(t, foreign)
	rv := foreign.ResourceVersion

	create(t, newMemcached(ns, "shared", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](5)}))
	mc := eventuallyCondition(t, ns, "shared", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonForeignObject)
	g.Expect(meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded).Message).To(ContainSubstring("Deployment " + ns + "/shared"))
	g.Expect(meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionAvailable).Reason).To(Equal(cachev1alpha1.ReasonDeploymentMissing))

	// The foreign Deployment is exactly as it was, also after more
	// reconciles of the Memcached (a forced one here).
	_, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "shared")})
	g.Expect(err).NotTo(HaveOccurred())
	got := &appsv1.Deployment{}
	g.Expect(env.client.Get(ctx, key(ns, "shared"), got)).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(rv))
	g.Expect(got.OwnerReferences).To(BeEmpty())
	g.Expect(got.Spec.Replicas).To(HaveValue(Equal(int32(2))))

	// Once the foreign object is gone, the controller takes over.
	g.Expect(env.client.Delete(ctx, got)).To(Succeed())
	eventuallyDeployment(t, ns, "shared", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(5))))
		g.Expect(d.OwnerReferences).To(HaveLen(1))
	})
	eventuallyCondition(t, ns, "shared", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)

	// A foreign Service is not touched either.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-taken"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	create(t, svc)
	create(t, newMemcached(ns, "svc-taken", cachev1alpha1.MemcachedSpec{}))
	eventuallyCondition(t, ns, "svc-taken", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonForeignObject)
	got2 := &corev1.Service{}
	g.Expect(env.client.Get(ctx, key(ns, "svc-taken"), got2)).To(Succeed())
	g.Expect(got2.ResourceVersion).To(Equal(svc.ResourceVersion))
}

func TestTwoCachesInOneNamespaceAreSeparate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newMemcached(ns, "sessions", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}))
	create(t, newMemcached(ns, "pages", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), Threads: 2}))
	a := eventuallyDeployment(t, ns, "sessions", func(g Gomega, d *appsv1.Deployment) {})
	b := eventuallyDeployment(t, ns, "pages", func(g Gomega, d *appsv1.Deployment) {})
	g.Expect(a.Spec.Selector.MatchLabels).NotTo(Equal(b.Spec.Selector.MatchLabels))
	g.Expect(a.Spec.Replicas).To(HaveValue(Equal(int32(2))))
	g.Expect(b.Spec.Replicas).To(HaveValue(Equal(int32(3))))
	// Neither selector matches the other's pods.
	for _, pair := range [][2]*appsv1.Deployment{{a, b}, {b, a}} {
		sel, err := metav1.LabelSelectorAsSelector(pair[0].Spec.Selector)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sel.Matches(labels.Set(pair[1].Spec.Template.Labels))).To(BeFalse())
	}
	var sa, sb corev1.Service
	g.Eventually(func() error { return env.client.Get(ctx, key(ns, "sessions"), &sa) }).WithTimeout(timeout).Should(Succeed())
	g.Eventually(func() error { return env.client.Get(ctx, key(ns, "pages"), &sb) }).WithTimeout(timeout).Should(Succeed())
	g.Expect(sa.Spec.Selector["app.kubernetes.io/instance"]).To(Equal("sessions"))
	g.Expect(sb.Spec.Selector["app.kubernetes.io/instance"]).To(Equal("pages"))

	// Scaling one leaves the other alone.
	bRV := b.ResourceVersion
	mc := &cachev1alpha1.Memcached{}
	g.Expect(env.client.Get(ctx, key(ns, "sessions"), mc)).To(Succeed())
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.Size = ptr.To[int32](4)
	g.Expect(env.client.Patch(ctx, mc, patch)).To(Succeed())
	eventuallyDeployment(t, ns, "sessions", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(4))))
	})
	g.Expect(env.client.Get(ctx, key(ns, "pages"), b)).To(Succeed())
	g.Expect(b.ResourceVersion).To(Equal(bRV))
}

func TestStatusFollowsDeploymentAndEndpoints(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newMemcached(ns, "st", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}))
	d := eventuallyDeployment(t, ns, "st", func(g Gomega, d *appsv1.Deployment) {})

	// Play kube-controller-manager: two ready pods, and their EndpointSlice.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	g.Expect(env.client.Status().Update(ctx, d)).To(Succeed())
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "st-abc", Labels: map[string]string{
			discoveryv1.LabelServiceName: "st", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			"app.kubernetes.io/managed-by": "runbook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("memcache"), Port: ptr.To[int32](11211)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.1.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	create(t, slice)
	mc := eventuallyCondition(t, ns, "st", cachev1alpha1.ConditionAvailable, metav1.ConditionTrue, cachev1alpha1.ReasonAllInstancesAvailable)
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "st"), mc)).To(Succeed())
		g.Expect(mc.Status.Servers).To(Equal([]string{"10.1.0.1:11211", "10.1.0.2:11211"}))
		g.Expect(mc.Status.Replicas).To(Equal(int32(2)))
		g.Expect(mc.Status.ReadyReplicas).To(Equal(int32(2)))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	eventuallyCondition(t, ns, "st", cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete)

	// One pod becomes unready.
	g.Expect(env.client.Get(ctx, key(ns, "st"), d)).To(Succeed())
	d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
	g.Expect(env.client.Status().Update(ctx, d)).To(Succeed())
	patch := client.MergeFrom(slice.DeepCopy())
	slice.Endpoints[0].Conditions.Ready = ptr.To(false)
	g.Expect(env.client.Patch(ctx, slice, patch)).To(Succeed())
	mc = eventuallyCondition(t, ns, "st", cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonInstancesUnavailable)
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "st"), mc)).To(Succeed())
		g.Expect(mc.Status.Servers).To(Equal([]string{"10.1.0.1:11211"}))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// A slice not written by Kubernetes' EndpointSlice controller is ignored.
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "st-fake", Labels: map[string]string{
			discoveryv1.LabelServiceName: "st", discoveryv1.LabelManagedBy: "someone", "app.kubernetes.io/managed-by": "runbook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}}},
	})
	_, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "st")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.client.Get(ctx, key(ns, "st"), mc)).To(Succeed())
	g.Expect(mc.Status.Servers).To(Equal([]string{"10.1.0.1:11211"}))
}

func TestNoWritesWhenNothingChanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newMemcached(ns, "quiet", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3),
		Exporter: &cachev1alpha1.ExporterSpec{Enabled: true},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway}},
		Tolerations:               []corev1.Toleration{{Key: "cache", Operator: corev1.TolerationOpExists}},
	}))
	eventuallyDeployment(t, ns, "quiet", func(g Gomega, d *appsv1.Deployment) {})
	eventuallyCondition(t, ns, "quiet", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	g.Eventually(func() error { return env.client.Get(ctx, key(ns, "quiet"), &policyv1.PodDisruptionBudget{}) }).WithTimeout(timeout).Should(Succeed())

	versions := func() map[string]string {
		out := map[string]string{}
		for name, obj := range map[string]client.Object{"memcached": &cachev1alpha1.Memcached{}, "deployment": &appsv1.Deployment{},
			"service": &corev1.Service{}, "pdb": &policyv1.PodDisruptionBudget{}} {
			g.Expect(env.client.Get(ctx, key(ns, "quiet"), obj)).To(Succeed())
			out[name] = obj.GetResourceVersion()
		}
		return out
	}
	// Wait until the manager's cache has caught up with its own writes:
	// a forced reconcile then finds nothing to do.
	var before map[string]string
	g.Eventually(func(g Gomega) {
		before = versions()
		mark := env.writes.count()
		_, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "quiet")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(writesTo(env.writes.since(mark), "/namespaces/"+ns+"/")).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// Ten more forced reconciles: no request that writes, no new version.
	mark := env.writes.count()
	for range 10 {
		_, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "quiet")})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(writesTo(env.writes.since(mark), "/namespaces/"+ns+"/")).To(BeEmpty())
	g.Expect(versions()).To(Equal(before))
}

func TestScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mc := newMemcached(ns, "scaled", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)})
	create(t, mc)
	eventuallyDeployment(t, ns, "scaled", func(g Gomega, d *appsv1.Deployment) {})
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "scaled"), mc)).To(Succeed())
		g.Expect(mc.Status.Selector).NotTo(BeEmpty())
	}).WithTimeout(timeout).Should(Succeed())

	// What `kubectl scale memcached/scaled --replicas=5` and autoscalers do:
	// read the scale, write it back (retried on a conflict with the
	// controller's status writes, as kubectl does).
	scale := &autoscalingv1.Scale{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.SubResource("scale").Get(ctx, mc, scale)).To(Succeed())
		g.Expect(scale.Spec.Replicas).To(Equal(int32(2)))
		g.Expect(scale.Status.Selector).To(Equal(mc.Status.Selector))
		scale.Spec.Replicas = 5
		g.Expect(env.client.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed())

	g.Expect(env.client.Get(ctx, key(ns, "scaled"), mc)).To(Succeed())
	g.Expect(mc.Spec.Size).To(HaveValue(Equal(int32(5))))
	eventuallyDeployment(t, ns, "scaled", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(5))))
	})
	// The scale subresource rejects what the CRD would reject.
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.SubResource("scale").Get(ctx, mc, scale)).To(Succeed())
		scale.Spec.Replicas = 1000
		err := env.client.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "error %v", err)
		g.Expect(err.Error()).To(ContainSubstring("less than or equal to 100"))
	}).WithTimeout(timeout).Should(Succeed())
}

// deploymentArgs returns the memcached args of the Deployment the controller
// built for a Memcached.
func deploymentArgs(t *testing.T, ns, name string) []string {
	t.Helper()
	var args []string
	eventuallyDeployment(t, ns, name, func(g Gomega, d *appsv1.Deployment) {
		args = memcachedContainer(g, d).Args
		g.Expect(args).NotTo(BeEmpty())
	})
	if !slices.Contains(args, "-p") {
		t.Fatalf("args %v have no -p", args)
	}
	return args
}

func memoryLimitOf(q string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
}
