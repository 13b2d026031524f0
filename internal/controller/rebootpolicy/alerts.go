package rebootpolicy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/alerts"
)

// The alerts gate (spec.blockingAlerts) stands after the approval gate:
// restarts ready to be made wait while Prometheus reports a blocking
// alert firing for the policy's namespace, and while it cannot tell. It
// asks only when a restart is ready, through the watcher, which never
// blocks a reconcile on Prometheus and sends the policy back to the queue
// when its namespace's answer changes.

// alertsHoldRecheck is how soon a held policy is looked at again without
// news from the watcher (its events release a hold; this is the net).
const alertsHoldRecheck = 5 * time.Minute

// alertsNote is a transition of the alerts gate in one pass.
type alertsNote struct {
	// held: restarts started to wait for this reason or firing set.
	held    *autorebootv1alpha1.BlockingAlertsStatus
	message string
	targets []string
	// cleared: they waited and go on.
	cleared *autorebootv1alpha1.BlockingAlertsStatus
}

// holdForAlerts keeps the restarts of the decision waiting while a
// blocking alert fires, Prometheus cannot tell, or none is configured.
func (r *Reconciler) holdForAlerts(p *pass) {
	nn := keyOfPolicy(p.rbp)
	defer func() {
		reason := ""
		if st := p.rbp.Status.BlockingAlerts; st != nil {
			reason = st.Reason
		}
		r.Metrics.setBlockedByAlerts(nn, reason)
	}()
	names := p.rbp.Spec.BlockingAlerts
	if len(names) == 0 {
		r.dropAlerts(nn)
		p.rbp.Status.BlockingAlerts = nil
		return
	}
	const notConfigured = "spec.blockingAlerts is set but the manager has no --prometheus-url: restarts wait until the admin sets it or blockingAlerts is removed"
	if r.Alerts == nil {
		// Said whether or not a restart waits: a gate that can never open.
		p.in.alertsReason, p.in.alertsProblem = autorebootv1alpha1.ReasonAlertsNotConfigured, notConfigured
	}
	if !p.pending {
		r.dropAlerts(nn)
		p.rbp.Status.BlockingAlerts = nil
		return
	}
	if len(p.decision.restart) == 0 {
		// Nothing would be restarted now (another gate, a rollout, the
		// cooldown): nothing to ask, and nothing the alerts hold.
		r.dropAlerts(nn)
		p.rbp.Status.BlockingAlerts = nil
		return
	}
	reason, msg, firing := "", "", []autorebootv1alpha1.AlertName(nil)
	if r.Alerts == nil {
		reason, msg = autorebootv1alpha1.ReasonAlertsNotConfigured, notConfigured
	} else {
		a, known := r.Alerts.Check(nn)
		switch {
		case !known:
			// The first answer is on its way and brings the policy back.
			holdRestarts(p)
			p.in.waiting, p.in.waitingReason = "asking Prometheus whether a blocking alert fires", autorebootv1alpha1.ReasonRestartPending
			return
		case a.Err != nil:
			reason = autorebootv1alpha1.ReasonAlertsUnavailable
			msg = "Prometheus could not tell whether a blocking alert fires, so restarts wait (fail safe): " + a.Err.Error()
		default:
			if firing = firingOf(names, a.Firing); len(firing) > 0 {
				reason = autorebootv1alpha1.ReasonBlockedByAlerts
				msg = fmt.Sprintf("blocked by alerts firing in namespace %s: %s", p.rbp.Namespace, joinAlerts(firing))
			}
		}
	}
	prev := p.rbp.Status.BlockingAlerts
	if reason == "" {
		if prev != nil {
			p.gate.alerts = &alertsNote{cleared: prev}
			p.rbp.Status.BlockingAlerts = nil
		}
		return
	}
	held := holdRestarts(p)
	if reason == autorebootv1alpha1.ReasonBlockedByAlerts {
		p.in.waiting, p.in.waitingReason = msg, reason
	} else {
		p.in.alertsReason, p.in.alertsProblem = reason, msg
	}
	cur := &autorebootv1alpha1.BlockingAlertsStatus{Reason: reason, Firing: firing, Since: metav1.Time{Time: p.now}}
	if prev != nil && prev.Reason == reason {
		cur.Since = prev.Since
	}
	if prev == nil || prev.Reason != reason || !slices.Equal(prev.Firing, firing) {
		p.gate.alerts = &alertsNote{held: cur, message: msg, targets: held}
	}
	p.rbp.Status.BlockingAlerts = cur
}

// holdRestarts makes the decision's restarts wait and names them.
func holdRestarts(p *pass) []string {
	d := &p.decision
	names := make([]string, 0, len(d.restart))
	for _, t := range d.restart {
		names = append(names, string(t.kind)+" "+t.obj.GetName())
	}
	slices.Sort(names)
	d.waiting += len(d.restart)
	d.restart = nil
	if d.wait == 0 || d.wait > alertsHoldRecheck {
		d.wait = alertsHoldRecheck
	}
	return names
}

// firingOf is the policy's blocking alerts among those firing (both
// sorted by the caller's order: spec order for the policy's).
func firingOf(names []autorebootv1alpha1.AlertName, firing []string) []autorebootv1alpha1.AlertName {
	var out []autorebootv1alpha1.AlertName
	for _, n := range names {
		if _, found := slices.BinarySearch(firing, string(n)); found && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func joinAlerts(names []autorebootv1alpha1.AlertName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

func (r *Reconciler) dropAlerts(nn types.NamespacedName) {
	if r.Alerts != nil {
		r.Alerts.Drop(nn)
	}
}

// flushAlertNotes announces the alerts gate's transition of the pass.
func (r *Reconciler) flushAlertNotes(p *pass, n *alertsNote) {
	if n == nil {
		return
	}
	rbp := p.rbp
	if h := n.held; h != nil {
		p.events.Warning(rbp, nil, h.Reason, "Hold", "the restart of %s waits: %s", listTargets(n.targets), n.message)
		r.Notifier.Send(rbp, "RebootPolicy %s/%s holds the restart of %s: %s", rbp.Namespace, rbp.Name, listTargets(n.targets), n.message)
	}
	if c := n.cleared; c != nil {
		why := "no blocking alert fires any more"
		if c.Reason != autorebootv1alpha1.ReasonBlockedByAlerts {
			why = "Prometheus answers and no blocking alert fires"
		}
		p.events.Normal(rbp, nil, autorebootv1alpha1.EventAlertsCleared, "Hold", "%s: the held restarts go on", why)
		r.Notifier.Send(rbp, "RebootPolicy %s/%s: %s, the held restarts go on", rbp.Namespace, rbp.Name, why)
	}
}

// setupAlerts builds the watcher of the admin's Prometheus (nil without
// --prometheus-url) and adds it to mgr.
func setupAlerts(mgr ctrl.Manager, opts Options) (*alerts.Watcher, error) {
	if opts.Alerts.URL == "" {
		return nil, nil
	}
	c, err := alerts.NewClient(opts.Alerts)
	if err != nil {
		return nil, err
	}
	var obs alerts.Observer
	if opts.Metrics != nil {
		obs = opts.Metrics
	}
	w := alerts.NewWatcher(c, opts.Alerts, opts.Clock, obs, mgr.GetLogger().WithName(Name+"-alerts"))
	if err := mgr.Add(w); err != nil {
		return nil, fmt.Errorf("adding the alerts watcher: %w", err)
	}
	return w, nil
}
