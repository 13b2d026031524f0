package rebootpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// maxReleased bounds the restart ids one approval releases (one per
// target with work of its own, plus one for work of every target); the
// targets beyond wait for the next approval.
const maxReleased = 1024

// approvalNote is an approval taken in a pass.
type approvalNote struct {
	by, nonce string
	released  []string
}

// takeApproval acts on a new value of the approve annotation: the work
// pending at this moment (each target's restart id) is released, once. A
// fire after it has another id and waits for another approval.
func (r *Reconciler) takeApproval(p *pass) {
	v, ok := r.gateNonce(p, autorebootv1alpha1.ApproveAnnotation)
	if !ok || (p.rbp.Status.Approval != nil && v == p.rbp.Status.Approval.LastApproval) {
		return
	}
	ap := approvalStatusOf(p.rbp)
	ap.LastApproval = v
	ap.ApprovedBy = annotationSetter(p.rbp, autorebootv1alpha1.ApproveAnnotation)
	ap.ApprovalTime = &metav1.Time{Time: p.now}
	ids, names := unapprovedWork(p, nil)
	if len(ids) > maxReleased {
		ids = ids[:maxReleased]
	}
	ap.Released = ids
	ap.Awaiting = ""
	p.fresh = true
	p.gate.approved = &approvalNote{by: ap.ApprovedBy, nonce: v, released: names}
	r.Metrics.approved(len(ids) > 0)
}

// holdForApproval keeps every pending restart not released by an
// approval waiting, when spec.approval is Required.
func (r *Reconciler) holdForApproval(p *pass) {
	ap := p.rbp.Status.Approval
	if !p.pending {
		if ap != nil && (len(ap.Released) > 0 || ap.Awaiting != "") {
			// Released work is done: an id is never pending again.
			ap.Released, ap.Awaiting = nil, ""
		}
		r.Metrics.setAwaiting(keyOfPolicy(p.rbp), 0)
		return
	}
	if p.rbp.Spec.Approval != autorebootv1alpha1.ApprovalRequired {
		r.Metrics.setAwaiting(keyOfPolicy(p.rbp), 0)
		return
	}
	var released []string
	if ap != nil {
		released = ap.Released
	}
	ids, names := unapprovedWork(p, released)
	r.Metrics.setAwaiting(keyOfPolicy(p.rbp), len(names))
	if len(ids) == 0 {
		if ap != nil {
			ap.Awaiting = ""
		}
		return
	}
	d := &p.decision
	kept := d.restart[:0]
	for _, t := range d.restart {
		if slices.Contains(released, idFor(d.ids, t.obj.GetName())) {
			kept = append(kept, t)
		} else {
			d.waiting++
		}
	}
	d.restart, d.nextAt = kept, time.Time{}
	p.in.waiting = fmt.Sprintf("awaiting approval: %s (`kubectl runbook approve %s`)", listTargets(names), p.rbp.Name)
	p.in.waitingReason = autorebootv1alpha1.ReasonAwaitingApproval
	ap = approvalStatusOf(p.rbp)
	if digest := digestOf(ids); ap.Awaiting != digest {
		ap.Awaiting = digest
		p.gate.awaiting = names
	}
}

// unapprovedWork lists the restart ids (sorted, unique) and the names of
// the targets with pending work not yet done whose id is not in released.
func unapprovedWork(p *pass, released []string) (ids, names []string) {
	if !p.pending {
		return nil, nil
	}
	for _, t := range p.targets {
		if len(p.work.forTarget(t.obj.GetName())) == 0 {
			continue
		}
		id := idFor(p.decision.ids, t.obj.GetName())
		if t.restartID == id || slices.Contains(released, id) {
			continue
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
		names = append(names, string(t.kind)+" "+t.obj.GetName())
	}
	slices.Sort(ids)
	slices.Sort(names)
	return ids, names
}

func approvalStatusOf(rbp *autorebootv1alpha1.RebootPolicy) *autorebootv1alpha1.ApprovalStatus {
	if rbp.Status.Approval == nil {
		rbp.Status.Approval = &autorebootv1alpha1.ApprovalStatus{}
	}
	return rbp.Status.Approval
}

func digestOf(ids []string) string {
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	return hex.EncodeToString(sum[:8])
}

// listTargets names the first few targets and counts the rest.
func listTargets(names []string) string {
	listed := names[:min(len(names), maxListedRestarts)]
	s := strings.Join(listed, ", ")
	if more := len(names) - len(listed); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
