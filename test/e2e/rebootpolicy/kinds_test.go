package rebootpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestStatefulSetAndDaemonSetTargets: a ConfigMap change restarts a
// StatefulSet and a DaemonSet (one RebootPolicy each); every pod is
// replaced and each target is restarted once.
func TestStatefulSetAndDaemonSetTargets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "kinds")
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"mode": "a"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Port: 80}}},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db",
			Replicas:    ptr.To[int32](2),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template:    podTemplate("db"),
		},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: podTemplate("agent"),
		},
	})).To(Succeed())
	stsBefore := waitRunning(t, ns, "db", 2)
	dsBefore := waitRunning(t, ns, "agent", 3)

	for _, tgt := range []struct {
		name string
		kind autorebootv1alpha1.TargetKind
	}{{"db", autorebootv1alpha1.KindStatefulSet}, {"agent", autorebootv1alpha1.KindDaemonSet}} {
		g.Expect(k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tgt.name},
			Spec: autorebootv1alpha1.RebootPolicySpec{
				Target: autorebootv1alpha1.TargetRef{Kind: tgt.kind, Name: tgt.name},
				Policies: []autorebootv1alpha1.Policy{{
					Name:    "settings",
					Trigger: autorebootv1alpha1.Trigger{Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "settings", PeriodSeconds: 1}},
				}},
			},
		})).To(Succeed())
		waitBaseline(t, ns, tgt.name)
	}

	var cm corev1.ConfigMap
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
	cm.Data["mode"] = "b"
	g.Expect(k8s.Update(ctx, &cm)).To(Succeed())

	waitReplaced(t, ns, "db", 2, stsBefore)
	waitReplaced(t, ns, "agent", 3, dsBefore)
	for _, name := range []string{"db", "agent"} {
		g.Expect(restartCount(g, ns, name)).To(Equal(int64(1)), name)
	}
}
