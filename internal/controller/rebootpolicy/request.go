package rebootpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// takeRestartRequest turns a new value of the restart-request annotation
// into a pending restart of every target. The nonce and the pending
// restart go into status in one write — the same write that records any
// other fire, before any target is patched — so the request is taken
// exactly once, also when the leader dies in between. The restart then
// takes the path of every other fire: windows, throttle and cooldown apply,
// the settle delay does not.
func (r *Reconciler) takeRestartRequest(p *pass) {
	v := p.rbp.Annotations[autorebootv1alpha1.RestartRequestAnnotation]
	st := &p.rbp.Status
	if v == "" || v == st.LastRestartRequest {
		return
	}
	if len(v) > autorebootv1alpha1.MaxRestartRequestLength {
		// Never copied into status (a tenant would inflate it); said once.
		if r.requests.first(client.ObjectKeyFromObject(p.rbp), v) {
			p.events.Warning(p.rbp, nil, autorebootv1alpha1.EventRestartRequestInvalid, "Restart",
				"the %s annotation has %d characters, more than %d: ignored", autorebootv1alpha1.RestartRequestAnnotation,
				len(v), autorebootv1alpha1.MaxRestartRequestLength)
		}
		return
	}
	st.LastRestartRequest = v
	if p.rbp.Spec.Suspend {
		// Taken and dropped, like any change while suspended.
		p.events.Warning(p.rbp, nil, autorebootv1alpha1.EventRestartSkipped, "Restart", "restart request %s ignored: the RebootPolicy is suspended", v)
		return
	}
	st.RestartRequestPending = true
	st.RestartRequestTime = &metav1.Time{Time: p.now}
	p.fresh, p.requested = true, true
}

// restartRequestChanged passes updates that change the restart-request
// annotation (the For() predicate otherwise passes generation changes only).
func restartRequestChanged() predicate.Predicate {
	return annotationsChanged(autorebootv1alpha1.RestartRequestAnnotation)
}

// annotationsChanged passes updates that change one of the annotations
// keys, and nothing else.
func annotationsChanged(keys ...string) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			for _, key := range keys {
				if e.ObjectOld.GetAnnotations()[key] != e.ObjectNew.GetAnnotations()[key] {
					return true
				}
			}
			return false
		},
	}
}

// requestLog remembers the last refused request value per RebootPolicy.
type requestLog struct {
	mu   sync.Mutex
	last map[types.NamespacedName]string
}

func newRequestLog() *requestLog { return &requestLog{last: map[types.NamespacedName]string{}} }

// first reports whether v is refused for nn for the first time (only a
// hash of v is kept: v may be large).
func (l *requestLog) first(nn types.NamespacedName, v string) bool {
	if l == nil {
		return true
	}
	sum := sha256.Sum256([]byte(v))
	h := hex.EncodeToString(sum[:])
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last[nn] == h {
		return false
	}
	l.last[nn] = h
	return true
}

func (l *requestLog) forget(nn types.NamespacedName) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, nn)
}
