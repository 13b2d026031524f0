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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/nsscaler"
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
  kubectl runbook wake proj-a --for 30m --scaler nightly --dry-run`,
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

// wakeEdit changes the NSScaler s (a fresh copy) for namespace ns at now;
// it returns what happened, in words, and whether s changed.
type wakeEdit func(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (msg string, changed bool, err error)

func (o *wakeOptions) wake(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (string, bool, error) {
	until := now.Add(o.forD).Truncate(time.Second)
	setWake(s, ns, until, now)
	return fmt.Sprintf("namespace %s runs until %s (in %s): NSScaler %s, spec.wake", ns, until.UTC().Format(time.RFC3339), shortDuration(until.Sub(now)), s.Name), true, nil
}

func (o *wakeOptions) park(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (string, bool, error) {
	had := slices.IndexFunc(s.Spec.Wake, func(e scalingv1alpha1.WakeEntry) bool { return e.Namespace == ns })
	if had < 0 || !s.Spec.Wake[had].Until.After(now) {
		msg := fmt.Sprintf("namespace %s has no wake entry in force on NSScaler %s: nothing to end", ns, s.Name)
		return msg + awakeNote(s, now), false, nil
	}
	removeWake(s, ns, now)
	return fmt.Sprintf("namespace %s: wake entry removed from NSScaler %s; it is parked again", ns, s.Name) + awakeNote(s, now), true, nil
}

func (o *wakeOptions) unpark(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (string, bool, error) {
	until, why, err := endOfSleep(s, now)
	if err != nil {
		return "", false, err
	}
	if i := slices.IndexFunc(s.Spec.Wake, func(e scalingv1alpha1.WakeEntry) bool { return e.Namespace == ns }); i >= 0 && !s.Spec.Wake[i].Until.Time.Before(until) {
		return fmt.Sprintf("namespace %s already runs until %s (spec.wake of NSScaler %s), past the end of this sleep (%s): nothing to change",
			ns, s.Spec.Wake[i].Until.UTC().Format(time.RFC3339), s.Name, until.UTC().Format(time.RFC3339)), false, nil
	}
	setWake(s, ns, until, now)
	return fmt.Sprintf("namespace %s runs until %s (in %s), when NSScaler %s's schedule wakes anyway (now: %s)",
		ns, until.UTC().Format(time.RFC3339), shortDuration(until.Sub(now)), s.Name, why), true, nil
}

// endOfSleep is when the NSScaler's schedule next turns Awake, from a sleep
// it is in at now; it is computed as the controller computes it.
func endOfSleep(s *scalingv1alpha1.NSScaler, now time.Time) (time.Time, string, error) {
	if s.Spec.Schedule == nil {
		return time.Time{}, "", fmt.Errorf("NSScaler %s has no schedule: its namespaces sleep all the time, so no sleep ends to wake until; use `kubectl runbook wake NAMESPACE --for DURATION`", s.Name)
	}
	sched, err := nsscaler.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("NSScaler %s: %w", s.Name, err)
	}
	v := sched.At(now)
	if v.Phase != scalingv1alpha1.PhaseAsleep {
		return time.Time{}, "", fmt.Errorf("NSScaler %s's schedule is awake now (%s): its namespaces run already; nothing to unpark", s.Name, v.Reason)
	}
	next := sched.Next(now)
	if next.IsZero() {
		return time.Time{}, "", fmt.Errorf("NSScaler %s's schedule never wakes again (%s); use `kubectl runbook wake NAMESPACE --for DURATION`", s.Name, v.Reason)
	}
	return next.Truncate(time.Second), v.Reason, nil
}

// awakeNote says, after a park, that the schedule lets the namespace run
// for now anyway.
func awakeNote(s *scalingv1alpha1.NSScaler, now time.Time) string {
	if s.Spec.Schedule == nil {
		return ""
	}
	sched, err := nsscaler.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		return ""
	}
	if v := sched.At(now); v.Phase == scalingv1alpha1.PhaseAwake {
		note := fmt.Sprintf("\nnote: the schedule is awake now (%s), so the namespace runs", v.Reason)
		if next := sched.Next(now); !next.IsZero() {
			note += " until " + next.UTC().Format(time.RFC3339)
		}
		return note
	}
	return ""
}

// setWake sets ns's entry to until and drops the expired entries of other
// namespaces (the controller ignores them; dropping them keeps the list
// under its 256 entries).
func setWake(s *scalingv1alpha1.NSScaler, ns string, until, now time.Time) {
	removeWake(s, ns, now)
	s.Spec.Wake = append(s.Spec.Wake, scalingv1alpha1.WakeEntry{Namespace: ns, Until: metav1.NewTime(until.UTC())})
	slices.SortFunc(s.Spec.Wake, func(a, b scalingv1alpha1.WakeEntry) int { return strings.Compare(a.Namespace, b.Namespace) })
}

func removeWake(s *scalingv1alpha1.NSScaler, ns string, now time.Time) {
	s.Spec.Wake = slices.DeleteFunc(s.Spec.Wake, func(e scalingv1alpha1.WakeEntry) bool {
		return e.Namespace == ns || !e.Until.After(now)
	})
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

// scalerFor is the NSScaler to edit for namespace ns: the one selecting it,
// or want (which must select it). warning is set when want is not the
// NSScaler that acts on the namespace.
func scalerFor(ctx context.Context, cl client.Client, ns, want string) (name, warning string, err error) {
	var namespace corev1.Namespace
	if err := cl.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err != nil {
		return "", "", describeGetError(err, "namespace", "", ns)
	}
	var list scalingv1alpha1.NSScalerList
	if err := cl.List(ctx, &list); err != nil {
		return "", "", describeListError(err, "NSScalers")
	}
	return chooseScaler(list.Items, ns, namespace.Labels, want)
}

// chooseScaler picks among the NSScalers the one for namespace ns (labels
// lbls), with the controller's own selection (nsscaler.Selects): when
// several select a namespace, the oldest acts on it.
func chooseScaler(all []scalingv1alpha1.NSScaler, ns string, lbls map[string]string, want string) (string, string, error) {
	var selecting []*scalingv1alpha1.NSScaler
	for i := range all {
		if nsscaler.Selects(&all[i], ns, lbls) {
			selecting = append(selecting, &all[i])
		}
	}
	slices.SortFunc(selecting, func(a, b *scalingv1alpha1.NSScaler) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var names []string
	for _, s := range selecting {
		names = append(names, s.Name)
	}
	switch {
	case want != "" && slices.Contains(names, want):
		if names[0] != want {
			return want, fmt.Sprintf("NSScaler %s selects namespace %s too and is older, so it is the one acting on it; an entry on %s takes effect only if %s stops selecting it", names[0], ns, want, names[0]), nil
		}
		return want, "", nil
	case want != "":
		if !slices.ContainsFunc(all, func(s scalingv1alpha1.NSScaler) bool { return s.Name == want }) {
			return "", "", fmt.Errorf("NSScaler %s not found", want)
		}
		return "", "", fmt.Errorf("NSScaler %s does not select namespace %s (those that do: %s)", want, ns, list0(names))
	case len(names) == 0:
		return "", "", fmt.Errorf("no NSScaler selects namespace %s: nothing parks it", ns)
	case len(names) > 1:
		return "", "", fmt.Errorf("namespace %s is selected by %d NSScalers (%s; %s is the oldest and acts on it): choose one with --scaler", ns, len(names), strings.Join(names, ", "), names[0])
	}
	return names[0], "", nil
}

// shortDuration is d to the minute as people write it: 2h, 2h30m, 45m.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Minute).String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" {
		return "0m"
	}
	return s
}
