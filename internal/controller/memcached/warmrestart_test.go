package memcached

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func TestWarmRestartIsRendered(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{WarmRestart: true, MemoryMiB: ptr.To[int32](256),
		PodOverrides: cachev1alpha1.PodOverrides{PreStopDelaySeconds: 5}})
	pod := d.Spec.Template.Spec
	c := containerNamed(t, pod, containerMemcached)
	if i := slices.Index(c.Args, "-e"); i < 0 || c.Args[i+1] != cachev1alpha1.WarmRestartMemoryFile {
		t.Errorf("args %v lack -e %s", c.Args, cachev1alpha1.WarmRestartMemoryFile)
	}
	if c.Lifecycle == nil || c.Lifecycle.StopSignal == nil || *c.Lifecycle.StopSignal != corev1.SIGUSR1 {
		t.Errorf("lifecycle = %+v, want stopSignal SIGUSR1", c.Lifecycle)
	}
	if c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 5 {
		t.Errorf("the preStop delay was lost: %+v", c.Lifecycle.PreStop)
	}
	if pod.OS == nil || pod.OS.Name != corev1.Linux {
		t.Errorf("os = %+v: a stopSignal needs os.name", pod.OS)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == cachev1alpha1.WarmRestartVolume && m.MountPath == cachev1alpha1.WarmRestartMountPath && !m.ReadOnly
	}) {
		t.Errorf("mounts %+v lack the warm-restart volume", c.VolumeMounts)
	}
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == cachev1alpha1.WarmRestartVolume })
	if i < 0 || pod.Volumes[i].EmptyDir == nil || pod.Volumes[i].EmptyDir.Medium != corev1.StorageMediumMemory ||
		pod.Volumes[i].EmptyDir.SizeLimit.Cmp(resource.MustParse("257Mi")) != 0 {
		t.Fatalf("volumes %+v: want a 257Mi memory emptyDir", pod.Volumes)
	}
	// The memory limit stays memoryMiB plus headroom: the file's pages are
	// the item memory (measured in test/e2e/realnode).
	if lim := c.Resources.Limits[corev1.ResourceMemory]; lim.Cmp(*defaultMemoryLimit(256, resource.Quantity{})) != 0 {
		t.Errorf("memory limit %s", lim.String())
	}
	if p := restrictedProblems(t, &d.Spec.Template.ObjectMeta, &pod); p != "" {
		t.Errorf("restricted refuses the warm pod: %s", p)
	}
	_, cold := buildDeployment(t, cachev1alpha1.MemcachedSpec{})
	cc := containerNamed(t, cold.Spec.Template.Spec, containerMemcached)
	if slices.Contains(cc.Args, "-e") || cc.Lifecycle != nil || cold.Spec.Template.Spec.OS != nil || len(cold.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("without warmRestart: args %v, lifecycle %+v, os %+v, volumes %+v", cc.Args, cc.Lifecycle, cold.Spec.Template.Spec.OS, cold.Spec.Template.Spec.Volumes)
	}
}

// A tenant cannot point memcached's memory file elsewhere or shadow it.
func TestHostileWarmRestartSpecsAreRefused(t *testing.T) {
	vol := func(path string) cachev1alpha1.MemcachedSpec {
		return cachev1alpha1.MemcachedSpec{WarmRestart: true, PodOverrides: cachev1alpha1.PodOverrides{ExtraVolumes: []cachev1alpha1.ExtraVolume{
			{Name: "x", MountPath: path, EmptyDir: &cachev1alpha1.EmptyDirVolume{}}}}}
	}
	for name, tt := range map[string]struct {
		spec cachev1alpha1.MemcachedSpec
		want string
	}{
		"too little memory":       {cachev1alpha1.MemcachedSpec{WarmRestart: true, MemoryMiB: ptr.To[int32](38)}, "at least 39 MiB, not 38"},
		"too little from a limit": {cachev1alpha1.MemcachedSpec{WarmRestart: true, Resources: memoryLimit("48Mi")}, "at least 39 MiB, not 32"},
		"-e in extraArgs":         {cachev1alpha1.MemcachedSpec{WarmRestart: true, ExtraArgs: []string{"-e", "/tmp/f"}}, "warmRestart manages"},
		"bundled -Me":             {cachev1alpha1.MemcachedSpec{WarmRestart: true, ExtraArgs: []string{"-Me/tmp/f"}}, "warmRestart manages"},
		"--memory-f prefix":       {cachev1alpha1.MemcachedSpec{WarmRestart: true, ExtraArgs: []string{"--memory-f=/tmp/f"}}, "warmRestart manages"},
		"volume over the file":    {vol(cachev1alpha1.WarmRestartMountPath), "over the warm-restart memory file"},
		"volume below the file":   {vol(cachev1alpha1.WarmRestartMountPath + "/memory"), "over the warm-restart memory file"},
		"volume over its parent":  {vol("/var/lib/"), "over the warm-restart memory file"},
		"a sidecar mounting the memory file's volume": {cachev1alpha1.MemcachedSpec{WarmRestart: true, PodOverrides: cachev1alpha1.PodOverrides{Sidecars: []cachev1alpha1.ExtraContainer{
			{Name: "peek", Image: "x", VolumeMounts: []cachev1alpha1.ContainerVolumeMount{{Name: cachev1alpha1.WarmRestartVolume, MountPath: "/peek"}}}}}}, "not an extraVolume"},
		"volume named like its own": {cachev1alpha1.MemcachedSpec{WarmRestart: true, PodOverrides: cachev1alpha1.PodOverrides{ExtraVolumes: []cachev1alpha1.ExtraVolume{
			{Name: cachev1alpha1.WarmRestartVolume, MountPath: "/data", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}}}}, "name prefix memcached-"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resolveSettings(&tt.spec)
			var invalid *invalidSpecError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want an invalid spec containing %q", err, tt.want)
			}
		})
	}
	// Without warmRestart -e stays the user's (on their own extra volume).
	spec := cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-e", "/data/f"}}
	if _, err := resolveSettings(&spec); err != nil {
		t.Errorf("-e without warmRestart: %v", err)
	}
}

// restartedPod is a pod whose memcached container ran again at started
// after the previous one ended as term says.
func restartedPod(name string, term corev1.ContainerStateTerminated, started time.Time, stopSignal *corev1.Signal) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{labelName: nameValue, labelInstance: "warm", labelManagedBy: managedByValue}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name:                 containerMemcached,
			RestartCount:         1,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
			LastTerminationState: corev1.ContainerState{Terminated: &term},
			StopSignal:           stopSignal,
		}}},
	}
}

func TestRestartOutcome(t *testing.T) {
	stop := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	ended := func(code int32, reason string) corev1.ContainerStateTerminated {
		return corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.NewTime(stop)}
	}
	for name, tt := range map[string]struct {
		pod            *corev1.Pod
		outcome        cachev1alpha1.RestartOutcome
		reason, inText string
	}{
		"clean stop":           {restartedPod("a", ended(0, "Completed"), stop.Add(2*time.Second), nil), cachev1alpha1.RestartWarm, cachev1alpha1.ReasonStoppedCleanly, "saved"},
		"reported SIGUSR1":     {restartedPod("a", ended(0, "Completed"), stop.Add(2*time.Second), ptr.To(corev1.SIGUSR1)), cachev1alpha1.RestartWarm, cachev1alpha1.ReasonStoppedCleanly, "saved"},
		"SIGKILL":              {restartedPod("a", ended(137, "Error"), stop.Add(2*time.Second), nil), cachev1alpha1.RestartCold, cachev1alpha1.ReasonKilled, "signal 9 (killed"},
		"OOM":                  {restartedPod("a", ended(137, "OOMKilled"), stop.Add(2*time.Second), nil), cachev1alpha1.RestartCold, cachev1alpha1.ReasonOOMKilled, "memory limit"},
		"error":                {restartedPod("a", ended(71, "Error"), stop.Add(2*time.Second), nil), cachev1alpha1.RestartCold, cachev1alpha1.ReasonFailed, "code 71"},
		"same second":          {restartedPod("a", ended(0, "Completed"), stop.Add(400*time.Millisecond), nil), cachev1alpha1.RestartCold, cachev1alpha1.ReasonRestartedTooSoon, "second it stopped"},
		"stopped with SIGTERM": {restartedPod("a", ended(0, "Completed"), stop.Add(2*time.Second), ptr.To(corev1.SIGTERM)), cachev1alpha1.RestartCold, cachev1alpha1.ReasonStopSignal, "SIGTERM"},
	} {
		t.Run(name, func(t *testing.T) {
			rs, ok := restartOf(tt.pod)
			if !ok || rs.Outcome != tt.outcome || rs.Reason != tt.reason || !strings.Contains(rs.Message, tt.inText) || rs.Pod != "a" || !rs.StoppedAt.Equal(&metav1.Time{Time: stop}) {
				t.Errorf("restart = %+v (%v), want %s/%s mentioning %q", rs, ok, tt.outcome, tt.reason, tt.inText)
			}
		})
	}
	waiting := restartedPod("a", ended(0, "Completed"), stop, nil)
	waiting.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	if _, ok := restartOf(waiting); ok {
		t.Error("a container that does not run again yet has no outcome")
	}
	if _, ok := restartOf(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: containerMemcached}}}}); ok {
		t.Error("a first start is no restart")
	}
}

// The status shows the latest restart; each restart is counted and
// announced once, however often the pods are seen again.
func TestRestartsAreReportedOnce(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "warm"}
	stop := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	warm := restartedPod("warm-a", corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(stop)}, stop.Add(3*time.Second), nil)
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec: cachev1alpha1.MemcachedSpec{WarmRestart: true}}, warm)
	recorder := events.NewFakeRecorder(20)
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(stop), recorder)
	r.APIReader = lc.server
	r.Metrics = NewMetrics()
	for range 3 {
		reconcileOnce(t, r, key)
	}
	last := lc.memcached(t, key).Status.LastRestart
	if last == nil || last.Outcome != cachev1alpha1.RestartWarm || last.Pod != "warm-a" {
		t.Fatalf("lastRestart = %+v, want warm-a Warm", last)
	}
	// The pod restarts again, killed this time.
	killedAt := stop.Add(time.Minute)
	cold := restartedPod("warm-a", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: metav1.NewTime(killedAt)}, killedAt.Add(time.Second), nil)
	// The fake client keeps a pod's status on Update; replace the pod.
	if err := lc.server.Delete(context.Background(), warm); err != nil {
		t.Fatal(err)
	}
	if err := lc.server.Create(context.Background(), cold); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		reconcileOnce(t, r, key)
	}
	last = lc.memcached(t, key).Status.LastRestart
	if last == nil || last.Outcome != cachev1alpha1.RestartCold || last.Reason != cachev1alpha1.ReasonKilled {
		t.Fatalf("lastRestart = %+v, want Cold/Killed", last)
	}
	if w, c := counterValue(t, r.Metrics.restarts.WithLabelValues("warm")), counterValue(t, r.Metrics.restarts.WithLabelValues("cold")); w != 1 || c != 1 {
		t.Errorf("warm_restarts_total warm=%v cold=%v, want 1 and 1", w, c)
	}
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		if strings.Contains(e, "Restart") {
			got = append(got, e)
		}
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "Normal "+cachev1alpha1.EventWarmRestart) || !strings.HasPrefix(got[1], "Warning "+cachev1alpha1.EventColdRestart) {
		t.Errorf("events %q, want one WarmRestart then one ColdRestart", got)
	}
}

// Without warmRestart no pod is read and no restart is shown.
func TestNoWarmRestartReadsNoPods(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "warm"}
	stop := time.Now()
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1}},
		restartedPod("warm-a", corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: metav1.NewTime(stop)}, stop.Add(time.Second), nil))
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(stop), events.NewFakeRecorder(10))
	reconcileOnce(t, r, key) // a nil APIReader would panic on a read
	if last := lc.memcached(t, key).Status.LastRestart; last != nil {
		t.Errorf("lastRestart = %+v without warmRestart", last)
	}
}
