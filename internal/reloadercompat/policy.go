package reloadercompat

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Label (value "true") marks the RebootPolicies the compatibility mode
// made.
const Label = "autoreboot.runbook.dev/reloader-compat"

// WorkloadAnnotation on a compat RebootPolicy names its workload
// ("Deployment/web"), for kubectl runbook status.
const WorkloadAnnotation = "autoreboot.runbook.dev/reloader-workload"

// PolicyName is the name of the one policy of a compat RebootPolicy.
const PolicyName = "reloader"

// policyName names the RebootPolicy of a workload: readable, unique per
// kind and name, and within the 253 characters of an object name.
func policyName(kind autorebootv1alpha1.TargetKind, name string) string {
	n := "reloader-" + shortKind(kind) + "-" + name
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return strings.TrimRight(n[:253-11], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}

func shortKind(kind autorebootv1alpha1.TargetKind) string {
	switch kind {
	case autorebootv1alpha1.KindStatefulSet:
		return "sts"
	case autorebootv1alpha1.KindDaemonSet:
		return "ds"
	default:
		return "deploy"
	}
}

// settings are the admin's choices for every compat RebootPolicy.
type settings struct {
	settleDelay time.Duration
	period      int32
}

// desiredSpec is the RebootPolicy spec of a workload that depends on objs:
// no cooldown (Reloader restarts on every change), the admin's settle
// delay, the manager-wide throttle as for every RebootPolicy.
func desiredSpec(kind autorebootv1alpha1.TargetKind, name string, objs []autorebootv1alpha1.ReferencedObject, s settings) autorebootv1alpha1.RebootPolicySpec {
	spec := autorebootv1alpha1.RebootPolicySpec{
		Target:             autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: kind, Name: name},
		MinRestartInterval: &metav1.Duration{},
		Policies: []autorebootv1alpha1.Policy{{
			Name:    PolicyName,
			Comment: "Reloader compatibility: made from the workload's reloader.stakater.com annotations",
			Trigger: autorebootv1alpha1.Trigger{Referenced: &autorebootv1alpha1.ReferencedTrigger{
				Objects: objs, PeriodSeconds: s.period,
			}},
		}},
	}
	if s.settleDelay > 0 {
		spec.SettleDelay = &metav1.Duration{Duration: s.settleDelay}
	}
	return spec
}

// specMatches compares the fields the compat mode sets; fields it leaves
// to the CRD's defaults are not compared, so a default never looks like
// a difference.
func specMatches(have, want autorebootv1alpha1.RebootPolicySpec) bool {
	return equality.Semantic.DeepEqual(have.Target, want.Target) &&
		equality.Semantic.DeepEqual(have.Policies, want.Policies) &&
		durationOf(have.MinRestartInterval) == durationOf(want.MinRestartInterval) &&
		durationOf(have.SettleDelay) == durationOf(want.SettleDelay) &&
		!have.Suspend && have.RestartSchedule == nil && have.Rollout == nil && have.Notify == nil
}

func durationOf(d *metav1.Duration) time.Duration {
	return ptr.Deref(d, metav1.Duration{Duration: -1}).Duration
}

// ownedBy makes the workload the RebootPolicy's controller owner, so that
// deleting the workload deletes its policy.
func ownedBy(workload client.Object, kind autorebootv1alpha1.TargetKind) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: string(kind), Name: workload.GetName(), UID: workload.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
	}
}
