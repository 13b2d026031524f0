package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// gateCommand is resume or approve: a nonce annotation the controller acts
// on once, written under a field manager naming the plugin and the user.
type gateCommand struct {
	verb, annotation string
	// handled reads the nonce the controller last acted on.
	handled func(*autorebootv1alpha1.RebootPolicy) string
	// note warns when the command will change nothing.
	note func(*autorebootv1alpha1.RebootPolicy) string
}

var resumeGate = gateCommand{
	verb: "resume", annotation: autorebootv1alpha1.ResumeAnnotation,
	handled: func(p *autorebootv1alpha1.RebootPolicy) string {
		if p.Status.Rollout == nil {
			return ""
		}
		return p.Status.Rollout.LastResume
	},
	note: func(p *autorebootv1alpha1.RebootPolicy) string {
		if p.Status.Rollout == nil || p.Status.Rollout.Halted == nil {
			return "the rollout is not halted: the restarts made so far will not halt it later"
		}
		return ""
	},
}

var approveGate = gateCommand{
	verb: "approve", annotation: autorebootv1alpha1.ApproveAnnotation,
	handled: func(p *autorebootv1alpha1.RebootPolicy) string {
		if p.Status.Approval == nil {
			return ""
		}
		return p.Status.Approval.LastApproval
	},
	note: func(p *autorebootv1alpha1.RebootPolicy) string {
		switch {
		case p.Spec.Approval != autorebootv1alpha1.ApprovalRequired:
			return "spec.approval is not Required: restarts do not wait for approval"
		case p.Status.PendingRestarts == 0:
			return "nothing waits now: this approval releases nothing, and a later restart needs another"
		}
		return ""
	},
}

type gateOptions struct {
	writeOptions
	waitOptions
	// whoami names the user (SelfSubjectReview, else the kubeconfig's user).
	whoami func(context.Context, client.Client) string
}

func newResumeCommand(conn *connection, env *environment) *cobra.Command {
	return newGateCommand(conn, env, resumeGate, "Resume a RebootPolicy's halted rollout",
		`resume lets a halted rollout go on. A rollout with rollout.maxConcurrent halts when a target it restarted does
not become available within rollout.progressDeadline (or a Deployment's own progressDeadlineSeconds); nothing more
is restarted until then. resume merge-patches the annotation autoreboot.runbook.dev/resume with a fresh nonce; the
controller acts on each nonce once (status.rollout.lastResume): the restarts made so far no longer halt the
rollout, and the next targets restart. The field manager of the write names the plugin and your user, and the
controller records it in status.rollout.resumedBy.`,
		`  kubectl runbook resume front-rollout          # go on past the halted target
  kubectl runbook resume front-rollout --wait   # and wait until the controller took it`)
}

func newApproveCommand(conn *connection, env *environment) *cobra.Command {
	return newGateCommand(conn, env, approveGate, "Approve the restarts a RebootPolicy with spec.approval Required holds",
		`approve releases the restarts that wait for approval now, each exactly once. It merge-patches the annotation
autoreboot.runbook.dev/approve with a fresh nonce; the controller acts on each nonce once and records it, and who
set it (the field manager of the write: the plugin and your user), in status.approval. A change after the approval
waits for another one. Whoever may patch the RebootPolicy may approve.`,
		`  kubectl runbook approve nginx-on-demo-tbl          # release what waits now
  kubectl runbook approve nginx-on-demo-tbl --wait   # and wait until the controller took it`)
}

func newGateCommand(conn *connection, env *environment, g gateCommand, short, long, example string) *cobra.Command {
	o := &gateOptions{whoami: whoami(conn)}
	cmd := &cobra.Command{
		Use:     g.verb + " REBOOTPOLICY",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: runWaitingWrite(conn, o, func(ctx context.Context, cl client.Client, ns, name string, out, errOut io.Writer) error {
			return o.run(ctx, g, cl, ns, name, env, out, errOut)
		}),
	}
	o.bindDryRun(cmd)
	o.bindWait(cmd, "the controller has acted on the nonce")
	return cmd
}

func (o *gateOptions) validate() error { return o.waitOptions.validate(&o.writeOptions) }

func (o *gateOptions) run(ctx context.Context, g gateCommand, cl client.Client, ns, name string, env *environment, out, errOut io.Writer) error {
	var rbp autorebootv1alpha1.RebootPolicy
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rbp); err != nil {
		return describeGetError(err, "RebootPolicy", ns, name)
	}
	if note := g.note(&rbp); note != "" {
		_, _ = fmt.Fprintf(errOut, "note: %s\n", note)
	}
	nonce := env.nonce()
	manager := fieldManagerFor(o.whoami(ctx, cl))
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, g.annotation, nonce)
	opts := append(o.patchOptions(), client.FieldOwner(manager))
	if err := cl.Patch(ctx, &rbp, client.RawPatch(types.MergePatchType, []byte(patch)), opts...); err != nil {
		return describeWriteError(err, "RebootPolicy", ns, name)
	}
	_, _ = fmt.Fprintf(out, "%s: RebootPolicy %s/%s, nonce %s, as %q%s\n", g.verb, ns, name, nonce, manager, o.suffix())
	if o.isDryRun() || !o.wait {
		return nil
	}
	// The patch's answer is the first look; later ones read the policy again.
	read := false
	handled := func() (bool, error) {
		if read {
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rbp); err != nil {
				return false, describeGetError(err, "RebootPolicy", ns, name)
			}
		}
		read = true
		return g.handled(&rbp) == nonce, nil
	}
	late := func() error {
		return fmt.Errorf("the controller did not act on %s %s within %s: is the manager running with the rebootpolicy controller?", g.verb, nonce, o.timeout)
	}
	if err := o.until(ctx, env, g.verb+" "+nonce, handled, late); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "handled: %s\n", gateOutcome(g, &rbp))
	return nil
}

// gateOutcome says what the controller made of the nonce.
func gateOutcome(g gateCommand, p *autorebootv1alpha1.RebootPolicy) string {
	if g.verb == resumeGate.verb {
		if p.Status.Rollout.Halted != nil {
			return "resumed, but the rollout halted again at " + string(p.Status.Rollout.Halted.Kind) + " " + p.Status.Rollout.Halted.Name
		}
		return "resumed by " + p.Status.Rollout.ResumedBy
	}
	return fmt.Sprintf("approved by %s; %d restarts still wait", p.Status.Approval.ApprovedBy, p.Status.PendingRestarts)
}

// fieldManagerFor names the plugin's write for user: the controller
// records it as who resumed or approved. The apiserver takes at most 128
// printable characters.
func fieldManagerFor(user string) string {
	user = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, user)
	if user == "" {
		return fieldOwner
	}
	m := fieldOwner + " (" + user + ")"
	if len(m) > 128 {
		m = m[:124] + "...)"
	}
	return m
}

// whoami asks the apiserver who the client is (SelfSubjectReview); where
// that is not served, the impersonated user (--as) or else the kubeconfig's
// user name stands in.
func whoami(conn *connection) func(context.Context, client.Client) string {
	return func(ctx context.Context, cl client.Client) string {
		ssr := &authenticationv1.SelfSubjectReview{}
		if err := cl.Create(ctx, ssr); err == nil && ssr.Status.UserInfo.Username != "" {
			return ssr.Status.UserInfo.Username
		}
		if conn.as != "" {
			return conn.as
		}
		raw, err := conn.clientConfig().RawConfig()
		if err != nil {
			return ""
		}
		name := conn.context
		if name == "" {
			name = raw.CurrentContext
		}
		if c, ok := raw.Contexts[name]; ok {
			return c.AuthInfo
		}
		return ""
	}
}
