package rebootpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestReferencedConfigMapAndSecret: a Deployment reads a ConfigMap by
// envFrom and a Secret by a volume; a referenced trigger, with no list of
// names, restarts it once per change of either, every pod replaced.
func TestReferencedConfigMapAndSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "referenced")
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"},
		Data: map[string]string{"MODE": "a"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-tls",
		Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}}, StringData: map[string]string{"tls.key": "k1"}})).To(Succeed())
	dep := nginxDeployment(ns, "web", 2)
	dep.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}
	dep.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}
	dep.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-tls"}}}}
	g.Expect(k8s.Create(ctx, dep)).To(Succeed())
	pods := waitRunning(t, ns, "web", 2)

	g.Expect(k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target:             autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			MinRestartInterval: &metav1.Duration{},
			Policies: []autorebootv1alpha1.Policy{{Name: "refs", Trigger: autorebootv1alpha1.Trigger{
				Referenced: &autorebootv1alpha1.ReferencedTrigger{PeriodSeconds: 2}}}},
		},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		ps := getRBP(g, ns, "web").Status.Policies
		g.Expect(ps).To(HaveLen(1))
		g.Expect(ps[0].LastResult).To(Equal(autorebootv1alpha1.ResultSuccess))
		g.Expect(ps[0].Targets).To(HaveLen(1))
		g.Expect(ps[0].Message).To(ContainSubstring("tracking 2 references"))
	}, timeout, interval).Should(Succeed())

	update := func(obj client.Object, change func()) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			change()
			return k8s.Update(ctx, obj)
		})).To(Succeed())
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"}}
	update(cm, func() { cm.Data["MODE"] = "b" })
	pods = waitReplaced(t, ns, "web", 2, pods)
	g.Expect(restartCount(g, ns, "web")).To(Equal(int64(1)))

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-tls"}}
	update(sec, func() { sec.Data["tls.key"] = []byte("k2") })
	waitReplaced(t, ns, "web", 2, pods)
	g.Expect(restartCount(g, ns, "web")).To(Equal(int64(2)))

	g.Expect(getRBP(g, ns, "web").Status.PendingRestarts).To(BeZero())
}
