package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// NSScaler on real pods: parking a namespace stops its containers on the
// node (none is left in crictl), deleting the NSScaler restores each
// Deployment to its exact count and the restored containers serve again
// through their Service.
func TestNSScalerParksRealContainers(t *testing.T) {
	ctx := context.Background()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "rnp" + hex.EncodeToString(b) + "-"
	ns := prefix + "a"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	must(t, k8s.Create(ctx, realDeployment(ns, "web", 2)))
	must(t, k8s.Create(ctx, realDeployment(ns, "api", 1)))
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	web := waitContainers(t, ns, "web", 2, nil)
	api := waitContainers(t, ns, "api", 1, nil)
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/env"
	serves := func() error {
		body, err := httpGet(ctx, node.DialContext, url)
		if err == nil && !strings.Contains(body, "HOSTNAME=web-") {
			err = fmt.Errorf("the Service's answer is not from a web pod: %q", body)
		}
		return err
	}
	eventually(t, time.Minute, "web serving before the park", serves)

	scaler := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: prefix + "window"}, Spec: scalingv1alpha1.NSScalerSpec{NamespacePrefix: prefix}}
	must(t, k8s.Create(ctx, scaler))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), scaler) })
	t0 := time.Now()
	eventually(t, 2*time.Minute, "the namespace parked, its containers gone from the node", func() error {
		var s scalingv1alpha1.NSScaler
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(scaler), &s); err != nil {
			return err
		}
		if !s.Status.Done || s.Status.PodsRemaining != 0 {
			return fmt.Errorf("status done=%v podsRemaining=%d", s.Status.Done, s.Status.PodsRemaining)
		}
		if left := containersOfNamespace(t, ns); len(left) > 0 {
			return fmt.Errorf("containers still running on the node: %v", left)
		}
		return nil
	})
	t.Logf("parked: the %d containers of %s stopped on the node %s after the NSScaler was created", len(web)+len(api), ns, time.Since(t0).Round(time.Millisecond))
	assertStopped(t, append(append([]string{}, web...), api...))

	must(t, k8s.Delete(ctx, scaler))
	t1 := time.Now()
	eventually(t, time.Minute, "the NSScaler gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(scaler), &scalingv1alpha1.NSScaler{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	web2 := waitContainers(t, ns, "web", 2, web)
	api2 := waitContainers(t, ns, "api", 1, api)
	for name, want := range map[string]int32{"web": 2, "api": 1} {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
			t.Errorf("deployment %s restored to %v replicas, want %d", name, d.Spec.Replicas, want)
		}
	}
	eventually(t, time.Minute, "web serving after the restore", serves)
	t.Logf("restored after %s: web %v, api %v run on the node and web serves", time.Since(t1).Round(time.Millisecond), short(web2), short(api2))
}

// containersOfNamespace lists the running containers of a namespace's pods
// on the node.
func containersOfNamespace(t *testing.T, ns string) []string {
	t.Helper()
	out, err := node.Crictl(context.Background(), "ps", "-q", "--label", "io.kubernetes.pod.namespace="+ns)
	must(t, err)
	return strings.Fields(out)
}
