package main

import (
	"strings"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/reloadercompat"
)

// KindReloaderCompat is the status table's kind of a workload the Reloader
// compatibility mode handles: the row names the workload, whose owners
// think in Reloader annotations, not the RebootPolicy made for it.
const KindReloaderCompat = "ReloaderCompat"

// reloaderCompatRow turns the row of a compat RebootPolicy into the row of
// its workload; other rows pass unchanged.
func reloaderCompatRow(p *autorebootv1alpha1.RebootPolicy, r Row) Row {
	if p.Labels[reloadercompat.Label] != "true" {
		return r
	}
	workload := p.Annotations[reloadercompat.WorkloadAnnotation]
	if workload == "" {
		workload = string(p.Spec.Target.Kind) + "/" + p.Spec.Target.Name
	}
	r.Kind, r.Name = KindReloaderCompat, strings.ToLower(workload)
	tracked := 0
	if len(p.Spec.Policies) == 1 && p.Spec.Policies[0].Trigger.Referenced != nil {
		tracked = len(p.Spec.Policies[0].Trigger.Referenced.Objects)
	}
	r.Details = "RebootPolicy " + p.Name + ", " + plural(tracked, "object") + " tracked: " + r.Details
	return r
}
