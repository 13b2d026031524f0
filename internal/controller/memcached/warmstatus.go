package memcached

import (
	"context"
	"fmt"
	"slices"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// observeRestarts reads the pods of a Memcached with warmRestart and
// records the last restart of each one's memcached container. Pods are
// read live (and only here), not cached: a pod watch of the whole cluster
// would cost every manager the memory of every pod. A container restart
// makes the pod unready and ready again, which changes the Service's
// EndpointSlice: that is the reconcile that sees it.
func (r *Reconciler) observeRestarts(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, obs *observation) error {
	if !s.WarmRestart {
		return nil
	}
	obs.warmRestart = true
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(mc.Namespace), client.MatchingLabels(selectorLabels(mc))); err != nil {
		return fmt.Errorf("listing the pods of Memcached %s/%s: %w", mc.Namespace, mc.Name, err)
	}
	for i := range pods.Items {
		if rs, ok := restartOf(&pods.Items[i]); ok {
			obs.restarts = append(obs.restarts, rs)
		}
	}
	return nil
}

// restartOf is the last restart of the pod's memcached container, once
// the next memcached runs. Whether it was warm is read from how the
// previous one ended: memcached exits 0 after a stop signal it handles,
// and with SIGUSR1 (the stop signal warmRestart sets) it saved its items
// first; a kill, an OOM kill or an error leaves no saved metadata.
func restartOf(pod *corev1.Pod) (cachev1alpha1.RestartStatus, bool) {
	i := slices.IndexFunc(pod.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool { return c.Name == containerMemcached })
	if i < 0 {
		return cachev1alpha1.RestartStatus{}, false
	}
	cs := &pod.Status.ContainerStatuses[i]
	t := cs.LastTerminationState.Terminated
	if t == nil || cs.State.Running == nil {
		return cachev1alpha1.RestartStatus{}, false
	}
	started := cs.State.Running.StartedAt
	rs := cachev1alpha1.RestartStatus{Pod: pod.Name, StoppedAt: t.FinishedAt, StartedAt: &started, Outcome: cachev1alpha1.RestartCold}
	switch {
	case t.Reason == "OOMKilled":
		rs.Reason, rs.Message = cachev1alpha1.ReasonOOMKilled, "memcached was killed for exceeding the container's memory limit"
	case t.ExitCode > 128:
		rs.Reason, rs.Message = cachev1alpha1.ReasonKilled, fmt.Sprintf("memcached was killed by signal %d (%s, exit code %d) before it could save its items", t.ExitCode-128, syscall.Signal(t.ExitCode-128), t.ExitCode)
	case t.ExitCode != 0:
		rs.Reason, rs.Message = cachev1alpha1.ReasonFailed, fmt.Sprintf("memcached exited with code %d", t.ExitCode)
	case cs.StopSignal != nil && *cs.StopSignal != cachev1alpha1.WarmRestartStopSignal:
		rs.Reason, rs.Message = cachev1alpha1.ReasonStopSignal, fmt.Sprintf("the container's stop signal is %s: memcached saves its items only on SIGUSR1 (see docs/memcached.md, warm restarts)", *cs.StopSignal)
	case started.Unix() <= t.FinishedAt.Unix():
		rs.Reason, rs.Message = cachev1alpha1.ReasonRestartedTooSoon, "memcached started again within the second it stopped in and refuses a memory file whose stop time is not in the past"
	default:
		rs.Outcome, rs.Reason, rs.Message = cachev1alpha1.RestartWarm, cachev1alpha1.ReasonStoppedCleanly, "memcached saved its items on its stop signal and started with them"
	}
	return rs, true
}

// lastRestart is the restart the status shows: the latest one observed,
// or the stored one while no newer one is seen (a new pod shows no restart
// of its own). Without warmRestart there is none.
func lastRestart(stored *cachev1alpha1.RestartStatus, obs observation) *cachev1alpha1.RestartStatus {
	if !obs.warmRestart {
		return nil
	}
	last := stored
	for i := range obs.restarts {
		if newerRestart(&obs.restarts[i], last) {
			last = &obs.restarts[i]
		}
	}
	return last
}

// newerRestart: r stopped after than, or than is nil. A restart in the
// same second as the stored one counts as seen, so none is reported twice.
func newerRestart(r, than *cachev1alpha1.RestartStatus) bool {
	return than == nil || r.StoppedAt.After(than.StoppedAt.Time)
}

// reportRestarts counts and announces the restarts newer than the one the
// previous status showed, after a status write that recorded them.
func (r *Reconciler) reportRestarts(mc *cachev1alpha1.Memcached, obs *observation, before *cachev1alpha1.RestartStatus) {
	for i := range obs.restarts {
		rs := &obs.restarts[i]
		if !newerRestart(rs, before) {
			continue
		}
		r.Metrics.restarted(rs.Outcome)
		if rs.Outcome == cachev1alpha1.RestartWarm {
			obs.events.Normal(mc, nil, cachev1alpha1.EventWarmRestart, "Restart", "Pod %s: memcached restarted with its items (%s)", rs.Pod, rs.Reason)
		} else {
			obs.events.Warning(mc, nil, cachev1alpha1.EventColdRestart, "Restart", "Pod %s: memcached restarted without its items (%s): %s", rs.Pod, rs.Reason, rs.Message)
		}
	}
}
