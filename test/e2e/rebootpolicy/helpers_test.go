package rebootpolicy

import (
	"context"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

const (
	timeout  = 3 * time.Minute
	interval = 250 * time.Millisecond
)

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + suffix()}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: app, Image: "nginx:1.27"}}},
	}
}

func nginxDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

// runningPods returns the names of the Running, not terminating pods with
// app=app, and the number of all pods with that label.
func runningPods(g Gomega, ns, app string) (running []string, all int) {
	var pods corev1.PodList
	g.Expect(k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running = append(running, p.Name+"/"+string(p.UID))
		}
	}
	sort.Strings(running)
	return running, len(pods.Items)
}

// waitRunning waits for exactly n Running pods and no others.
func waitRunning(t *testing.T, ns, app string, n int) []string {
	t.Helper()
	var out []string
	NewWithT(t).Eventually(func(g Gomega) {
		running, all := runningPods(g, ns, app)
		g.Expect(running).To(HaveLen(n))
		g.Expect(all).To(Equal(n))
		out = running
	}, timeout, interval).Should(Succeed())
	return out
}

// waitReplaced waits until n Running pods exist, none of them in old, and
// no other pod is left.
func waitReplaced(t *testing.T, ns, app string, n int, old []string) []string {
	t.Helper()
	var out []string
	NewWithT(t).Eventually(func(g Gomega) {
		running, all := runningPods(g, ns, app)
		g.Expect(running).To(HaveLen(n))
		g.Expect(all).To(Equal(n))
		for _, p := range running {
			g.Expect(old).NotTo(ContainElement(p))
		}
		out = running
	}, timeout, interval).Should(Succeed())
	return out
}

func getRBP(g Gomega, ns, name string) *autorebootv1alpha1.RebootPolicy {
	var rbp autorebootv1alpha1.RebootPolicy
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &rbp)).To(Succeed())
	return &rbp
}

func restartCount(g Gomega, ns, name string) int64 { return getRBP(g, ns, name).Status.RestartCount }

// waitBaseline waits until the policy recorded a successful observation.
func waitBaseline(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		rbp := getRBP(g, ns, name)
		g.Expect(rbp.Status.Policies).NotTo(BeEmpty())
		g.Expect(rbp.Status.Policies[0].LastResult).To(Equal(autorebootv1alpha1.ResultSuccess), "policy status %+v", rbp.Status.Policies[0])
	}, timeout, interval).Should(Succeed())
}
