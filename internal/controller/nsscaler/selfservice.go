package nsscaler

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// Limits of spec.selfService when a field is left out (the CRD defaults
// them too; these cover an apiserver without the defaults).
const (
	defaultSelfServiceMaxDuration = 4 * time.Hour
	defaultSelfServiceMaxPerDay   = 3
	// ledgerWindow is the "day" of maxPerDay: any 24 hours.
	ledgerWindow = 24 * time.Hour
)

// selfServiceLimits are an NSScaler's spec.selfService, with defaults.
type selfServiceLimits struct {
	enabled     bool
	maxDuration time.Duration
	maxPerDay   int
}

func limitsOf(s *scalingv1alpha1.SelfService) selfServiceLimits {
	if s == nil {
		return selfServiceLimits{}
	}
	l := selfServiceLimits{enabled: s.Enabled, maxDuration: defaultSelfServiceMaxDuration, maxPerDay: defaultSelfServiceMaxPerDay}
	if s.MaxDuration != nil && s.MaxDuration.Duration > 0 {
		l.maxDuration = s.MaxDuration.Duration
	}
	if s.MaxPerDay > 0 {
		l.maxPerDay = int(s.MaxPerDay)
	}
	return l
}

// wakeVerdict is the status a request should have after this pass: its
// phase, the Granted condition's reason and message, and the grant.
type wakeVerdict struct {
	phase        scalingv1alpha1.WakeRequestPhase
	reason       string
	message      string
	grantedAt    time.Time
	grantedUntil time.Time
}

// wakeDecision is a request whose status changes, with its new verdict.
type wakeDecision struct {
	request *scalingv1alpha1.WakeRequest
	verdict wakeVerdict
}

// selfServicePass is what one NSScaler decides about the WakeRequests of
// the namespaces it owns. Everything comes from the API: the requests'
// statuses (the grants) and the NSScaler's status (the ledger), so a
// restarted manager carries on where the last one stopped.
type selfServicePass struct {
	self   string
	limits selfServiceLimits
	now    time.Time
	// ledger is, per namespace, the grants of the last 24 hours.
	ledger map[string][]time.Time
	// woken are the grants in force: namespace → request and until.
	woken map[string]scalingv1alpha1.TenantWake
	// decisions are the requests whose status changes.
	decisions []wakeDecision
}

// decideSelfService decides on requests (those of the namespaces the
// NSScaler owns) at now. Pure.
func decideSelfService(scaler *scalingv1alpha1.NSScaler, owns func(string) bool, requests []scalingv1alpha1.WakeRequest, now time.Time) *selfServicePass {
	p := &selfServicePass{
		self: scaler.Name, limits: limitsOf(scaler.Spec.SelfService), now: now,
		ledger: map[string][]time.Time{}, woken: map[string]scalingv1alpha1.TenantWake{},
	}
	for _, g := range scaler.Status.SelfServiceGrants {
		for _, t := range g.GrantedAt {
			p.record(g.Namespace, t.Time)
		}
	}
	byNamespace := map[string][]*scalingv1alpha1.WakeRequest{}
	for i := range requests {
		r := &requests[i]
		if !owns(r.Namespace) {
			continue
		}
		byNamespace[r.Namespace] = append(byNamespace[r.Namespace], r)
		if r.Status.NSScaler == p.self && r.Status.GrantedAt != nil {
			p.record(r.Namespace, r.Status.GrantedAt.Time)
		}
	}
	namespaces := make([]string, 0, len(byNamespace))
	for ns := range byNamespace {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		reqs := byNamespace[ns]
		slices.SortFunc(reqs, func(a, b *scalingv1alpha1.WakeRequest) int {
			return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		})
		p.decideNamespace(ns, reqs)
	}
	return p
}

// record adds a grant to the ledger unless it is older than the window
// or already there.
func (p *selfServicePass) record(ns string, at time.Time) {
	if !at.After(p.now.Add(-ledgerWindow)) || slices.ContainsFunc(p.ledger[ns], at.Equal) {
		return
	}
	p.ledger[ns] = append(p.ledger[ns], at)
}

// decideNamespace settles the grants in force first (at most one stays),
// then decides the new requests, oldest first.
func (p *selfServicePass) decideNamespace(ns string, reqs []*scalingv1alpha1.WakeRequest) {
	for _, r := range reqs {
		if r.Status.Phase == scalingv1alpha1.WakeRequestGranted {
			p.settleGrant(ns, r)
		}
	}
	for _, r := range reqs {
		if r.Status.Phase == "" {
			p.decide(ns, r)
		}
	}
}

// settleGrant keeps a grant in force or ends it.
func (p *selfServicePass) settleGrant(ns string, r *scalingv1alpha1.WakeRequest) {
	until := r.Status.GrantedUntil
	_, held := p.woken[ns]
	switch {
	case r.Status.NSScaler != p.self:
		p.end(r, scalingv1alpha1.ReasonWithdrawn, fmt.Sprintf("granted by NSScaler %s, which no longer owns the namespace", r.Status.NSScaler))
	case !p.limits.enabled:
		p.end(r, scalingv1alpha1.ReasonWithdrawn, fmt.Sprintf("NSScaler %s no longer allows self-service; the namespace is parked again", p.self))
	case until == nil || !until.After(p.now):
		p.end(r, scalingv1alpha1.ReasonExpired, "the grant ran out; the namespace is parked again")
	case held:
		p.end(r, scalingv1alpha1.ReasonWithdrawn, "another request of the namespace holds the grant")
	default:
		p.woken[ns] = scalingv1alpha1.TenantWake{Namespace: ns, Request: r.Name, Until: *until}
	}
}

// end moves a grant to Ended, keeping its times.
func (p *selfServicePass) end(r *scalingv1alpha1.WakeRequest, reason, message string) {
	v := wakeVerdict{phase: scalingv1alpha1.WakeRequestEnded, reason: reason, message: message}
	if r.Status.GrantedAt != nil {
		v.grantedAt = r.Status.GrantedAt.Time
	}
	if r.Status.GrantedUntil != nil {
		v.grantedUntil = r.Status.GrantedUntil.Time
	}
	p.decisions = append(p.decisions, wakeDecision{request: r, verdict: v})
}

// decide grants or refuses a new request.
func (p *selfServicePass) decide(ns string, r *scalingv1alpha1.WakeRequest) {
	refuse := func(reason, message string) {
		p.decisions = append(p.decisions, wakeDecision{request: r, verdict: wakeVerdict{
			phase: scalingv1alpha1.WakeRequestRefused, reason: reason, message: message}})
	}
	if !p.limits.enabled {
		refuse(scalingv1alpha1.ReasonSelfServiceDisabled, fmt.Sprintf("NSScaler %s does not allow WakeRequests (spec.selfService.enabled is not true); ask its admin", p.self))
		return
	}
	if w, ok := p.woken[ns]; ok {
		refuse(scalingv1alpha1.ReasonAlreadyWoken, fmt.Sprintf("WakeRequest %s already holds the namespace awake until %s; delete it first to ask for another", w.Request, w.Until.UTC().Format(time.RFC3339)))
		return
	}
	if n := len(p.ledger[ns]); n >= p.limits.maxPerDay {
		refuse(scalingv1alpha1.ReasonOverLimit, fmt.Sprintf("%d grants in the last 24 hours; NSScaler %s allows %d (selfService.maxPerDay)", n, p.self, p.limits.maxPerDay))
		return
	}
	until, reason, message, ok := p.grantEnd(r)
	if !ok {
		refuse(reason, message)
		return
	}
	v := wakeVerdict{phase: scalingv1alpha1.WakeRequestGranted, reason: reason, message: message,
		grantedAt: p.now.Truncate(time.Second), grantedUntil: until}
	p.decisions = append(p.decisions, wakeDecision{request: r, verdict: v})
	p.ledger[ns] = append(p.ledger[ns], v.grantedAt)
	p.woken[ns] = scalingv1alpha1.TenantWake{Namespace: ns, Request: r.Name, Until: metav1.NewTime(until)}
}

// grantEnd is when a grant of r would end: what it asks, clipped to
// maxDuration from now (whole seconds, UTC, as statuses store times).
func (p *selfServicePass) grantEnd(r *scalingv1alpha1.WakeRequest) (time.Time, string, string, bool) {
	limit := p.now.Add(p.limits.maxDuration).Truncate(time.Second).UTC()
	var asked time.Time
	var what string
	switch {
	case r.Spec.Until != nil:
		asked, what = r.Spec.Until.Time, "until "+r.Spec.Until.UTC().Format(time.RFC3339)
		if !asked.After(p.now) {
			return time.Time{}, scalingv1alpha1.ReasonInThePast, fmt.Sprintf("spec.until %s had passed when the request was decided", r.Spec.Until.UTC().Format(time.RFC3339)), false
		}
	case r.Spec.Duration != nil && r.Spec.Duration.Duration > 0:
		// A duration too large for time arithmetic is clipped like any long one.
		d := min(r.Spec.Duration.Duration, p.limits.maxDuration+time.Second)
		asked, what = p.now.Add(d), "for "+r.Spec.Duration.Duration.String()
	default:
		return time.Time{}, scalingv1alpha1.ReasonInThePast, "the request asks for no time (set spec.duration or spec.until)", false
	}
	if asked.After(limit) {
		return limit, scalingv1alpha1.ReasonWakeClipped, fmt.Sprintf("asked %s; granted until %s, the most NSScaler %s allows (selfService.maxDuration %s)", what, limit.Format(time.RFC3339), p.self, p.limits.maxDuration), true
	}
	until := asked.Truncate(time.Second).UTC()
	return until, scalingv1alpha1.ReasonWakeGranted, fmt.Sprintf("the namespace runs until %s (NSScaler %s)", until.Format(time.RFC3339), p.self), true
}

// tenantWakes are the grants in force for status, by namespace.
func (p *selfServicePass) tenantWakes() []scalingv1alpha1.TenantWake {
	out := make([]scalingv1alpha1.TenantWake, 0, len(p.woken))
	for _, w := range p.woken {
		w.Until = statusTime(w.Until.Time)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b scalingv1alpha1.TenantWake) int { return cmp.Compare(a.Namespace, b.Namespace) })
	return out
}

// grantsLedger is status.selfServiceGrants: the last 24 hours' grants,
// per namespace, oldest first.
func (p *selfServicePass) grantsLedger() []scalingv1alpha1.SelfServiceGrants {
	var out []scalingv1alpha1.SelfServiceGrants
	for ns, times := range p.ledger {
		if len(times) == 0 {
			continue
		}
		slices.SortFunc(times, time.Time.Compare)
		g := scalingv1alpha1.SelfServiceGrants{Namespace: ns}
		for _, t := range times[max(0, len(times)-48):] {
			g.GrantedAt = append(g.GrantedAt, statusTime(t))
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b scalingv1alpha1.SelfServiceGrants) int { return cmp.Compare(a.Namespace, b.Namespace) })
	return out
}

// nextExpiry is when the first grant in force ends (zero: none).
func (p *selfServicePass) nextExpiry() time.Time {
	var next time.Time
	for _, w := range p.woken {
		next = earliest(next, w.Until.Time)
	}
	return next
}
