package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// The three commands edit one entry of the NSScaler's spec.wake list, the
// one of the namespace (see docs/plugin.md for the exact semantics):
//
//	wake NS --for D   sets it to now+D
//	park NS           removes it (the namespace sleeps again when the schedule, or no schedule, says so)
//	unpark NS         sets it to the end of the sleep the schedule is in now (never shortening an entry)
//
// Each write is a merge patch with a resourceVersion precondition, retried
// on conflict from a fresh read, so a concurrent edit of the list is never
// lost; expired entries of other namespaces are dropped in the same write.

type wakeOptions struct {
	writeOptions
	scaler string
	// forD is --for of wake.
	forD time.Duration
}

func (o *wakeOptions) bind(cmd *cobra.Command) {
	o.bindDryRun(cmd)
	cmd.Flags().StringVar(&o.scaler, "scaler", "", "the NSScaler to edit when several select the namespace")
}

func newWakeCommand(conn *connection, env *environment) *cobra.Command {
	o := &wakeOptions{}
	cmd := &cobra.Command{
		Use:   "wake NAMESPACE --for DURATION",
		Short: "Let a parked namespace run for a while (an entry of its NSScaler's spec.wake)",
		Long: `wake sets the namespace's entry of spec.wake of the NSScaler that selects it to now + --for; the
NSScaler restores the namespace's workloads exactly and parks them again by itself when the entry expires
(if its schedule, or the absence of one, says the namespace sleeps then).

A user who may not patch the NSScaler (a SelfSubjectAccessReview says) gets a WakeRequest in the namespace
instead, which the NSScaler grants within the limits of its spec.selfService; wake waits for the decision and
says which way it went.`,
		Example: `  kubectl runbook wake proj-a --for 2h
  kubectl runbook wake proj-a --for 30m --scaler nightly --dry-run
  kubectl runbook wake proj-c --for 1h --as jane   # as jane, who may only edit proj-c: a WakeRequest`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("for") || o.forD <= 0 {
				return errors.New("wake needs --for, a positive duration such as 2h or 45m")
			}
			return o.wakeSomehow(cmd, conn, env, args[0])
		},
	}
	o.bind(cmd)
	cmd.Flags().DurationVar(&o.forD, "for", 0, "how long the namespace runs, e.g. 2h")
	return cmd
}

func newParkCommand(conn *connection, env *environment) *cobra.Command {
	o := &wakeOptions{}
	cmd := &cobra.Command{
		Use:   "park NAMESPACE",
		Short: "End a wake-up early: remove the namespace's entry from its NSScaler's spec.wake",
		Long: `park removes the namespace's entry of spec.wake; the NSScaler parks the namespace again at once
when its schedule (or the absence of one) says it sleeps now, otherwise when the next sleep starts. It does not
edit spec.whitelist: a whitelisted namespace always runs.`,
		Example: `  kubectl runbook park proj-a`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.edit(cmd, conn, env, args[0], o.park)
		},
	}
	o.bind(cmd)
	return cmd
}

func newUnparkCommand(conn *connection, env *environment) *cobra.Command {
	o := &wakeOptions{}
	cmd := &cobra.Command{
		Use:   "unpark NAMESPACE",
		Short: "Wake a namespace until its NSScaler's schedule would wake it anyway",
		Long: `unpark sets the namespace's entry of spec.wake to the end of the sleep period the NSScaler's schedule
is in now (the next time the schedule turns Awake), so the namespace runs from now on as if its sleep were
over. It never shortens an existing entry. An NSScaler without a schedule sleeps all the time: use wake --for.`,
		Example: `  kubectl runbook unpark proj-a`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.edit(cmd, conn, env, args[0], o.unpark)
		},
	}
	o.bind(cmd)
	return cmd
}

// edit finds the NSScaler of the namespace and applies change to a fresh
// copy until the patch goes through without a conflict.
func (o *wakeOptions) edit(cmd *cobra.Command, conn *connection, env *environment, ns string, change wakeEdit) error {
	cl, _, err := conn.resolve()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	name, warning, err := scalerFor(ctx, cl, ns, o.scaler)
	if err != nil {
		return err
	}
	if warning != "" {
		_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "warning:", warning)
	}
	msg, err := o.patch(ctx, cl, name, ns, env.now(), change)
	if err != nil {
		return err
	}
	return printResult(cmd.OutOrStdout(), msg, o.suffix())
}

func (o *wakeOptions) patch(ctx context.Context, cl client.Client, name, ns string, now time.Time, change wakeEdit) (string, error) {
	var msg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s scalingv1alpha1.NSScaler
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &s); err != nil {
			return describeGetError(err, "NSScaler", "", name)
		}
		if slices.Contains(s.Spec.Whitelist, ns) {
			return fmt.Errorf("namespace %s is in spec.whitelist of NSScaler %s: it always runs (the plugin does not edit the whitelist)", ns, name)
		}
		base := s.DeepCopy()
		var changed bool
		var err error
		if msg, changed, err = change(&s, ns, now); err != nil || !changed {
			return err
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := cl.Patch(ctx, &s, patch, o.patchOptions()...); err != nil {
			if isConflict(err) {
				return err
			}
			return describeWriteError(err, "NSScaler", "", name)
		}
		return nil
	})
	return msg, err
}

func printResult(w io.Writer, msg, suffix string) error {
	first, rest, _ := strings.Cut(msg, "\n")
	_, err := fmt.Fprintf(w, "%s%s\n", first, suffix)
	if err == nil && rest != "" {
		_, err = fmt.Fprintln(w, rest)
	}
	return err
}
