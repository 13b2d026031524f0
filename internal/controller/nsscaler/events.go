package nsscaler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// maxNamespaceEvents bounds the events of one reconcile per reason: one per
// namespace up to this many, then a single summary. Each event is an
// apiserver write; parking 500 namespaces records 11 per reason, not 500
// (which the event sink would still be sending a minute later).
const maxNamespaceEvents = 10

// namespaceTally counts the writes in one namespace, for its events.
type namespaceTally struct {
	parked, restored, failed int
	firstErr                 error
}

// namespaceEvent is one reason of the per-namespace events.
type namespaceEvent struct {
	// emit is status.Batch's Normal or Warning.
	emit           func(regarding, related runtime.Object, reason, action, note string, args ...any)
	reason, action string
	count          func(*namespaceTally) int
	// one is the note of a namespace's own event.
	one func(ns string, t *namespaceTally) string
	// rest is the format of the summary, of (workloads, namespaces).
	rest string
}

func (r *Reconciler) emitNamespaceEvents(scaler *scalingv1alpha1.NSScaler, ev *status.Batch, tallies map[string]*namespaceTally) {
	names := slices.Sorted(maps.Keys(tallies))
	for _, e := range []namespaceEvent{{
		emit: ev.Normal, reason: scalingv1alpha1.EventNamespaceParked, action: "Park",
		count: func(t *namespaceTally) int { return t.parked },
		one: func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("parked %d workloads in namespace %s", t.parked, ns)
		},
		rest: "parked %d workloads in %d more namespaces",
	}, {
		emit: ev.Normal, reason: scalingv1alpha1.EventNamespaceRestored, action: "Restore",
		count: func(t *namespaceTally) int { return t.restored },
		one: func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("restored %d workloads in namespace %s to their recorded originals", t.restored, ns)
		},
		rest: "restored %d workloads in %d more namespaces to their recorded originals",
	}, {
		emit: ev.Warning, reason: scalingv1alpha1.EventWorkloadsFailed, action: "Reconcile",
		count: func(t *namespaceTally) int { return t.failed },
		one: func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("%d workloads in namespace %s failed, first: %v", t.failed, ns, t.firstErr)
		},
		rest: "%d workloads in %d more namespaces failed",
	}} {
		emitPerNamespace(scaler, names, tallies, e)
	}
}

// emitPerNamespace records one event per namespace with a non-zero count,
// at most maxNamespaceEvents, and a summary (workloads, namespaces) for the
// rest.
func emitPerNamespace(scaler *scalingv1alpha1.NSScaler, names []string, tallies map[string]*namespaceTally, e namespaceEvent) {
	emitted, moreNamespaces, moreWorkloads := 0, 0, 0
	for _, ns := range names {
		t := tallies[ns]
		n := e.count(t)
		if n == 0 {
			continue
		}
		if emitted < maxNamespaceEvents {
			related := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
			e.emit(scaler, related, e.reason, e.action, "%s", e.one(ns, t))
			emitted++
			continue
		}
		moreNamespaces++
		moreWorkloads += n
	}
	if moreNamespaces > 0 {
		e.emit(scaler, nil, e.reason, e.action, e.rest, moreWorkloads, moreNamespaces)
	}
}

// emitDryRunEvents records what a DryRun NSScaler would do, per namespace
// (bounded like the others), when it differs from what its last events
// said: every reconcile decides the same again, and the events must not
// repeat it.
func (r *Reconciler) emitDryRunEvents(scaler *scalingv1alpha1.NSScaler, ev *status.Batch, tallies map[string]*namespaceTally, next time.Time) {
	names := slices.Sorted(maps.Keys(tallies))
	// When the schedule would change it next, in every note.
	when := "; no transition is due"
	if !next.IsZero() {
		when = "; the schedule changes next at " + statusTime(next).Format(time.RFC3339)
	}
	var said strings.Builder
	said.WriteString(when)
	for _, ns := range names {
		fmt.Fprintf(&said, "%s:%d:%d;", ns, tallies[ns].parked, tallies[ns].restored)
	}
	r.mu.Lock()
	unchanged := r.dryRunEvents[scaler.Name] == said.String()
	r.dryRunEvents[scaler.Name] = said.String()
	r.mu.Unlock()
	if unchanged {
		return
	}
	for _, e := range []namespaceEvent{{
		emit: ev.Normal, reason: scalingv1alpha1.EventWouldPark, action: "DryRun",
		count: func(t *namespaceTally) int { return t.parked },
		one: func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("dry run: would park %d workloads in namespace %s now%s", t.parked, ns, when)
		},
		rest: "dry run: would park %d workloads in %d more namespaces now" + strings.ReplaceAll(when, "%", "%%"),
	}, {
		emit: ev.Normal, reason: scalingv1alpha1.EventWouldRestore, action: "DryRun",
		count: func(t *namespaceTally) int { return t.restored },
		one: func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("dry run: would restore %d workloads in namespace %s now%s", t.restored, ns, when)
		},
		rest: "dry run: would restore %d workloads in %d more namespaces now" + strings.ReplaceAll(when, "%", "%%"),
	}} {
		emitPerNamespace(scaler, names, tallies, e)
	}
}
