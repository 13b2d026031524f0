package memcached

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// The CRD refuses a memory file in extraArgs beside warmRestart in every
// spelling memcached's getopt reads, and leaves -e alone without it.
func TestWarmRestartExtraArgsAreRefusedByTheCRD(t *testing.T) {
	ns := newNamespace(t)
	for i, args := range [][]string{{"-e", "/x"}, {"-e/x"}, {"-Me/x"}, {"--memory-file=/x"}, {"--memory-f", "/x"}} {
		obj := newMemcached(ns, fmt.Sprintf("w%d", i), cachev1alpha1.MemcachedSpec{WarmRestart: true, ExtraArgs: args})
		err := env.client.Create(context.Background(), obj)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "warmRestart manages memcached's memory file") {
			_ = env.client.Delete(context.Background(), obj)
			t.Errorf("extraArgs %q with warmRestart: error = %v, want the CRD's refusal", args, err)
		}
	}
	small := newMemcached(ns, "small", cachev1alpha1.MemcachedSpec{WarmRestart: true, MemoryMiB: new(int32(38))})
	if err := env.client.Create(context.Background(), small); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "warmRestart needs memoryMiB of at least 39") {
		t.Errorf("memoryMiB 38 with warmRestart: error = %v, want the CRD's refusal", err)
	}
	create(t, newMemcached(ns, "plain", cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-e", "/data/f"}}))
}

// The warm pod passes restricted PodSecurity admission; where the
// ContainerStopSignals feature is off (the default of v1.37, as in this
// apiserver) the apiserver drops the stop signal from the pod and keeps
// the rest, as docs/memcached.md says.
func TestWarmRestartPodIsAdmitted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := restrictedNamespace(t)
	create(t, newMemcached(ns, "warm", cachev1alpha1.MemcachedSpec{WarmRestart: true}))
	d := eventuallyDeployment(t, ns, "warm", func(g Gomega, d *appsv1.Deployment) {
		c := memcachedContainer(g, d)
		g.Expect(c.Args).To(ContainElements("-e", cachev1alpha1.WarmRestartMemoryFile))
		g.Expect(slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == cachev1alpha1.WarmRestartVolume && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory
		})).To(BeTrue())
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-", Labels: d.Spec.Template.Labels},
		Spec: *d.Spec.Template.Spec.DeepCopy()}
	g.Expect(env.client.Create(ctx, pod, client.DryRunAll)).To(Succeed(), "restricted PodSecurity admission refuses the warm pod")
	g.Expect(d.Spec.Template.Spec.OS).To(HaveValue(HaveField("Name", corev1.Linux)))
	g.Expect(pod.Spec.OS).To(HaveValue(HaveField("Name", corev1.Linux)))
	for _, c := range pod.Spec.Containers {
		if c.Name == "memcached" {
			g.Expect(c.Lifecycle == nil || c.Lifecycle.StopSignal == nil).To(BeTrue(),
				"the feature is off here: the apiserver should have dropped stopSignal, kept %+v", c.Lifecycle)
		}
	}
	eventuallyCondition(t, ns, "warm", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
}
