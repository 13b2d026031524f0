package main

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func policy(name string, target autorebootv1alpha1.TargetRef) *autorebootv1alpha1.RebootPolicy {
	return &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name)},
		Spec:       autorebootv1alpha1.RebootPolicySpec{Target: target},
	}
}

func byName(kind autorebootv1alpha1.TargetKind, name string) autorebootv1alpha1.TargetRef {
	return autorebootv1alpha1.TargetRef{Kind: kind, Name: name}
}

func bySelector(kind autorebootv1alpha1.TargetKind, k, v string) autorebootv1alpha1.TargetRef {
	return autorebootv1alpha1.TargetRef{Kind: kind, Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{k: autorebootv1alpha1.LabelValue(v)}}}
}

func deployment(name string, lbls map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: lbls}}
}

func TestParseWorkload(t *testing.T) {
	for arg, want := range map[string]autorebootv1alpha1.TargetKind{
		"deployment/web": autorebootv1alpha1.KindDeployment, "deploy/web": autorebootv1alpha1.KindDeployment, "Deployment.apps/web": autorebootv1alpha1.KindDeployment,
		"sts/web": autorebootv1alpha1.KindStatefulSet, "daemonsets/web": autorebootv1alpha1.KindDaemonSet,
		"rollout/web": autorebootv1alpha1.KindRollout, "ro/web": autorebootv1alpha1.KindRollout, "Rollouts.argoproj.io/web": autorebootv1alpha1.KindRollout,
	} {
		if kind, name, err := parseWorkload(arg); err != nil || kind != want || name != "web" {
			t.Errorf("%s: %s %s %v", arg, kind, name, err)
		}
	}
	// A kind of the same name in another group is not Argo Rollouts' (nor
	// is a group that merely starts like it).
	for _, bad := range []string{"pod/web", "deployment/", "deployment/a/b", "cronjob/x", "rollout.example.com/web", "rollouts.argoproj.io.example.com/web", "rollout/"} {
		if _, _, err := parseWorkload(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// policyForCase: KIND/NAME and --policy choose want, or fail with err.
type policyForCase struct{ arg, policy, want, err string }

func checkPolicyFor(t *testing.T, cl client.Client, cases []policyForCase) {
	t.Helper()
	for _, tc := range cases {
		got, err := policyForWorkload(context.Background(), cl, "shop", tc.arg, tc.policy)
		if tc.err != "" {
			wantErr(t, err, tc.err)
		} else if err != nil || got != tc.want {
			t.Errorf("%s --policy %q: %q %v, want %q", tc.arg, tc.policy, got, err, tc.want)
		}
	}
}

func TestPolicyForWorkload(t *testing.T) {
	ctx := context.Background()
	cl := fakeClient(nil,
		deployment("web", map[string]string{"tier": "front"}), deployment("api", nil),
		policy("by-name", byName(autorebootv1alpha1.KindDeployment, "api")),
		policy("front-a", bySelector(autorebootv1alpha1.KindDeployment, "tier", "front")),
		policy("front-b", bySelector(autorebootv1alpha1.KindDeployment, "tier", "front")),
		policy("sts-web", byName(autorebootv1alpha1.KindStatefulSet, "web")),
	)
	checkPolicyFor(t, cl, []policyForCase{
		{arg: "deployment/api", want: "by-name"},
		{arg: "deployment/web", err: "2 RebootPolicies target Deployment shop/web (front-a, front-b): choose one with --policy"},
		{arg: "deployment/web", policy: "front-b", want: "front-b"},
		{arg: "deployment/web", policy: "by-name", err: `RebootPolicy "by-name" does not target Deployment shop/web (those that do: front-a, front-b)`},
		{arg: "deployment/absent", err: "Deployment absent not found (namespace shop"},
		{arg: "statefulset/web", err: "StatefulSet web not found"},
	})
	cl = fakeClient(nil, deployment("lonely", nil))
	_, err := policyForWorkload(ctx, cl, "shop", "deploy/lonely", "")
	wantErr(t, err, "no RebootPolicy in namespace shop targets Deployment shop/lonely")
}

func rollout(name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rolloutGVK)
	u.SetNamespace("shop")
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

func rolloutTarget(t autorebootv1alpha1.TargetRef) autorebootv1alpha1.TargetRef {
	t.APIVersion = autorebootv1alpha1.ArgoRolloutsAPIVersion
	return t
}

// TestPolicyForRollout: rollout/NAME finds the RebootPolicies targeting
// the Argo Rollouts Rollout, by name or by its labels, and never those
// of a Deployment of the same name.
func TestPolicyForRollout(t *testing.T) {
	cl := fakeClient(nil,
		rollout("front", map[string]string{"tier": "front"}), rollout("lonely", nil), deployment("front", map[string]string{"tier": "front"}),
		policy("ro-by-name", rolloutTarget(byName(autorebootv1alpha1.KindRollout, "front"))),
		policy("ro-front", rolloutTarget(bySelector(autorebootv1alpha1.KindRollout, "tier", "front"))),
		policy("deploy-front", bySelector(autorebootv1alpha1.KindDeployment, "tier", "front")),
		policy("deploy-named-front", byName(autorebootv1alpha1.KindDeployment, "front")),
	)
	checkPolicyFor(t, cl, []policyForCase{
		{arg: "rollout/front", err: "2 RebootPolicies target Rollout shop/front (ro-by-name, ro-front): choose one with --policy"},
		{arg: "rollouts.argoproj.io/front", policy: "ro-front", want: "ro-front"},
		{arg: "ro/front", policy: "deploy-front", err: `RebootPolicy "deploy-front" does not target Rollout shop/front (those that do: ro-by-name, ro-front)`},
		{arg: "deployment/front", policy: "ro-by-name", err: `RebootPolicy "ro-by-name" does not target Deployment shop/front`},
		{arg: "rollout/lonely", err: "no RebootPolicy in namespace shop targets Rollout shop/lonely"},
		{arg: "rollout/absent", err: "Rollout absent not found (namespace shop"},
	})
}

// TestRestartRolloutWithoutArgoRollouts: where the Rollout kind is not
// served, the apiserver's answer (no match for the kind) becomes a
// sentence naming Argo Rollouts, and nothing is written.
func TestRestartRolloutWithoutArgoRollouts(t *testing.T) {
	ctx := context.Background()
	notServed := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if obj.GetObjectKind().GroupVersionKind() == rolloutGVK {
			return &meta.NoKindMatchError{GroupKind: rolloutGVK.GroupKind(), SearchedVersions: []string{rolloutGVK.Version}}
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	cl := fakeClient(notServed, policy("p", rolloutTarget(byName(autorebootv1alpha1.KindRollout, "front"))))
	o := &restartOptions{writeOptions: writeOptions{dryRun: "none"}, waitOptions: waitOptions{timeout: time.Minute}}
	var out outputs
	err := o.run(ctx, cl, "shop", "rollout/front", testEnv(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), &out.out, &out.errOut)
	wantErr(t, err, "the cluster does not serve the Rollout kind (rollouts.argoproj.io, argoproj.io/v1alpha1): Argo Rollouts is not installed")
	if got := annotation(t, cl, "p"); got != "" {
		t.Errorf("the policy was fired anyway: annotation %q", got)
	}
}

func annotation(t *testing.T, cl client.Client, name string) string {
	t.Helper()
	var p autorebootv1alpha1.RebootPolicy
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return p.Annotations[autorebootv1alpha1.RestartRequestAnnotation]
}

func TestRestartPatchesTheAnnotation(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	suspended := policy("paused", byName(autorebootv1alpha1.KindDeployment, "web"))
	suspended.Spec.Suspend = true
	cl := fakeClient(nil, policy("p", byName(autorebootv1alpha1.KindDeployment, "web")), suspended, deployment("web", nil))

	var o outputs
	dry := &restartOptions{writeOptions: writeOptions{dryRun: "server"}, waitOptions: waitOptions{timeout: time.Minute}}
	if err := dry.run(ctx, cl, "shop", "p", testEnv(now), &o.out, &o.errOut); err != nil {
		t.Fatal(err)
	}
	if got := annotation(t, cl, "p"); got != "" || !contains(o.out.String(), "server dry run: nothing was changed") {
		t.Errorf("dry run: annotation %q, output %q", got, o.out.String())
	}

	o = outputs{}
	real := &restartOptions{writeOptions: writeOptions{dryRun: "none"}, waitOptions: waitOptions{timeout: time.Minute}}
	if err := real.run(ctx, cl, "shop", "deployment/web", testEnv(now), &o.out, &o.errOut); err == nil {
		t.Error("deployment/web is targeted by p and paused: want the choice error")
	}
	real.policy = "p"
	if err := real.run(ctx, cl, "shop", "deployment/web", testEnv(now), &o.out, &o.errOut); err != nil {
		t.Fatal(err)
	}
	if got := annotation(t, cl, "p"); got != "20261201t120000z-0a1b2c3d" || !contains(o.out.String(), "nonce 20261201t120000z-0a1b2c3d") {
		t.Errorf("annotation %q, output %q", got, o.out.String())
	}
	// A second request while the first is not handled says so.
	o = outputs{}
	real.policy = ""
	if err := real.run(ctx, cl, "shop", "p", testEnv(now), &o.out, &o.errOut); err != nil || !contains(o.errOut.String(), "not handled yet") {
		t.Errorf("second request: %v, stderr %q", err, o.errOut.String())
	}

	for _, tc := range []struct{ arg, policy, err string }{
		{"paused", "", "is suspended (spec.suspend: true)"},
		{"absent", "", "RebootPolicy absent not found (namespace shop"},
		{"p", "q", "--policy chooses among the RebootPolicies of a workload"},
	} {
		o := &restartOptions{writeOptions: writeOptions{dryRun: "none"}, policy: tc.policy, waitOptions: waitOptions{timeout: time.Minute}}
		var out outputs
		wantErr(t, o.run(ctx, cl, "shop", tc.arg, testEnv(now), &out.out, &out.errOut), tc.err)
	}
	for _, o := range []*restartOptions{
		{writeOptions: writeOptions{dryRun: "server"}, waitOptions: waitOptions{wait: true, timeout: time.Minute}},
		{writeOptions: writeOptions{dryRun: "client"}, waitOptions: waitOptions{timeout: time.Minute}},
		{writeOptions: writeOptions{dryRun: "none"}, waitOptions: waitOptions{timeout: 0}},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestRestartWait: --wait returns once the controller has recorded the
// nonce (simulated by the interceptor on the second read), and times out
// with a clear error when nothing handles it.
func TestRestartWait(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reads := 0
	handled := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if p, ok := obj.(*autorebootv1alpha1.RebootPolicy); ok {
			if reads++; reads >= 3 {
				p.Status.LastRestartRequest = p.Annotations[autorebootv1alpha1.RestartRequestAnnotation]
				p.Status.RestartCount = 4
				p.Status.LastRestartTime = &metav1.Time{Time: now}
			}
		}
		return nil
	}}
	cl := fakeClient(handled, policy("p", byName(autorebootv1alpha1.KindDeployment, "web")))
	var o outputs
	w := &restartOptions{writeOptions: writeOptions{dryRun: "none"}, waitOptions: waitOptions{wait: true, timeout: time.Minute}}
	if err := w.run(ctx, cl, "shop", "p", testEnv(now), &o.out, &o.errOut); err != nil {
		t.Fatal(err)
	}
	if !contains(o.out.String(), "handled: RebootPolicy shop/p took request 20261201t120000z-0a1b2c3d; 4 restarts so far") {
		t.Errorf("output %q", o.out.String())
	}

	cl = fakeClient(nil, policy("p", byName(autorebootv1alpha1.KindDeployment, "web")))
	w.timeout = 5 * time.Second
	wantErr(t, w.run(ctx, cl, "shop", "p", testEnv(now), &o.out, &o.errOut), "did not handle restart request 20261201t120000z-0a1b2c3d within 5s")
}

func TestNonce(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a, b := newNonce(now), newNonce(now)
	if a == b || len(a) > autorebootv1alpha1.MaxRestartRequestLength || a[:17] != "20261201t120000z-" {
		t.Errorf("nonces %q %q", a, b)
	}
}
