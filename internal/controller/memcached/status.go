package memcached

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// observation is what one reconcile saw and did: the input of the status.
type observation struct {
	// generation is the generation of the spec the reconcile acted on. The
	// status reports it even when it is written onto a fresher copy of a
	// newer generation: that one gets its own reconcile.
	generation int64
	// size and kind are the resolved spec.size and spec.workloadKind.
	size int32
	kind cachev1alpha1.WorkloadKind
	// workload is the live Deployment or StatefulSet owned by the
	// Memcached (after the apply, when there was one); nil when it does
	// not exist (yet) or is foreign.
	workload *workloadState
	// serviceName is set when the headless Service exists and is owned.
	serviceName string
	// servers are the ready endpoints of the Service.
	servers []string
	// foreign lists same-named objects owned by someone else, e.g.
	// "Deployment shop/cache".
	foreign []string
	// invalid is a spec the controller refuses to run.
	invalid error
	// secretNotUsable says which Secret the spec names that may not or
	// cannot be used; nothing is applied.
	secretNotUsable string
	// keyErr: the fingerprint key is unavailable; nothing is applied.
	keyErr error
	// usesSecrets: the spec names Secrets, which are not watched but read
	// again now and then.
	usesSecrets bool
	// applyErr is an apiserver error while reading Secrets or applying the
	// owned objects.
	applyErr error
	// serviceMonitorUnsupported: a ServiceMonitor is wanted but the
	// cluster does not serve the kind.
	serviceMonitorUnsupported bool
	// events are the reconcile's events, recorded once when it ends (after
	// the status write); nil drops them.
	events *status.Batch
	// created lists the kinds created in this reconcile, for one event.
	created []string
	// warmRestart: the spec asks for warm restarts; restarts are the
	// memcached restarts its pods show (warmstatus.go).
	warmRestart bool
	restarts    []cachev1alpha1.RestartStatus
	// tls is the serving certificate seen (tls_renewal.go).
	tls tlsObservation
	// issuance is the cert-manager Certificate of tls.issuerRef
	// (certificate.go).
	issuance issuanceObservation
}

// mayApply: nothing stops the controller from applying the spec.
func (o *observation) mayApply() bool {
	return o.invalid == nil && o.secretNotUsable == "" && o.keyErr == nil && o.applyErr == nil && o.issuance.problem == nil
}

// blocked: the controller did not apply the spec on purpose.
func (o *observation) blocked() bool {
	return o.invalid != nil || o.secretNotUsable != "" || o.keyErr != nil || o.issuance.problem != nil
}

// writeStatus writes the status computed from obs when it differs from the
// stored one, in this reconcile: what a reader sees is never older than the
// last reconcile. mc may come from a cache that has not seen this
// controller's previous status write; the writer then computes on a fresh
// read, so no field is left at a value the cache no longer shows. Warning
// events go out on the transition into a problem, not on every reconcile.
func (r *Reconciler) writeStatus(ctx context.Context, mc *cachev1alpha1.Memcached, obs *observation) error {
	var before []metav1.Condition
	var restartBefore *cachev1alpha1.RestartStatus
	var beforeCert *cachev1alpha1.CertificateStatus
	written, err := r.Status.Update(ctx, mc, func() error {
		before, restartBefore, beforeCert = mc.Status.Conditions, mc.Status.LastRestart, mc.Status.TLSCertificate
		mc.Status = computeStatus(mc, *obs, r.Clock.Now())
		return nil
	})
	if err != nil || !written {
		return err
	}
	r.reportDegraded(mc, obs, before)
	r.reportRestarts(mc, obs, restartBefore)
	r.reportRenewal(mc, obs, beforeCert)
	st := &mc.Status
	log.FromContext(ctx).V(1).Info("status updated", "replicas", st.Replicas, "ready", st.ReadyReplicas, "servers", len(st.Servers))
	return nil
}

// computeStatus derives the whole status from the observation and mc's
// current conditions. It is a pure function of its inputs: the conditions'
// transition times change only when a condition's status does.
func computeStatus(mc *cachev1alpha1.Memcached, obs observation, now time.Time) cachev1alpha1.MemcachedStatus {
	st := cachev1alpha1.MemcachedStatus{
		ObservedGeneration: obs.generation,
		Selector:           selectorString(mc),
		ServiceName:        obs.serviceName,
		Servers:            obs.servers,
		Conditions:         slices.Clone(mc.Status.Conditions),
		LastRestart:        lastRestart(mc.Status.LastRestart, obs),
		TLSCertificate:     nextCertificateStatus(mc.Status.TLSCertificate, obs.tls, now),
		IssuedCertificate:  obs.issuance.status,
	}
	if w := obs.workload; w != nil {
		st.Replicas = w.replicas
		st.ReadyReplicas = w.ready
		st.TLS, st.Auth = ptr.To(w.tls), ptr.To(w.auth)
	}
	conds := status.NewConditions(&st.Conditions, obs.generation, now)
	setDegraded(conds, obs)
	setAvailable(conds, obs)
	setProgressing(conds, obs)
	setCertificateReady(conds, &st.Conditions, obs.issuance)
	return st
}

// setDegraded: the first problem that needs a human wins.
func setDegraded(conds status.Conditions, obs observation) {
	const typ = cachev1alpha1.ConditionDegraded
	var trouble rolloutTrouble
	if obs.workload != nil {
		trouble = obs.workload.trouble
	}
	switch {
	case obs.invalid != nil:
		conds.True(typ, cachev1alpha1.ReasonInvalidSpec, obs.invalid.Error())
	case obs.issuance.problem != nil:
		conds.True(typ, obs.issuance.problem.reason, obs.issuance.problem.msg)
	case obs.secretNotUsable != "":
		conds.True(typ, cachev1alpha1.ReasonSecretNotUsable, obs.secretNotUsable+"; nothing is applied until then, the running instances keep running")
	case obs.keyErr != nil:
		conds.True(typ, cachev1alpha1.ReasonFingerprintKeyUnavailable, obs.keyErr.Error())
	case len(obs.foreign) > 0:
		conds.True(typ, cachev1alpha1.ReasonForeignObject,
			fmt.Sprintf("%s already exist(s) and is not controlled by this Memcached; the controller leaves it alone. Delete or rename it, or rename this Memcached",
				strings.Join(obs.foreign, ", ")))
	case obs.applyErr != nil:
		conds.True(typ, cachev1alpha1.ReasonApplyFailed, obs.applyErr.Error())
	case trouble.progressDeadline != nil:
		conds.True(typ, cachev1alpha1.ReasonRolloutStuck, trouble.progressDeadline.Message)
	case trouble.replicaFailure != nil:
		conds.True(typ, cachev1alpha1.ReasonReplicaFailure, trouble.replicaFailure.Message)
	case obs.serviceMonitorUnsupported:
		conds.True(typ, cachev1alpha1.ReasonServiceMonitorUnsupported,
			"exporter.serviceMonitor is enabled but the cluster has no monitoring.coreos.com/v1 ServiceMonitor kind; install prometheus-operator or disable it (the exporter itself runs)")
	default:
		conds.False(typ, cachev1alpha1.ReasonAsExpected, "The owned objects match the spec")
	}
}

// setAvailable: every requested instance ready for minReadySeconds.
func setAvailable(conds status.Conditions, obs observation) {
	const typ = cachev1alpha1.ConditionAvailable
	w, size := obs.workload, obs.size
	switch {
	case w == nil:
		reason, msg := missingReason(obs.kind)
		conds.False(typ, reason, msg)
	case size == 0:
		conds.False(typ, cachev1alpha1.ReasonParked, "size is 0: no instance runs")
	case w.available >= size:
		conds.True(typ, cachev1alpha1.ReasonAllInstancesAvailable, fmt.Sprintf("%d/%d instances available", size, size))
	default:
		conds.False(typ, cachev1alpha1.ReasonInstancesUnavailable, fmt.Sprintf("%d/%d instances available", w.available, size))
	}
}

// setProgressing: the workload has not reached the desired state yet.
func setProgressing(conds status.Conditions, obs observation) {
	const typ = cachev1alpha1.ConditionProgressing
	w, size := obs.workload, obs.size
	switch {
	case w == nil || obs.blocked():
		conds.False(typ, cachev1alpha1.ReasonBlocked, "The controller cannot apply the spec; see the Degraded condition")
	case w.trouble.progressDeadline != nil:
		conds.False(typ, cachev1alpha1.ReasonProgressDeadlineExceeded, w.trouble.progressDeadline.Message)
	case w.observedGeneration < w.generation || w.updated < size:
		if w.replicas < size {
			conds.True(typ, cachev1alpha1.ReasonScalingUp, fmt.Sprintf("%d of %d instances exist", w.replicas, size))
		} else {
			conds.True(typ, cachev1alpha1.ReasonRollingOut, fmt.Sprintf("%d of %d instances run the current configuration", w.updated, size))
		}
	case w.replicas > size:
		conds.True(typ, cachev1alpha1.ReasonScalingDown, fmt.Sprintf("%d instances exist, %d wanted", w.replicas, size))
	case w.available < size:
		conds.True(typ, cachev1alpha1.ReasonWaitingForReadiness, fmt.Sprintf("%d of %d instances available", w.available, size))
	case size == 0:
		conds.False(typ, cachev1alpha1.ReasonParked, "size is 0: no instance runs")
	default:
		conds.False(typ, cachev1alpha1.ReasonRolloutComplete, fmt.Sprintf("%d instances run the current configuration", size))
	}
}
