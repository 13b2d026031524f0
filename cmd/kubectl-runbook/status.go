package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
