package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Every pod override on real pods, in a namespace that enforces the
// restricted Pod Security level: an init container (the web image asked
// for its usage, which exits 0) and a sidecar (the web image serving) from
// the node's images, the pod's and memcached's securityContext, a
// priority class and a topology spread. The pods start on the node, the
// apiserver admits them, the sidecar serves and memcached answers.
func TestMemcachedOverridesOnRealPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	must(t, err)
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	_, err = cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	must(t, err)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-cache"}, Value: 1000}
	_, err = cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cs.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})

	web := node.Images["web"]
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "over"},
		Spec: cachev1alpha1.MemcachedSpec{
			Size:                      new(int32(2)),
			AntiAffinity:              cachev1alpha1.AntiAffinityNone,
			PriorityClassName:         pc.Name,
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway}},
			PodOverrides: cachev1alpha1.PodOverrides{
				ExtraVolumes: []cachev1alpha1.ExtraVolume{{Name: "shared", MountPath: "/shared", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}},
				PodSecurityContext: &cachev1alpha1.PodSecurity{RunAsUser: new(int64(11211)), RunAsGroup: new(int64(11211)),
					FSGroup: new(int64(3000)), SupplementalGroups: []int64{4000},
					SeccompProfile: &cachev1alpha1.Profile{Type: cachev1alpha1.ProfileRuntimeDefault}},
				ContainerSecurityContext: &cachev1alpha1.ContainerSecurity{RunAsUser: new(int64(11212))},
				InitContainers:           []cachev1alpha1.ExtraContainer{{Name: "init", Image: web, Args: []string{"-h"}}},
				Sidecars: []cachev1alpha1.ExtraContainer{{Name: "side", Image: web, Args: []string{"-listen=:8080"},
					Ports:        []cachev1alpha1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					VolumeMounts: []cachev1alpha1.ContainerVolumeMount{{Name: "shared", MountPath: "/shared"}},
					SecurityContext: &cachev1alpha1.ExtraContainerSecurity{
						ContainerSecurity: cachev1alpha1.ContainerSecurity{RunAsUser: new(int64(2000))}}}},
			},
		},
	}
	onTheNode(t, &mc.Spec)
	must(t, k8s.Create(ctx, mc))
	servers := waitServers(t, mc, 2, 4*time.Minute)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, p := range pods.Items {
		checkOverriddenPod(t, &p, pc)
	}
	for i, addr := range servers {
		key, value := fmt.Sprintf("k%d", i), "v-"+ns
		reply := memcachedTalk(t, addr, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\nget %s\r\nquit\r\n", key, len(value), value, key))
		if want := fmt.Sprintf("STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value); reply != want {
			t.Fatalf("%s answered %q, want %q", addr, reply, want)
		}
	}
	// The sidecar serves beside memcached, in the pod's network.
	host := strings.Split(servers[0], ":")[0]
	body, err := httpGet(ctx, node.DialContext, "http://"+host+":8080/env")
	must(t, err)
	if !strings.Contains(body, "PATH=") {
		t.Errorf("the sidecar answered %q", body)
	}
}

func checkOverriddenPod(t *testing.T, p *corev1.Pod, pc *schedulingv1.PriorityClass) {
	t.Helper()
	if p.Spec.NodeName != node.Name || p.Spec.PriorityClassName != pc.Name || p.Spec.Priority == nil || *p.Spec.Priority != pc.Value {
		t.Errorf("pod %s: node %q, priority class %q (%v)", p.Name, p.Spec.NodeName, p.Spec.PriorityClassName, p.Spec.Priority)
	}
	if len(p.Spec.TopologySpreadConstraints) != 1 || p.Spec.TopologySpreadConstraints[0].LabelSelector == nil {
		t.Errorf("pod %s: topology spread %+v, want the cache's selector filled in", p.Name, p.Spec.TopologySpreadConstraints)
	}
	for _, s := range p.Status.InitContainerStatuses {
		switch s.Name {
		case "init":
			if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
				t.Errorf("pod %s: init container %+v, want exited 0", p.Name, s.State)
			}
		case "side":
			if s.State.Running == nil {
				t.Errorf("pod %s: sidecar %+v, want running", p.Name, s.State)
			}
		}
	}
	if len(p.Status.InitContainerStatuses) != 2 {
		t.Errorf("pod %s: init container statuses %+v", p.Name, p.Status.InitContainerStatuses)
	}
}
