package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

// SavingsRow is one line of the savings table: a namespace of an NSScaler,
// or (Namespace "TOTAL") the NSScaler's total, or (NSScaler "TOTAL") the
// total of every NSScaler shown.
type SavingsRow struct {
	NSScaler       string `json:"nsscaler"`
	Namespace      string `json:"namespace"`
	ParkedPods     int64  `json:"parkedPods"`
	PodHours       string `json:"podHours"`
	CPUCoreHours   string `json:"cpuCoreHours"`
	MemoryGiBHours string `json:"memoryGiBHours"`
	// Cost and Currency are set when the NSScaler has spec.prices.
	Cost     string `json:"cost,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Since is when the figures start: status.savings.since, or with
	// --since the start of its UTC day (or of the history kept, when later).
	Since string `json:"since"`
	// BeyondHistory: --since reaches before the history the NSScaler keeps;
	// the figures start at Since.
	BeyondHistory bool `json:"beyondHistory,omitempty"`
}

type savingsOptions struct {
	output string
	since  string
}

func newSavingsCommand(conn *connection, env *environment) *cobra.Command {
	o := &savingsOptions{}
	cmd := &cobra.Command{
		Use:   "savings [NSSCALER...]",
		Short: "What parking did not run: pod-hours, CPU core-hours and memory GiB-hours per namespace, and the money with spec.prices",
		Long: `savings reads status.savings of the NSScalers (all, or those named) and adds to each namespace's
recorded totals the interval in progress (its current rate since rateSince), up to now. The totals cover the
time since status.savings.since (the first park the controller counted).

With --since (a duration back from now, 36h or 7d, an RFC 3339 time or a date), the figures are the sum of the
daily entries the controller keeps (UTC days, the last 35) from the UTC day holding --since, plus the part of the
interval in progress after it: the SINCE column says where they start. Where the history kept does not reach
that far (a newer NSScaler, older days dropped, or the namespaces' entries bounded), the figures start where it
does and the row is marked.`,
		Example: `  kubectl runbook savings
  kubectl runbook savings --since 7d
  kubectl runbook savings nightly --since 2026-12-01 -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"", "json"}, o.output) {
				return fmt.Errorf("--output %q: want json (or nothing for the table)", o.output)
			}
			now := env.now()
			var since *time.Time
			if o.since != "" {
				t, err := parseSince(o.since, now)
				if err != nil {
					return err
				}
				since = &t
			}
			cl, _, err := conn.resolve()
			if err != nil {
				return err
			}
			rows, err := savingsRows(cmd.Context(), cl, args, now, since)
			if err != nil {
				return err
			}
			return printSavings(cmd.OutOrStdout(), rows, o.output)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "json for machine-readable rows")
	cmd.Flags().StringVar(&o.since, "since", "", "only what was saved from the UTC day holding this: a duration back from now (36h, 7d), an RFC 3339 time or a date (YYYY-MM-DD)")
	return cmd
}

// savingsRows lists the NSScalers named (all when none) and turns their
// reports into rows at now: whole totals, or from since (nil: whole).
func savingsRows(ctx context.Context, cl client.Client, names []string, now time.Time, since *time.Time) ([]SavingsRow, error) {
	var scalers []scalingv1alpha1.NSScaler
	if len(names) == 0 {
		var l scalingv1alpha1.NSScalerList
		if err := cl.List(ctx, &l); err != nil {
			return nil, fmt.Errorf("listing NSScalers: %w", err)
		}
		scalers = l.Items
	}
	for _, n := range names {
		var s scalingv1alpha1.NSScaler
		if err := cl.Get(ctx, client.ObjectKey{Name: n}, &s); err != nil {
			return nil, fmt.Errorf("reading NSScaler %s: %w", n, err)
		}
		scalers = append(scalers, s)
	}
	slices.SortFunc(scalers, func(a, b scalingv1alpha1.NSScaler) int { return cmp.Compare(a.Name, b.Name) })
	var rows []SavingsRow
	var all scalingv1alpha1.SavingsTotals
	var allPods int64
	for i := range scalers {
		s := &scalers[i]
		rep := s.Status.Savings
		if rep == nil {
			// Nothing parked yet.
			r := savingsRow(s, "TOTAL", 0, scalingv1alpha1.SavingsTotals{}, "-")
			rows = append(rows, r)
			continue
		}
		var total scalingv1alpha1.SavingsTotals
		if since != nil {
			rows, total = appendWindowRows(rows, s, *since, now)
		} else {
			from := rep.Since.UTC().Format(time.RFC3339)
			for _, ns := range rep.Namespaces {
				rows = append(rows, savingsRow(s, ns.Namespace, ns.CurrentRate.Pods, savings.Namespace(ns, now), from))
			}
			total = savings.Total(rep, now)
			rows = append(rows, savingsRow(s, "TOTAL", rep.CurrentRate.Pods, total, from))
		}
		all = savings.AddTotals(all, total)
		allPods += rep.CurrentRate.Pods
	}
	if len(scalers) > 1 {
		rows = append(rows, SavingsRow{NSScaler: "TOTAL", Namespace: "", ParkedPods: allPods,
			PodHours: decimal(all.PodHours), CPUCoreHours: decimal(all.CPUCoreHours), MemoryGiBHours: decimal(all.MemoryGiBHours), Since: "-"})
	}
	return rows, nil
}

func savingsRow(s *scalingv1alpha1.NSScaler, namespace string, pods int64, t scalingv1alpha1.SavingsTotals, since string) SavingsRow {
	r := SavingsRow{NSScaler: s.Name, Namespace: namespace, ParkedPods: pods,
		PodHours: decimal(t.PodHours), CPUCoreHours: decimal(t.CPUCoreHours), MemoryGiBHours: decimal(t.MemoryGiBHours), Since: since}
	if m := savings.Money(s.Spec.Prices, t, savings.Rate{}); m != nil {
		r.Cost, r.Currency = decimalPlaces(m.Total, 2), m.Currency
	}
	return r
}

// appendWindowRows adds an NSScaler's rows from since: each namespace from
// the namespaces' history, the total from the NSScaler's (which keeps the
// namespaces no longer listed too).
func appendWindowRows(rows []SavingsRow, s *scalingv1alpha1.NSScaler, since, now time.Time) ([]SavingsRow, scalingv1alpha1.SavingsTotals) {
	rep := s.Status.Savings
	nsFrom, nsBeyond := savings.WindowStart(since, rep.NamespaceDailyFrom, now)
	for _, ns := range rep.Namespaces {
		r := savingsRow(s, ns.Namespace, ns.CurrentRate.Pods, savings.NamespaceSince(ns, nsFrom, now), nsFrom.UTC().Format(time.RFC3339))
		r.BeyondHistory = nsBeyond
		rows = append(rows, r)
	}
	from, beyond := savings.WindowStart(since, rep.DailyFrom, now)
	total := savings.TotalSince(rep, from, now)
	r := savingsRow(s, "TOTAL", rep.CurrentRate.Pods, total, from.UTC().Format(time.RFC3339))
	r.BeyondHistory = beyond
	return append(rows, r), total
}

// decimal shows a total with three decimals.
func decimal(q resource.Quantity) string { return decimalPlaces(q, 3) }

func decimalPlaces(q resource.Quantity, places int) string {
	d := new(inf.Dec).Round(q.AsDec(), inf.Scale(places), inf.RoundHalfUp)
	return d.String()
}

func printSavings(w io.Writer, rows []SavingsRow, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if rows == nil {
			rows = []SavingsRow{}
		}
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No NSScalers found.")
		return err
	}
	priced := slices.ContainsFunc(rows, func(r SavingsRow) bool { return r.Cost != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NSSCALER\tNAMESPACE\tPARKED PODS\tPOD-HOURS\tCPU CORE-HOURS\tMEMORY GIB-HOURS"
	if priced {
		header += "\tCOST"
	}
	_, _ = fmt.Fprintln(tw, header+"\tSINCE")
	for _, r := range rows {
		// Status is the controller's, but printed as status prints: no
		// control character reaches the terminal.
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", printable(r.NSScaler), printable(r.Namespace), strconv.FormatInt(r.ParkedPods, 10), r.PodHours, r.CPUCoreHours, r.MemoryGiBHours)
		if priced {
			cost := "-"
			if r.Cost != "" {
				cost = r.Cost + " " + printable(r.Currency)
			}
			line += "\t" + cost
		}
		since := r.Since
		if r.BeyondHistory {
			since += " *"
		}
		_, _ = fmt.Fprintln(tw, line+"\t"+since)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if slices.ContainsFunc(rows, func(r SavingsRow) bool { return r.BeyondHistory }) {
		_, err := fmt.Fprintln(w, "* --since reaches before the history kept: these figures start at SINCE.")
		return err
	}
	return nil
}
