package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

type restartOptions struct {
	writeOptions
	waitOptions
	policy string
}

func newRestartCommand(conn *connection, env *environment) *cobra.Command {
	o := &restartOptions{}
	cmd := &cobra.Command{
		Use:   "restart (REBOOTPOLICY | KIND/WORKLOAD [--policy REBOOTPOLICY])",
		Short: "Fire a RebootPolicy by hand: its targets restart as when a trigger fires",
		Long: `restart asks the RebootPolicy controller to fire a policy now. It merge-patches the annotation
autoreboot.runbook.dev/restart-request with a fresh nonce onto the RebootPolicy; the controller handles each
nonce once (records it in status.lastRestartRequest, emits a RestartRequested event) and restarts every target
of the policy within its restart windows and throttle, exactly once, as for a trigger.

A workload (deployment/NAME, statefulset/NAME, daemonset/NAME, rollout/NAME for an Argo Rollouts Rollout) names
the RebootPolicy that targets it (by name or selector); when several do, choose one with --policy. Every target of
that policy restarts, not only the workload named. The controller restarts a Rollout through its spec.restartAt,
as kubectl argo rollouts restart does: the Rollout controller replaces its pods.`,
		Example: `  kubectl runbook restart nginx-on-demo-tbl           # fire this RebootPolicy
  kubectl runbook restart deployment/nginx --wait     # the RebootPolicy targeting nginx; wait until handled
  kubectl runbook restart deploy/nginx --policy p1    # several target nginx: choose one
  kubectl runbook restart rollout/front               # the RebootPolicy targeting an Argo Rollouts Rollout
  kubectl runbook restart nginx-on-demo-tbl --dry-run # check the request without making it`,
		Args: cobra.ExactArgs(1),
		RunE: runWaitingWrite(conn, o, func(ctx context.Context, cl client.Client, ns, arg string, out, errOut io.Writer) error {
			return o.run(ctx, cl, ns, arg, env, out, errOut)
		}),
	}
	o.bindDryRun(cmd)
	cmd.Flags().StringVar(&o.policy, "policy", "", "the RebootPolicy to fire when several target the workload")
	o.bindWait(cmd, "the controller has handled the request (status.lastRestartRequest is the nonce)")
	return cmd
}

func (o *restartOptions) validate() error { return o.waitOptions.validate(&o.writeOptions) }

func (o *restartOptions) run(ctx context.Context, cl client.Client, ns, arg string, env *environment, out, errOut io.Writer) error {
	name := arg
	if strings.Contains(arg, "/") {
		var err error
		if name, err = policyForWorkload(ctx, cl, ns, arg, o.policy); err != nil {
			return err
		}
	} else if o.policy != "" {
		return fmt.Errorf("--policy chooses among the RebootPolicies of a workload (KIND/NAME); %q already names a RebootPolicy", arg)
	}
	var rbp autorebootv1alpha1.RebootPolicy
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rbp); err != nil {
		return describeGetError(err, "RebootPolicy", ns, name)
	}
	if rbp.Spec.Suspend {
		return fmt.Errorf("RebootPolicy %s/%s is suspended (spec.suspend: true): it restarts nothing until it is resumed", ns, name)
	}
	if prev := rbp.Annotations[autorebootv1alpha1.RestartRequestAnnotation]; prev != "" && prev != rbp.Status.LastRestartRequest {
		_, _ = fmt.Fprintf(errOut, "note: the earlier request %s is not handled yet; this one replaces it (the policy fires once)\n", prev)
	}
	nonce := env.nonce()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, autorebootv1alpha1.RestartRequestAnnotation, nonce)
	if err := cl.Patch(ctx, &rbp, client.RawPatch(types.MergePatchType, []byte(patch)), o.patchOptions()...); err != nil {
		return describeWriteError(err, "RebootPolicy", ns, name)
	}
	_, _ = fmt.Fprintf(out, "restart requested: RebootPolicy %s/%s, nonce %s%s\n", ns, name, nonce, o.suffix())
	if o.isDryRun() {
		return nil
	}
	_, _ = fmt.Fprintf(out, "targets: %s\n", describeTarget(rbp.Spec.Target))
	if !o.wait {
		_, _ = fmt.Fprintf(out, "the controller records it in status.lastRestartRequest once handled (--wait waits for that)\n")
		return nil
	}
	return o.waitHandled(ctx, cl, client.ObjectKeyFromObject(&rbp), nonce, env, out)
}

// waitHandled polls the RebootPolicy until status.lastRestartRequest is
// nonce, then prints what the controller said (its RestartRequested event).
func (o *restartOptions) waitHandled(ctx context.Context, cl client.Client, key client.ObjectKey, nonce string, env *environment, out io.Writer) error {
	var rbp autorebootv1alpha1.RebootPolicy
	handled := func() (bool, error) {
		if err := cl.Get(ctx, key, &rbp); err != nil {
			return false, describeGetError(err, "RebootPolicy", key.Namespace, key.Name)
		}
		return rbp.Status.LastRestartRequest == nonce, nil
	}
	late := func() error {
		return fmt.Errorf("the controller did not handle restart request %s within %s (status.lastRestartRequest is %q): is the manager running with the rebootpolicy controller? `kubectl runbook status` shows it",
			nonce, o.timeout, rbp.Status.LastRestartRequest)
	}
	if err := o.until(ctx, env, "restart request "+nonce, handled, late); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "handled: RebootPolicy %s/%s took request %s", key.Namespace, key.Name, nonce)
	if t := rbp.Status.LastRestartTime; t != nil {
		_, _ = fmt.Fprintf(out, "; %s so far, last %s", plural(int(rbp.Status.RestartCount), "restart"), t.UTC().Format(time.RFC3339))
	}
	_, _ = fmt.Fprintln(out)
	if note := requestEvent(ctx, cl, &rbp); note != "" {
		_, _ = fmt.Fprintf(out, "event RestartRequested: %s\n", note)
	}
	return nil
}

// requestEvent is the note of the newest RestartRequested event of rbp,
// or "" (events are best effort; reading them needs RBAC on events).
func requestEvent(ctx context.Context, cl client.Client, rbp *autorebootv1alpha1.RebootPolicy) string {
	var evs corev1.EventList
	if err := cl.List(ctx, &evs, client.InNamespace(rbp.Namespace)); err != nil {
		return ""
	}
	var note string
	var newest time.Time
	for _, e := range evs.Items {
		if e.Reason != autorebootv1alpha1.EventRestartRequested || e.InvolvedObject.UID != rbp.UID {
			continue
		}
		when := eventTime(&e)
		if note == "" || when.After(newest) {
			note, newest = e.Message, when
		}
	}
	return note
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func describeTarget(t autorebootv1alpha1.TargetRef) string {
	if t.Name != "" {
		return fmt.Sprintf("%s %s", t.Kind, t.Name)
	}
	if sel, err := metav1.LabelSelectorAsSelector(t.Selector.LabelSelector()); err == nil {
		return fmt.Sprintf("every %s matching %s", t.Kind, sel)
	}
	return fmt.Sprintf("%ss by selector", t.Kind)
}

// newNonce is a restart-request nonce: the time (for a reader) and random
// bits (so that two requests in one second differ).
func newNonce(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return now.UTC().Format("20060102t150405z") + "-" + hex.EncodeToString(b)
}
