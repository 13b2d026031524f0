package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// State is the one-word health of an object, the same words for every kind.
type State string

const (
	// StateHealthy: reconciled for its current spec, doing what it should.
	StateHealthy State = "Healthy"
	// StatePending: the controller has not caught up with the spec yet, a
	// restart waits for its cooldown or a rollout, or a park or scale is
	// still under way.
	StatePending State = "Pending"
	// StateParked: scaled to zero on purpose (an NSScaler holding
	// namespaces parked, a Memcached of size 0).
	StateParked State = "Parked"
	// StateDegraded: something keeps it from working; Reason and Details say what.
	StateDegraded State = "Degraded"
	// StateSuspended: spec.suspend is true.
	StateSuspended State = "Suspended"
)

var states = []State{StateHealthy, StatePending, StateParked, StateDegraded, StateSuspended}

// Row is one object in the status table.
type Row struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	State     State  `json:"state"`
	Reason    string `json:"reason"`
	Details   string `json:"details"`
}

var kindOrder = []string{"RebootPolicy", "Memcached", "NSScaler"}

type statusOptions struct {
	allNamespaces bool
	output        string
}

func newStatusCommand(conn *connection) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One table of every RebootPolicy, Memcached and NSScaler: healthy, pending, parked, degraded, and why",
		Example: `  kubectl runbook status            # the current namespace (and the NSScalers acting on it)
  kubectl runbook status -A         # every namespace
  kubectl runbook status -A -o wide # full messages`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains([]string{"", "wide", "json"}, o.output) {
				return fmt.Errorf("--output %q: want wide or json (or nothing for the table)", o.output)
			}
			cl, ns, err := conn.resolve()
			if err != nil {
				return err
			}
			if o.allNamespaces {
				ns = ""
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			rows, notes, err := collect(ctx, cl, ns, time.Now())
			for _, n := range notes {
				_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			if err != nil {
				return err
			}
			return render(cmd.OutOrStdout(), rows, o.output, ns == "")
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the objects of every namespace")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "wide (full messages) or json")
	return cmd
}

// collect lists the three kinds and turns each object into a row. A kind
// whose CRD is not installed is noted, not an error, unless none is.
func collect(ctx context.Context, cl client.Client, ns string, now time.Time) ([]Row, []string, error) {
	var rows []Row
	var notes []string
	missing := 0
	inNS := []client.ListOption{}
	if ns != "" {
		inNS = append(inNS, client.InNamespace(ns))
	}
	handle := func(kind string, err error) error {
		switch {
		case err == nil:
			return nil
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
			missing++
			notes = append(notes, fmt.Sprintf("%s: the CRD is not installed in this cluster", kind))
			return nil
		case apierrors.IsForbidden(err):
			return fmt.Errorf("listing %ss is forbidden for you: %w", kind, err)
		default:
			return fmt.Errorf("listing %ss: %w", kind, err)
		}
	}
	var rbps autorebootv1alpha1.RebootPolicyList
	if err := handle("RebootPolicy", cl.List(ctx, &rbps, inNS...)); err != nil {
		return nil, notes, err
	}
	for i := range rbps.Items {
		rows = append(rows, reloaderCompatRow(&rbps.Items[i], rebootPolicyRow(&rbps.Items[i], now)))
	}
	var mcs cachev1alpha1.MemcachedList
	if err := handle("Memcached", cl.List(ctx, &mcs, inNS...)); err != nil {
		return nil, notes, err
	}
	for i := range mcs.Items {
		rows = append(rows, memcachedRow(&mcs.Items[i]))
	}
	var nsss scalingv1alpha1.NSScalerList
	if err := handle("NSScaler", cl.List(ctx, &nsss)); err != nil {
		return nil, notes, err
	}
	for i := range nsss.Items {
		if ns == "" || actsOn(&nsss.Items[i], ns) {
			rows = append(rows, nsscalerRow(&nsss.Items[i]))
		}
	}
	if missing == len(kindOrder) {
		return nil, notes, errors.New("runbook is not installed in this cluster: none of its CRDs exists (make install, or the Helm chart)")
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		return cmp.Or(
			cmp.Compare(slices.Index(kindOrder, a.Kind), slices.Index(kindOrder, b.Kind)),
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name))
	})
	return rows, notes, nil
}

// actsOn: the NSScaler reports ns as parked, active or contested.
func actsOn(s *scalingv1alpha1.NSScaler, ns string) bool {
	if slices.Contains(s.Status.ParkedNamespaces, ns) || slices.Contains(s.Status.ActiveNamespaces, ns) {
		return true
	}
	return slices.ContainsFunc(s.Status.Conflicts, func(c scalingv1alpha1.NamespaceConflict) bool { return c.Namespace == ns })
}

// current returns the condition of type t when it describes generation gen.
func current(conds []metav1.Condition, t string, gen int64) *metav1.Condition {
	c := meta.FindStatusCondition(conds, t)
	if c == nil || c.ObservedGeneration < gen {
		return nil
	}
	return c
}

// notReconciled is the row of an object whose status does not describe its
// current spec (yet).
func notReconciled(r Row, observed, gen int64) Row {
	r.State, r.Reason = StatePending, "NotReconciled"
	if observed == 0 {
		r.Details = "no status yet: is the manager running with this controller?"
	} else {
		r.Details = fmt.Sprintf("status describes generation %d, the spec is at %d: the controller has not caught up", observed, gen)
	}
	return r
}

func rebootPolicyRow(p *autorebootv1alpha1.RebootPolicy, now time.Time) Row {
	r := Row{Kind: "RebootPolicy", Namespace: p.Namespace, Name: p.Name}
	gen, st := p.Generation, &p.Status
	if p.Spec.Suspend {
		r.State, r.Reason, r.Details = StateSuspended, autorebootv1alpha1.ReasonSuspended, "spec.suspend is true: no probing, no restarts"
		return r
	}
	ready := current(st.Conditions, autorebootv1alpha1.ConditionReady, gen)
	if st.ObservedGeneration < gen || ready == nil {
		return notReconciled(r, st.ObservedGeneration, gen)
	}
	if d := current(st.Conditions, autorebootv1alpha1.ConditionDegraded, gen); d != nil && d.Status == metav1.ConditionTrue {
		r.State, r.Reason, r.Details = StateDegraded, d.Reason, d.Message
		return r
	}
	var pending []string
	for _, ps := range st.Policies {
		if ps.PendingTrigger {
			pending = append(pending, ps.Name)
		}
	}
	switch {
	case ready.Status != metav1.ConditionTrue:
		r.State, r.Reason, r.Details = StateDegraded, ready.Reason, ready.Message
	case ready.Reason == autorebootv1alpha1.ReasonRestartPending || ready.Reason == autorebootv1alpha1.ReasonAwaitingApproval || len(pending) > 0:
		r.State, r.Reason = StatePending, autorebootv1alpha1.ReasonRestartPending
		if ready.Reason == autorebootv1alpha1.ReasonAwaitingApproval {
			r.Reason = ready.Reason
		}
		r.Details = ready.Message
		if len(pending) > 0 {
			r.Details = fmt.Sprintf("policy %s fired; %s", strings.Join(pending, ","), ready.Message)
		}
	default:
		r.State, r.Reason = StateHealthy, ready.Reason
		r.Details = policySummary(p, now)
	}
	return r
}

// policySummary: each policy's last result, then the restarts.
func policySummary(p *autorebootv1alpha1.RebootPolicy, now time.Time) string {
	var parts []string
	for _, ps := range p.Status.Policies {
		res := cmp.Or(ps.LastResult, "waiting for its first result")
		if ps.ConsecutiveFailures > 0 {
			res += fmt.Sprintf(" (%d in a row)", ps.ConsecutiveFailures)
		}
		parts = append(parts, ps.Name+": "+res)
	}
	restarts := plural(int(p.Status.RestartCount), "restart")
	if t := p.Status.LastRestartTime; t != nil {
		restarts += ", last " + duration.HumanDuration(now.Sub(t.Time)) + " ago"
	}
	target := string(p.Spec.Target.Kind)
	if p.Spec.Target.Name != "" {
		target += " " + p.Spec.Target.Name
	} else {
		target += "s by selector"
	}
	return fmt.Sprintf("%s; %s; %s", target, strings.Join(parts, ", "), restarts)
}

func memcachedRow(m *cachev1alpha1.Memcached) Row {
	r := Row{Kind: "Memcached", Namespace: m.Namespace, Name: m.Name}
	gen, st := m.Generation, &m.Status
	avail := current(st.Conditions, cachev1alpha1.ConditionAvailable, gen)
	if st.ObservedGeneration < gen || avail == nil {
		return notReconciled(r, st.ObservedGeneration, gen)
	}
	if d := current(st.Conditions, cachev1alpha1.ConditionDegraded, gen); d != nil && d.Status == metav1.ConditionTrue {
		r.State, r.Reason, r.Details = StateDegraded, d.Reason, d.Message
		return r
	}
	prog := current(st.Conditions, cachev1alpha1.ConditionProgressing, gen)
	switch {
	case avail.Reason == cachev1alpha1.ReasonParked:
		r.State, r.Reason, r.Details = StateParked, avail.Reason, avail.Message
	case prog != nil && prog.Status == metav1.ConditionTrue:
		r.State, r.Reason, r.Details = StatePending, prog.Reason, prog.Message
	case avail.Status == metav1.ConditionTrue:
		r.State, r.Reason = StateHealthy, avail.Reason
		r.Details = fmt.Sprintf("%d/%d ready; %s in status.servers", st.ReadyReplicas, sizeOf(m), plural(len(st.Servers), "server"))
	default:
		r.State, r.Reason, r.Details = StateDegraded, avail.Reason, avail.Message
	}
	return r
}

// sizeOf is spec.size, or the CRD's default when it is unset.
func sizeOf(m *cachev1alpha1.Memcached) int32 {
	if m.Spec.Size == nil {
		return cachev1alpha1.DefaultSize
	}
	return *m.Spec.Size
}

func nsscalerRow(s *scalingv1alpha1.NSScaler) Row {
	r := Row{Kind: "NSScaler", Name: s.Name}
	gen, st := s.Generation, &s.Status
	if s.Spec.Suspend {
		r.State, r.Reason, r.Details = StateSuspended, scalingv1alpha1.ReasonSuspended, "spec.suspend is true: nothing is parked or restored"
		return r
	}
	ready := current(st.Conditions, scalingv1alpha1.ConditionReady, gen)
	if st.ObservedGeneration < gen || ready == nil {
		return notReconciled(r, st.ObservedGeneration, gen)
	}
	// Degraded covers workload errors and namespaces contested by another
	// NSScaler; Contested (another field manager scaling parked workloads
	// up) is read by name so older CRDs without it still work.
	for _, t := range []string{scalingv1alpha1.ConditionDegraded, "Contested"} {
		if c := current(st.Conditions, t, gen); c != nil && c.Status == metav1.ConditionTrue {
			r.State, r.Reason, r.Details = StateDegraded, c.Reason, c.Message
			return r
		}
	}
	if ready.Status != metav1.ConditionTrue {
		r.State, r.Reason, r.Details = StateDegraded, ready.Reason, ready.Message
		return r
	}
	parked := current(st.Conditions, scalingv1alpha1.ConditionParked, gen)
	summary := fmt.Sprintf("parked: %s (%s%s); running: %s", list(st.ParkedNamespaces), plural(int(st.ParkedWorkloads), "workload"),
		parkedTo(st), list(st.ActiveNamespaces))
	switch {
	case parked == nil:
		r.State, r.Reason, r.Details = StatePending, "NotReconciled", "no Parked condition yet"
	case parked.Status == metav1.ConditionTrue:
		r.State, r.Reason, r.Details = StateParked, parked.Reason, summary
	case parked.Reason == scalingv1alpha1.ReasonNothingParked:
		r.State, r.Reason, r.Details = StateHealthy, parked.Reason, summary
	default:
		r.State, r.Reason, r.Details = StatePending, parked.Reason, parked.Message
	}
	return r
}

// parkedTo says how a parked workload is parked when it keeps replicas
// (spec.parkedReplicas), and how many were left as they were.
func parkedTo(st *scalingv1alpha1.NSScalerStatus) string {
	if st.ParkedReplicas == 0 && st.AtOrBelowParkedReplicas == 0 {
		return ""
	}
	out := fmt.Sprintf(" at %s", plural(int(st.ParkedReplicas), "replica"))
	if st.AtOrBelowParkedReplicas > 0 {
		out += fmt.Sprintf(", %d left at or below", st.AtOrBelowParkedReplicas)
	}
	return out
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// render writes the table (or JSON) and a one-line summary.
func render(w io.Writer, rows []Row, output string, allNamespaces bool) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Items   []Row         `json:"items"`
			Summary map[State]int `json:"summary"`
		}{Items: append([]Row{}, rows...), Summary: count(rows)})
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No RebootPolicy, Memcached or NSScaler found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "KIND\tNAMESPACE\tNAME\tSTATE\tREASON\tDETAILS"
	if !allNamespaces {
		header = "KIND\tNAME\tSTATE\tREASON\tDETAILS"
	}
	_, _ = fmt.Fprintln(tw, header)
	for _, r := range rows {
		details := oneLine(r.Details)
		if output != "wide" {
			details = truncate(details, 100)
		}
		ns := r.Namespace
		if ns == "" {
			ns = "-"
		}
		if allNamespaces {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, printable(ns), printable(r.Name), r.State, printable(r.Reason), details)
		} else {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Kind, printable(r.Name), r.State, printable(r.Reason), details)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := count(rows)
	var parts []string
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%d %s", c[s], strings.ToLower(string(s))))
	}
	_, err := fmt.Fprintf(w, "\n%d objects: %s\n", len(rows), strings.Join(parts, ", "))
	return err
}

func count(rows []Row) map[State]int {
	c := map[State]int{}
	for _, s := range states {
		c[s] = 0
	}
	for _, r := range rows {
		c[r.State]++
	}
	return c
}

// oneLine is s on one line, with every control character (terminal escape
// sequences a tenant may have smuggled into a message) shown as '?'.
func oneLine(s string) string {
	return strings.Join(strings.Fields(printable(s)), " ")
}

// printable replaces control characters other than whitespace with '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
