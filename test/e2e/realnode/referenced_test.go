package realnode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The referenced sample on real containers: a change of the ConfigMap a
// Deployment reads with envFrom replaces its containers, and the new ones
// see the new value in their environment (read from inside each container
// over HTTP), where the old ones saw the old one.
func TestReferencedConfigMapReachesNewContainers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	must(t, k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"MODE": "a"}}))
	dep := realDeployment(ns, "web", 2)
	dep.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}
	must(t, k8s.Create(ctx, dep))
	before := waitContainers(t, ns, "web", 2, nil)
	assertEnv(t, ns, "web", "MODE=a")

	must(t, k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-on-references"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target:             autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			MinRestartInterval: &metav1.Duration{},
			Policies: []autorebootv1alpha1.Policy{{Name: "references", Trigger: autorebootv1alpha1.Trigger{
				Referenced: &autorebootv1alpha1.ReferencedTrigger{PeriodSeconds: 2}}}},
		},
	}))
	eventually(t, time.Minute, "the policy tracking web-config", func() error {
		ps := getPolicy(t, ns, "web-on-references").Status.Policies
		if len(ps) != 1 || ps[0].LastResult != autorebootv1alpha1.ResultSuccess || !strings.Contains(ps[0].Message, "tracking 1 reference") {
			return fmt.Errorf("policy status %+v", ps)
		}
		return nil
	})

	_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "web-config", types.MergePatchType, []byte(`{"data":{"MODE":"b"}}`), metav1.PatchOptions{})
	must(t, err)
	after := waitContainers(t, ns, "web", 2, before)
	assertStopped(t, before)
	assertEnv(t, ns, "web", "MODE=b")
	t.Logf("containers %v (MODE=a) -> %v (MODE=b)", short(before), short(after))
	if c := getPolicy(t, ns, "web-on-references").Status.RestartCount; c != 1 {
		t.Fatalf("restartCount %d after one change, want 1", c)
	}
}

// assertEnv reads GET /env of every pod of app at its pod IP, from the node,
// and fails unless each holds line.
func assertEnv(t *testing.T, ns, app, line string) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.Set{"app": app}.String()})
	must(t, err)
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		body, err := httpGet(context.Background(), node.DialContext, "http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/env")
		must(t, err)
		if !strings.Contains(body, "\n"+line+"\n") && !strings.HasPrefix(body, line+"\n") {
			t.Fatalf("pod %s's container (%s) lacks %s in its environment:\n%s", p.Name, containerID(&p)[:12], line, body)
		}
	}
}
