package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// controllerActs plays the controller: after the plugin's patch it records
// the gate's nonce in status, as the controller does once it acted on it.
// It also captures the field manager of the patch.
func controllerActs(manager *string) *interceptor.Funcs {
	return &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		po := &client.PatchOptions{}
		po.ApplyOptions(opts)
		*manager = po.FieldManager
		if err := c.Patch(ctx, obj, patch, opts...); err != nil || len(po.DryRun) > 0 {
			return err
		}
		rbp := obj.(*autorebootv1alpha1.RebootPolicy)
		if v := rbp.Annotations[autorebootv1alpha1.ResumeAnnotation]; v != "" {
			rbp.Status.Rollout = &autorebootv1alpha1.RolloutStatus{LastResume: v, ResumedBy: po.FieldManager}
		}
		if v := rbp.Annotations[autorebootv1alpha1.ApproveAnnotation]; v != "" {
			rbp.Status.Approval = &autorebootv1alpha1.ApprovalStatus{LastApproval: v, ApprovedBy: po.FieldManager}
		}
		return c.Status().Update(ctx, rbp)
	}}
}

func haltedPolicy() *autorebootv1alpha1.RebootPolicy {
	p := policy("seq", bySelector(autorebootv1alpha1.KindDeployment, "tier", "front"))
	p.Status.Rollout = &autorebootv1alpha1.RolloutStatus{Halted: &autorebootv1alpha1.HaltedRestart{Kind: autorebootv1alpha1.KindDeployment, Name: "a", Reason: "NotAvailable"}}
	return p
}

func runGate(t *testing.T, g gateCommand, cl client.Client, wait, dryRun bool) (outputs, error) {
	t.Helper()
	o := &gateOptions{waitOptions: waitOptions{wait: wait, timeout: time.Minute}, whoami: func(context.Context, client.Client) string { return "alice@example.com" }}
	o.dryRun = "none"
	if dryRun {
		o.dryRun = "server"
	}
	var out outputs
	err := o.run(context.Background(), g, cl, "shop", "seq", testEnv(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), &out.out, &out.errOut)
	return out, err
}

func TestResumeWritesANonceAsTheUserAndWaitsForTheController(t *testing.T) {
	var manager string
	cl := fakeClient(controllerActs(&manager), haltedPolicy())
	out, err := runGate(t, resumeGate, cl, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if manager != "kubectl-runbook (alice@example.com)" {
		t.Errorf("field manager %q", manager)
	}
	var got autorebootv1alpha1.RebootPolicy
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "seq"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[autorebootv1alpha1.ResumeAnnotation] != "20261201t120000z-0a1b2c3d" {
		t.Errorf("annotations %v", got.Annotations)
	}
	for _, want := range []string{"resume: RebootPolicy shop/seq, nonce 20261201t120000z-0a1b2c3d", "handled: resumed by kubectl-runbook (alice@example.com)"} {
		if !strings.Contains(out.out.String(), want) {
			t.Errorf("output %q lacks %q", out.out.String(), want)
		}
	}
	if out.errOut.Len() != 0 {
		t.Errorf("a halted rollout needs no note: %q", out.errOut.String())
	}
}

func TestResumeOfARolloutThatIsNotHaltedSaysSo(t *testing.T) {
	var manager string
	cl := fakeClient(controllerActs(&manager), policy("seq", byName(autorebootv1alpha1.KindDeployment, "a")))
	out, err := runGate(t, resumeGate, cl, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.errOut.String(), "not halted") {
		t.Errorf("stderr %q", out.errOut.String())
	}
}

func TestApproveRecordsTheApproverAndWarnsWhenNothingWaits(t *testing.T) {
	var manager string
	p := policy("seq", byName(autorebootv1alpha1.KindDeployment, "web"))
	p.Spec.Approval = autorebootv1alpha1.ApprovalRequired
	cl := fakeClient(controllerActs(&manager), p)
	out, err := runGate(t, approveGate, cl, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.errOut.String(), "nothing waits now") {
		t.Errorf("stderr %q", out.errOut.String())
	}
	if !strings.Contains(out.out.String(), "handled: approved by kubectl-runbook (alice@example.com)") {
		t.Errorf("stdout %q", out.out.String())
	}

	p = policy("seq", byName(autorebootv1alpha1.KindDeployment, "web"))
	cl = fakeClient(controllerActs(&manager), p)
	out, err = runGate(t, approveGate, cl, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.errOut.String(), "spec.approval is not Required") {
		t.Errorf("stderr %q", out.errOut.String())
	}
}

func TestGateDryRunChangesNothing(t *testing.T) {
	var manager string
	cl := fakeClient(controllerActs(&manager), haltedPolicy())
	out, err := runGate(t, resumeGate, cl, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.out.String(), "server dry run") {
		t.Errorf("stdout %q", out.out.String())
	}
	if err := (&gateOptions{waitOptions: waitOptions{wait: true, timeout: time.Minute}, writeOptions: writeOptions{dryRun: "server"}}).validate(); err == nil {
		t.Error("--wait with --dry-run accepted")
	}
}

func TestGateWaitTimesOutWhenNoControllerActs(t *testing.T) {
	cl := fakeClient(nil, haltedPolicy())
	_, err := runGate(t, resumeGate, cl, true, false)
	wantErr(t, err, "the controller did not act on resume")
}

func TestFieldManagerForUser(t *testing.T) {
	for user, want := range map[string]string{
		"":                       "kubectl-runbook",
		"alice":                  "kubectl-runbook (alice)",
		"bob\x00\n":              "kubectl-runbook (bob)",
		strings.Repeat("u", 200): "kubectl-runbook (" + strings.Repeat("u", 124-len("kubectl-runbook (")) + "...)",
	} {
		got := fieldManagerFor(user)
		if got != want || len(got) > 128 {
			t.Errorf("%q: %q, want %q", user, got, want)
		}
	}
}
