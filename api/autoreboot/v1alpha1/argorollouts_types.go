package v1alpha1

// KindRollout targets Argo Rollouts' Rollout (apiVersion
// ArgoRolloutsAPIVersion). It is restarted the way `kubectl argo rollouts
// restart` does it, by setting spec.restartAt: the Rollout controller then
// replaces its pods within its own availability rules.
const KindRollout TargetKind = "Rollout"

// ArgoRolloutsAPIVersion is the target.apiVersion of KindRollout.
const ArgoRolloutsAPIVersion = "argoproj.io/v1alpha1"

// ReasonTargetKindNotInstalled (Degraded): the target's kind is not served
// by the cluster (the Rollout CRD is not installed). The policy's triggers
// keep running; the kind is looked up again periodically, and restarts
// resume once it is served.
const ReasonTargetKindNotInstalled = "TargetKindNotInstalled"
