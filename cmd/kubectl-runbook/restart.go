package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// workloadKinds maps what users type (kubectl's names and short names,
// plain or with their API group) to a RebootPolicy target kind. A kind of
// another group (rollouts.example.com) is none of these.
var workloadKinds = map[string]autorebootv1alpha1.TargetKind{
	"deployment": autorebootv1alpha1.KindDeployment, "deployments": autorebootv1alpha1.KindDeployment, "deploy": autorebootv1alpha1.KindDeployment,
	"deployment.apps": autorebootv1alpha1.KindDeployment, "deployments.apps": autorebootv1alpha1.KindDeployment,
	"statefulset": autorebootv1alpha1.KindStatefulSet, "statefulsets": autorebootv1alpha1.KindStatefulSet, "sts": autorebootv1alpha1.KindStatefulSet,
	"statefulset.apps": autorebootv1alpha1.KindStatefulSet, "statefulsets.apps": autorebootv1alpha1.KindStatefulSet,
	"daemonset": autorebootv1alpha1.KindDaemonSet, "daemonsets": autorebootv1alpha1.KindDaemonSet, "ds": autorebootv1alpha1.KindDaemonSet,
	"daemonset.apps": autorebootv1alpha1.KindDaemonSet, "daemonsets.apps": autorebootv1alpha1.KindDaemonSet,
	"rollout": autorebootv1alpha1.KindRollout, "rollouts": autorebootv1alpha1.KindRollout, "ro": autorebootv1alpha1.KindRollout,
	"rollout.argoproj.io": autorebootv1alpha1.KindRollout, "rollouts.argoproj.io": autorebootv1alpha1.KindRollout,
}

// parseWorkload reads KIND/NAME.
func parseWorkload(arg string) (autorebootv1alpha1.TargetKind, string, error) {
	k, name, _ := strings.Cut(arg, "/")
	kind, ok := workloadKinds[strings.ToLower(k)]
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want REBOOTPOLICY or KIND/NAME with KIND deployment, statefulset, daemonset or rollout (Argo Rollouts)", arg)
	}
	return kind, name, nil
}

// rolloutGVK is Argo Rollouts' Rollout, read unstructured: the plugin does
// not depend on Argo Rollouts' types, and the kind may not be installed.
var rolloutGVK = schema.FromAPIVersionAndKind(autorebootv1alpha1.ArgoRolloutsAPIVersion, string(autorebootv1alpha1.KindRollout))

// workloadLabels reads the workload's labels (a selector target matches them).
func workloadLabels(ctx context.Context, cl client.Client, kind autorebootv1alpha1.TargetKind, ns, name string) (map[string]string, error) {
	var obj client.Object
	switch kind {
	case autorebootv1alpha1.KindDeployment:
		obj = &appsv1.Deployment{}
	case autorebootv1alpha1.KindStatefulSet:
		obj = &appsv1.StatefulSet{}
	case autorebootv1alpha1.KindRollout:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(rolloutGVK)
		obj = u
	default:
		obj = &appsv1.DaemonSet{}
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if kind == autorebootv1alpha1.KindRollout && meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("the cluster does not serve the Rollout kind (rollouts.argoproj.io, %s): Argo Rollouts is not installed, so there is no Rollout %s to restart",
				autorebootv1alpha1.ArgoRolloutsAPIVersion, name)
		}
		return nil, describeGetError(err, string(kind), ns, name)
	}
	return obj.GetLabels(), nil
}

// targets reports whether the RebootPolicy restarts the workload.
func targets(p *autorebootv1alpha1.RebootPolicy, kind autorebootv1alpha1.TargetKind, name string, lbls map[string]string) bool {
	t := p.Spec.Target
	if t.Kind != kind {
		return false
	}
	if t.Name != "" {
		return t.Name == name
	}
	if t.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Selector.LabelSelector())
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(lbls))
}

// policyForWorkload finds the one RebootPolicy of the namespace that
// targets the workload (or checks that --policy does).
func policyForWorkload(ctx context.Context, cl client.Client, ns, arg, want string) (string, error) {
	kind, name, err := parseWorkload(arg)
	if err != nil {
		return "", err
	}
	lbls, err := workloadLabels(ctx, cl, kind, ns, name)
	if err != nil {
		return "", err
	}
	var list autorebootv1alpha1.RebootPolicyList
	if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return "", describeListError(err, "RebootPolicies")
	}
	var names []string
	for i := range list.Items {
		if targets(&list.Items[i], kind, name, lbls) {
			names = append(names, list.Items[i].Name)
		}
	}
	slices.Sort(names)
	what := fmt.Sprintf("%s %s/%s", kind, ns, name)
	switch {
	case want != "" && slices.Contains(names, want):
		return want, nil
	case want != "":
		return "", fmt.Errorf("RebootPolicy %q does not target %s (those that do: %s)", want, what, list0(names))
	case len(names) == 0:
		return "", fmt.Errorf("no RebootPolicy in namespace %s targets %s: create one, or fire another by its name", ns, what)
	case len(names) > 1:
		return "", fmt.Errorf("%d RebootPolicies target %s (%s): choose one with --policy", len(names), what, strings.Join(names, ", "))
	}
	return names[0], nil
}

func list0(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// describeGetError turns an API error into a sentence a user can act on.
func describeGetError(err error, kind, ns, name string) error {
	where := name
	if ns != "" {
		where = ns + "/" + name
	}
	switch {
	case apierrors.IsNotFound(err):
		if ns != "" {
			return fmt.Errorf("%s %s not found (namespace %s; -n chooses another)", kind, name, ns)
		}
		return fmt.Errorf("%s %s not found", kind, name)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading %s %s is forbidden for you: %w", kind, where, err)
	}
	return fmt.Errorf("reading %s %s: %w", kind, where, err)
}

func describeWriteError(err error, kind, ns, name string) error {
	where := name
	if ns != "" {
		where = ns + "/" + name
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("patching %s %s is forbidden for you (the plugin needs patch on it): %w", kind, where, err)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("the apiserver refuses the change to %s %s: %w", kind, where, err)
	}
	return fmt.Errorf("patching %s %s: %w", kind, where, err)
}

func describeListError(err error, kinds string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("listing %s is forbidden for you: %w", kinds, err)
	}
	return fmt.Errorf("listing %s: %w", kinds, err)
}

// newNonce is a restart-request nonce: the time (for a reader) and random
// bits (so that two requests in one second differ).
func newNonce(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return now.UTC().Format("20060102t150405z") + "-" + hex.EncodeToString(b)
}
