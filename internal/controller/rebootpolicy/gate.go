package rebootpolicy

import (
	"bytes"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The gates stand between pending work and the restart: a halted
// sequence (halt.go) and a required approval (approval.go). Both are
// lifted by a human through a nonce annotation, acted on once: the nonce
// is recorded in status in the write that records what it lifted, before
// any target is patched for it (the pass is marked fresh), so a leader
// that dies in between leaves a successor that does not act on it twice.

// gateNotes are the gates' transitions in one pass, announced (events,
// webhook messages) once a status write of the pass recorded them.
type gateNotes struct {
	halted    *autorebootv1alpha1.HaltedRestart
	recovered *autorebootv1alpha1.HaltedRestart
	resumed   bool
	resumedBy string
	approved  *approvalNote
	awaiting  []string
	invalid   []string
	alerts    *alertsNote
}

// applyGates runs after the restart decision: a resume, the health gate,
// an approval, the approval gate and the alerts gate (alerts.go), in that
// order.
func (r *Reconciler) applyGates(p *pass) {
	r.takeResume(p)
	r.observeHalt(p)
	r.takeApproval(p)
	r.holdForApproval(p)
	r.holdForAlerts(p)
}

// takeResume acts on a new value of the resume annotation: the restarts
// made so far no longer halt the sequence.
func (r *Reconciler) takeResume(p *pass) {
	v, ok := r.gateNonce(p, autorebootv1alpha1.ResumeAnnotation)
	if !ok || (p.rbp.Status.Rollout != nil && v == p.rbp.Status.Rollout.LastResume) {
		return
	}
	rs := rolloutStatusOf(p.rbp)
	rs.LastResume = v
	rs.ResumedBy = annotationSetter(p.rbp, autorebootv1alpha1.ResumeAnnotation)
	// Microseconds: a restart made in this same pass stays gated.
	rs.ResumeTime = &metav1.MicroTime{Time: p.now.Truncate(time.Microsecond)}
	p.fresh = true
	p.gate.resumed, p.gate.resumedBy = true, rs.ResumedBy
	r.Metrics.resumed()
}

// gateNonce reads a gate annotation; a value too long is refused (said
// once, never copied into status).
func (r *Reconciler) gateNonce(p *pass, key string) (string, bool) {
	v := p.rbp.Annotations[key]
	if v == "" {
		return "", false
	}
	if len(v) > autorebootv1alpha1.MaxRestartRequestLength {
		if r.requests.first(keyOfPolicy(p.rbp), key+"="+v) {
			p.gate.invalid = append(p.gate.invalid, key)
		}
		return "", false
	}
	return v, true
}

// annotationSetter names the field manager that last set the annotation
// key (from managedFields): the plugin names itself and its user there.
// Any client may choose any field manager name, so this is exactly as
// trustworthy as the permission to patch the RebootPolicy.
func annotationSetter(obj client.Object, key string) string {
	field := []byte(`"f:` + key + `"`)
	who, latest := "", metav1.Time{}
	for _, mf := range obj.GetManagedFields() {
		if mf.FieldsV1 == nil || !bytes.Contains(mf.FieldsV1.GetRawBytes(), field) || !ownsAnnotation(mf.FieldsV1.GetRawBytes(), key) {
			continue
		}
		if who == "" || (mf.Time != nil && latest.Before(mf.Time)) {
			who = mf.Manager
			if mf.Time != nil {
				latest = *mf.Time
			}
		}
	}
	if who == "" {
		return "unknown"
	}
	return who
}

func ownsAnnotation(raw []byte, key string) bool {
	var fields struct {
		Metadata struct {
			Annotations map[string]json.RawMessage `json:"f:annotations"`
		} `json:"f:metadata"`
	}
	if json.Unmarshal(raw, &fields) != nil {
		return false
	}
	_, ok := fields.Metadata.Annotations["f:"+key]
	return ok
}

// gateAnnotationsChanged passes updates that change a gate annotation.
func gateAnnotationsChanged() predicate.Predicate {
	return annotationsChanged(autorebootv1alpha1.ResumeAnnotation, autorebootv1alpha1.ApproveAnnotation)
}
