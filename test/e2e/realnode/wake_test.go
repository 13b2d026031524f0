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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// servingProject is a namespace (prefix+"a") with a Deployment "web" of 2
// real containers behind a Service; serves reports whether the Service
// answers from a web pod.
type servingProject struct {
	prefix, ns string
	web        []string
	serves     func() error
}

func newServingProject(t *testing.T, base string) *servingProject {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	p := &servingProject{prefix: base + hex.EncodeToString(b) + "-"}
	p.ns = p.prefix + "a"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), p.ns, metav1.DeleteOptions{}) })
	must(t, k8s.Create(ctx, realDeployment(p.ns, "web", 2)))
	svc, err := cs.CoreV1().Services(p.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/env"
	p.serves = func() error {
		body, err := httpGet(ctx, node.DialContext, url)
		if err == nil && !strings.Contains(body, "HOSTNAME=web-") {
			err = fmt.Errorf("the Service's answer is not from a web pod: %q", body)
		}
		return err
	}
	p.web = waitContainers(t, p.ns, "web", 2, nil)
	eventually(t, 2*time.Minute, "web serving at first", p.serves)
	return p
}

// waitParked waits until the namespace has no pod and no container left
// on the node.
func (p *servingProject) waitParked(t *testing.T, what string) {
	t.Helper()
	eventually(t, 4*time.Minute, what, func() error {
		pods, err := cs.CoreV1().Pods(p.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		if left := containersOfNamespace(t, p.ns); len(left) > 0 {
			return fmt.Errorf("containers still running on the node: %v", left)
		}
		return nil
	})
	assertStopped(t, p.web)
}

// waitServing waits until new containers run and serve again.
func (p *servingProject) waitServing(t *testing.T, what string) {
	t.Helper()
	p.web = waitContainers(t, p.ns, "web", 2, p.web)
	eventually(t, 2*time.Minute, what, p.serves)
}

// TestWakeRequestWakesRealContainers: a parked namespace's team wakes it
// with a WakeRequest; its containers start again on the node and serve;
// deleting the request stops them again.
func TestWakeRequestWakesRealContainers(t *testing.T) {
	ctx := context.Background()
	p := newServingProject(t, "rnw")
	scaler := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: p.prefix + "self"}, Spec: scalingv1alpha1.NSScalerSpec{
		NamespacePrefix: p.prefix,
		SelfService:     &scalingv1alpha1.SelfService{Enabled: true, MaxDuration: &metav1.Duration{Duration: time.Hour}, MaxPerDay: 3},
	}}
	must(t, k8s.Create(ctx, scaler))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), scaler) })
	p.waitParked(t, "the namespace parked, its containers gone from the node")

	wr := &scalingv1alpha1.WakeRequest{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "debug"},
		Spec: scalingv1alpha1.WakeRequestSpec{Duration: &metav1.Duration{Duration: 30 * time.Minute}}}
	must(t, k8s.Create(ctx, wr))
	t0 := time.Now()
	eventually(t, 2*time.Minute, "the request granted", func() error {
		var got scalingv1alpha1.WakeRequest
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(wr), &got); err != nil {
			return err
		}
		if got.Status.Phase != scalingv1alpha1.WakeRequestGranted {
			return fmt.Errorf("phase %q", got.Status.Phase)
		}
		return nil
	})
	p.waitServing(t, "web serving after the WakeRequest")
	t.Logf("woken by a WakeRequest: web %v run on the node and serve %s after the request", short(p.web), time.Since(t0).Round(time.Millisecond))

	must(t, k8s.Delete(ctx, wr))
	p.waitParked(t, "the namespace parked again after the request was deleted")
}

// TestScheduleRealClockParksAndWakesRealContainers: a sleep window that
// opens within a minute and lasts two parks the namespace by itself on the
// real clock (its containers stop on the node) and wakes it at its end
// (new containers serve).
func TestScheduleRealClockParksAndWakesRealContainers(t *testing.T) {
	ctx := context.Background()
	p := newServingProject(t, "rns")
	now := time.Now().UTC()
	opens := now.Truncate(time.Minute).Add(time.Minute)
	if opens.Sub(now) < 20*time.Second {
		opens = opens.Add(time.Minute)
	}
	closes := opens.Add(2 * time.Minute)
	scaler := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: p.prefix + "window"}, Spec: scalingv1alpha1.NSScalerSpec{
		NamespacePrefix: p.prefix,
		Schedule: &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "UTC", Windows: []weeklyv1alpha1.Window{
			{Days: "Mon-Sun", From: opens.Format("15:04"), To: closes.Format("15:04")},
		}}},
	}}
	must(t, k8s.Create(ctx, scaler))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), scaler) })
	eventually(t, time.Minute, "the NSScaler awake until the window opens", func() error {
		var s scalingv1alpha1.NSScaler
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(scaler), &s); err != nil {
			return err
		}
		if s.Status.Phase != scalingv1alpha1.PhaseAwake || s.Status.NextTransition == nil || !s.Status.NextTransition.Time.Equal(opens) {
			return fmt.Errorf("phase %q, next transition %v, want Awake until %s", s.Status.Phase, s.Status.NextTransition, opens)
		}
		return nil
	})
	p.waitParked(t, "the namespace parked by the window")
	if time.Now().Before(opens) {
		t.Fatalf("parked at %s, before the window opened at %s", time.Now().UTC(), opens)
	}
	t.Logf("parked %s after the window opened", time.Since(opens).Round(time.Millisecond))
	p.waitServing(t, "web serving after the window closed")
	if time.Now().Before(closes) {
		t.Fatalf("woken at %s, before the window closed at %s", time.Now().UTC(), closes)
	}
	t.Logf("woken %s after the window closed: web %v serve", time.Since(closes).Round(time.Millisecond), short(p.web))
}
