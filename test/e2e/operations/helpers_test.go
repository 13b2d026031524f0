package operations

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// kubectlAs runs the built kubectl with another kubeconfig (the
// ServiceAccount's) and returns its combined output.
func kubectlAs(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func createNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return name
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/" + name + ":1"}}},
			},
		},
	}
}

// leaseHolder returns the holderIdentity of the leader election Lease ("" when
// nobody holds it or it does not exist yet).
func leaseHolder(g Gomega, id string) string {
	var l coordinationv1.Lease
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: systemNamespace, Name: id}, &l)
	if err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// replicaSets counts the ReplicaSets a Deployment owns: one per pod template
// it ever had (the history limit is far above what these tests create), so
// every restart adds exactly one.
func replicaSets(g Gomega, ns, deploy string) int {
	var l appsv1.ReplicaSetList
	g.Expect(k8s.List(context.Background(), &l, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, rs := range l.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" && ref.Name == deploy {
			n++
		}
	}
	return n
}

func restartedAt(g Gomega, ns, deploy string) string {
	var d appsv1.Deployment
	g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: deploy}, &d)).To(Succeed())
	return d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
}

func getRBP(g Gomega, ns, name string) *autorebootv1alpha1.RebootPolicy {
	var rbp autorebootv1alpha1.RebootPolicy
	g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &rbp)).To(Succeed())
	return &rbp
}

// waitBaseline waits until every policy recorded a successful observation.
func waitBaseline(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		rbp := getRBP(g, ns, name)
		g.Expect(rbp.Status.Policies).To(HaveLen(len(rbp.Spec.Policies)))
		for _, p := range rbp.Status.Policies {
			g.Expect(p.LastResult).To(Equal(autorebootv1alpha1.ResultSuccess), "policy status %+v", p)
		}
	}, timeout, poll).Should(Succeed())
}

// watchPolicy is a RebootPolicy restarting deploy when the data of the
// ConfigMap cm changes, read every second, with no cooldown so that a
// second restart would show at once.
func watchPolicy(ns, name, deploy, cm string) *autorebootv1alpha1.RebootPolicy {
	return &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target:             autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment, Name: deploy},
			MinRestartInterval: &metav1.Duration{},
			Policies: []autorebootv1alpha1.Policy{{
				Name:    "settings",
				Trigger: autorebootv1alpha1.Trigger{Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: cm, PeriodSeconds: 1}},
			}},
		},
	}
}

func setConfigMap(g Gomega, ns, name, value string) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	if client.IgnoreNotFound(err) != nil {
		g.Expect(err).NotTo(HaveOccurred())
	}
	cm.Data = map[string]string{"value": value}
	if err != nil {
		g.Expect(k8s.Create(ctx, cm)).To(Succeed())
		return
	}
	g.Expect(k8s.Update(ctx, cm)).To(Succeed())
}

// expectRestarts checks that the policy restarted its Deployment exactly n
// times: status.restartCount, and one new ReplicaSet per restart.
func expectRestarts(g Gomega, ns, rbp, deploy string, n int) {
	g.Expect(getRBP(g, ns, rbp).Status.RestartCount).To(Equal(int64(n)), "status.restartCount")
	g.Expect(replicaSets(g, ns, deploy)).To(Equal(n+1), "ReplicaSets of %s/%s", ns, deploy)
}

// memcachedSettled checks that a Memcached is Available with size pods
// Running and one server per pod in status.
func memcachedSettled(g Gomega, ns, name string, size int) {
	ctx := context.Background()
	var pods corev1.PodList
	g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "memcached"})).To(Succeed())
	var ips []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			ips = append(ips, p.Status.PodIP+":11211")
		}
	}
	g.Expect(ips).To(HaveLen(size), "running memcached pods")
	var mc cachev1alpha1.Memcached
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &mc)).To(Succeed())
	g.Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation))
	avail := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionAvailable)
	g.Expect(avail).NotTo(BeNil())
	g.Expect(avail.Status).To(Equal(metav1.ConditionTrue), "Available: %s", avail.Message)
	g.Expect(mc.Status.ReadyReplicas).To(Equal(int32(size)))
	g.Expect(mc.Status.Servers).To(ConsistOf(ips))
}

// createMemcached creates config/samples' Memcached in ns under name with
// the given size.
func createMemcached(g Gomega, ns, name string, size int32) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "cache_v1alpha1_memcached.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var mc cachev1alpha1.Memcached
	g.Expect(yaml.Unmarshal(raw, &mc)).To(Succeed())
	mc.Name, mc.Namespace = name, ns
	mc.Spec.Size = ptr.To(size)
	g.Expect(k8s.Create(context.Background(), &mc)).To(Succeed())
}

// originalAnnotation is where the NSScaler records a parked workload's
// replica count (docs/nsscaler.md).
const originalAnnotation = "scaling.runbook.dev/original"

// originalReplicas reads the replica count recorded on a parked Deployment.
func originalReplicas(g Gomega, d *appsv1.Deployment) int32 {
	raw, ok := d.Annotations[originalAnnotation]
	g.Expect(ok).To(BeTrue(), "%s/%s has no %s annotation", d.Namespace, d.Name, originalAnnotation)
	var rec struct {
		Replicas *int32 `json:"replicas"`
	}
	g.Expect(json.Unmarshal([]byte(raw), &rec)).To(Succeed(), "annotation %q", raw)
	g.Expect(rec.Replicas).NotTo(BeNil(), "annotation %q", raw)
	return *rec.Replicas
}

// rbacDenied matches every authorization failure of the ServiceAccount
// (`<resource> is forbidden: User "system:serviceaccount:…" cannot <verb>
// resource …`, with the quotes escaped in JSON and klog lines). Other 403s,
// e.g. "forbidden: unable to create new content in namespace … because it
// is being terminated", are admission, not RBAC.
var rbacDenied = regexp.MustCompile(`is forbidden: User \\?"system:serviceaccount:` + systemNamespace + ":" + serviceAccount + `\\?" cannot`)
