package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/reloadercompat"
)

// Reloader compatibility mode (the suite's manager runs with
// --reloader-compat) on real containers. Three Deployments read ConfigMap
// web-config: "auto" with Reloader's reloader.stakater.com/auto, "named"
// through configmap.reloader.stakater.com/reload naming it, "plain" with no
// Reloader annotation. A change of web-config replaces the pods of the two
// annotated ones (new pod UIDs, new containers from the node, the old ones
// stopped), whose new containers serve the new value from their
// environment; "plain" keeps its pod, its container and the old value.
// `kubectl runbook status` lists the two as ReloaderCompat. The test logs
// the seconds from the ConfigMap change to each workload's new pods Ready.
func TestReloaderCompatReplacesRealContainers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	must(t, k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"MODE": "a"}}))

	envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}
	auto := realDeployment(ns, "auto", 2)
	auto.Annotations = map[string]string{reloadercompat.AnnotationAuto: "true"}
	auto.Spec.Template.Spec.Containers[0].EnvFrom = envFrom
	named := realDeployment(ns, "named", 1)
	named.Annotations = map[string]string{reloadercompat.AnnotationConfigMapList: "web-config"}
	named.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, Key: "MODE"}}}}
	plain := realDeployment(ns, "plain", 1)
	plain.Spec.Template.Spec.Containers[0].EnvFrom = envFrom
	replicas := map[string]int{"auto": 2, "named": 1, "plain": 1}
	for _, d := range []*appsv1.Deployment{auto, named, plain} {
		must(t, k8s.Create(ctx, d))
	}
	before, uids := map[string][]string{}, map[string][]types.UID{}
	for _, app := range []string{"auto", "named", "plain"} {
		before[app] = waitContainers(t, ns, app, replicas[app], nil)
		uids[app] = podUIDs(t, ns, app)
		assertEnv(t, ns, app, "MODE=a")
	}

	// The compat mode made a tracking policy for each annotated workload
	// and none for plain.
	for _, app := range []string{"auto", "named"} {
		eventually(t, 2*time.Minute, "the compat policy of "+app+" tracking web-config", func() error {
			p := &autorebootv1alpha1.RebootPolicy{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reloader-deploy-" + app}, p); err != nil {
				return err
			}
			ps := p.Status.Policies
			if len(ps) != 1 || ps[0].LastResult != autorebootv1alpha1.ResultSuccess || !strings.Contains(ps[0].Message, "tracking 1 reference") {
				return fmt.Errorf("policy status %+v", ps)
			}
			return nil
		})
	}
	policies := &autorebootv1alpha1.RebootPolicyList{}
	must(t, k8s.List(ctx, policies, client.InNamespace(ns)))
	var names []string
	for _, p := range policies.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"reloader-deploy-auto", "reloader-deploy-named"}) {
		t.Fatalf("RebootPolicies %v, want one per annotated Deployment", names)
	}

	t0 := time.Now()
	_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "web-config", types.MergePatchType, []byte(`{"data":{"MODE":"b"}}`), metav1.PatchOptions{})
	must(t, err)
	// readyAfter: the new pods are Ready; replacedAfter: the old ones are
	// gone too.
	after, readyAfter, replacedAfter := map[string][]string{}, map[string]time.Duration{}, map[string]time.Duration{}
	eventually(t, 4*time.Minute, "new Ready pods of auto and named", func() error {
		var waiting []string
		for _, app := range []string{"auto", "named"} {
			if _, done := replacedAfter[app]; done {
				continue
			}
			if _, done := readyAfter[app]; !done && newReadyPods(t, ns, app, uids[app]) == replicas[app] {
				readyAfter[app] = time.Since(t0)
			}
			ids, err := newContainers(t, ns, app, replicas[app], before[app])
			if err != nil {
				waiting = append(waiting, app+": "+err.Error())
				continue
			}
			after[app], replacedAfter[app] = ids, time.Since(t0)
			if _, done := readyAfter[app]; !done {
				readyAfter[app] = replacedAfter[app]
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("%s", strings.Join(waiting, "; "))
		}
		return nil
	})
	for _, app := range []string{"auto", "named"} {
		t.Logf("%s: ConfigMap change -> restart stamp after %.0fs (whole seconds) -> %d new pods Ready after %.1fs -> old pods gone after %.1fs; containers %v -> %v",
			app, restartedAt(t, ns, app).Sub(t0.Truncate(time.Second)).Seconds(), replicas[app], readyAfter[app].Seconds(),
			replacedAfter[app].Seconds(), short(before[app]), short(after[app]))
		assertStopped(t, before[app])
		if now := podUIDs(t, ns, app); slices.ContainsFunc(now, func(u types.UID) bool { return slices.Contains(uids[app], u) }) {
			t.Errorf("%s keeps a pod of before the change: %v -> %v", app, uids[app], now)
		}
		assertEnv(t, ns, app, "MODE=b")
		eventually(t, time.Minute, "one restart of "+app+"'s compat policy", func() error {
			if c := getPolicy(t, ns, "reloader-deploy-"+app).Status.RestartCount; c != 1 {
				return fmt.Errorf("restartCount %d", c)
			}
			return nil
		})
	}

	// Both restarts are done and counted: plain was not restarted with
	// them, its pod and container are those of before, and it still serves
	// the value it started with.
	d := &appsv1.Deployment{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, d))
	if stamp, ok := d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; ok {
		t.Fatalf("plain, not annotated, was restarted (%s)", stamp)
	}
	if now := waitContainers(t, ns, "plain", 1, nil); !slices.Equal(now, before["plain"]) {
		t.Fatalf("plain's container changed: %v -> %v", short(before["plain"]), short(now))
	}
	if now := podUIDs(t, ns, "plain"); !slices.Equal(now, uids["plain"]) {
		t.Fatalf("plain's pod changed: %v -> %v", uids["plain"], now)
	}
	assertEnv(t, ns, "plain", "MODE=a")

	out := pluginStatus(t, ns)
	t.Logf("kubectl runbook status -n %s:\n%s", ns, out)
	for _, want := range []string{"ReloaderCompat", "deployment/auto", "deployment/named", "RebootPolicy reloader-deploy-auto, 1 object tracked"} {
		if !strings.Contains(out, want) {
			t.Errorf("the status output lacks %q", want)
		}
	}
	if strings.Contains(out, "plain") {
		t.Errorf("the status output lists plain, which is not annotated")
	}
}

// podUIDs are the sorted UIDs of the app's pods that are not being deleted.
func podUIDs(t *testing.T, ns, app string) []types.UID {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.Set{"app": app}.String()})
	must(t, err)
	var uids []types.UID
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			uids = append(uids, p.UID)
		}
	}
	slices.Sort(uids)
	return uids
}

// newReadyPods counts the app's Ready pods that are not among old.
func newReadyPods(t *testing.T, ns, app string, old []types.UID) int {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.Set{"app": app}.String()})
	must(t, err)
	n := 0
	for _, p := range pods.Items {
		if slices.Contains(old, p.UID) || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}
