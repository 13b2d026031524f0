package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A pod on the real node runs a real container that answers through a
// Service from the node and from another pod; deleting the pod stops the
// container.
func TestServiceReachesRealContainer(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	marker := "MARKER=" + hex.EncodeToString(b)
	labels := map[string]string{"app": "web"}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, webPod("web", labels, corev1.EnvVar{Name: "MARKER", Value: hex.EncodeToString(b)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := waitReady(t, ns, "web", 2*time.Minute)
	if pod.Spec.NodeName != node.Name {
		t.Fatalf("web runs on %s, not on the real node %s", pod.Spec.NodeName, node.Name)
	}
	id := containerID(pod)
	if id == "" || !slices.Contains(runningContainers(t, node), id) {
		t.Fatalf("the pod's container %q is not among the node's running containers %v", id, runningContainers(t, node))
	}
	t.Logf("pod web: IP %s, container %s running on %s", pod.Status.PodIP, id[:12], node.Name)
	// The apiserver reaches the kubelet (logs, exec) with its client certificate.
	if _, err := kc.Kubectl(ctx, "logs", "-n", ns, "web"); err != nil {
		t.Fatalf("kubectl logs of a real pod: %v", err)
	}

	url := fmt.Sprintf("http://%s/env", net.JoinHostPort(svc.Spec.ClusterIP, "80"))
	// kube-proxy programs the Service shortly after the endpoint is ready.
	eventually(t, time.Minute, "the Service from the node", func() error {
		body, err := httpGet(ctx, node.DialContext, url)
		if err == nil && !strings.Contains(body, marker) {
			err = fmt.Errorf("the answer lacks %s: %q", marker, body)
		}
		return err
	})

	if _, err := cs.CoreV1().Pods(ns).Create(ctx, webPod("client", map[string]string{"app": "client"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "client", 2*time.Minute)
	fromClient := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return node.DialFromPod(ctx, ns, "client", network, addr)
	}
	eventually(t, 30*time.Second, "the Service from another pod", func() error {
		body, err := httpGet(ctx, fromClient, url)
		if err == nil && !strings.Contains(body, marker) {
			err = fmt.Errorf("the answer lacks %s: %q", marker, body)
		}
		return err
	})

	if err := cs.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the deleted pod's container to stop", func() error {
		if slices.Contains(runningContainers(t, node), id) {
			return fmt.Errorf("container %s still running", id[:12])
		}
		return nil
	})
	eventually(t, time.Minute, "the pod object to go", func() error {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod web still exists (%v)", err)
	})
}
