package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

var wakeNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) // a Tuesday

func scaler(name, prefix string, created time.Time) *scalingv1alpha1.NSScaler {
	return &scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       scalingv1alpha1.NSScalerSpec{NamespacePrefix: prefix},
	}
}

func namespace(name string, lbls map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func TestChooseScaler(t *testing.T) {
	old := scaler("old", "proj-", wakeNow.Add(-48*time.Hour))
	young := scaler("young", "proj-a", wakeNow.Add(-time.Hour))
	labelled := scaler("labelled", "", wakeNow)
	labelled.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"sleep": "yes"}}
	all := []scalingv1alpha1.NSScaler{*young, *old, *labelled}
	for _, tc := range []struct {
		ns, want, choose, warning, err string
		lbls                           map[string]string
	}{
		{ns: "proj-b", want: "old"},
		{ns: "other", lbls: map[string]string{"sleep": "yes"}, want: "labelled"},
		{ns: "proj-a1", err: "namespace proj-a1 is selected by 2 NSScalers (old, young; old is the oldest and acts on it): choose one with --scaler"},
		{ns: "proj-a1", choose: "old", want: "old"},
		{ns: "proj-a1", choose: "young", want: "young", warning: "NSScaler old selects namespace proj-a1 too and is older"},
		{ns: "proj-b", choose: "young", err: "NSScaler young does not select namespace proj-b (those that do: old)"},
		{ns: "proj-b", choose: "absent", err: "NSScaler absent not found"},
		{ns: "default", err: "no NSScaler selects namespace default: nothing parks it"},
	} {
		got, warning, err := chooseScaler(all, tc.ns, tc.lbls, tc.choose)
		switch {
		case tc.err != "":
			wantErr(t, err, tc.err)
		case err != nil || got != tc.want || !strings.Contains(warning, tc.warning) || (tc.warning == "") != (warning == ""):
			t.Errorf("%s --scaler %q: %q %q %v, want %q warning %q", tc.ns, tc.choose, got, warning, err, tc.want, tc.warning)
		}
	}
}

func TestEndOfSleep(t *testing.T) {
	nightly := &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Berlin", Windows: []weeklyv1alpha1.Window{{Days: "Mon-Fri", From: "12:00", To: "18:00"}}}}
	always := &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{{Days: "Mon-Sun", From: "00:00", To: "24:00"}}}}
	day := &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{{Days: "Mon-Fri", From: "09:00", To: "10:00"}}}}
	for _, tc := range []struct {
		name  string
		sched *scalingv1alpha1.Schedule
		want  time.Time
		err   string
	}{
		// 12:00 UTC is 13:00 in Berlin: inside the window, which ends at 18:00 Berlin time.
		{"asleep in a window", nightly, time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC), ""},
		{"no schedule", nil, time.Time{}, "has no schedule: its namespaces sleep all the time"},
		{"awake now", day, time.Time{}, "schedule is awake now (outside the sleep windows (UTC))"},
		{"never wakes", always, time.Time{}, "schedule never wakes again"},
	} {
		s := scaler("s", "proj-", wakeNow)
		s.Spec.Schedule = tc.sched
		got, _, err := endOfSleep(s, wakeNow)
		if tc.err != "" {
			wantErr(t, err, tc.err)
		} else if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s: %s %v, want %s", tc.name, got, err, tc.want)
		}
	}
}

func getScaler(t *testing.T, cl client.Client, name string) *scalingv1alpha1.NSScaler {
	t.Helper()
	var s scalingv1alpha1.NSScaler
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func wakeList(s *scalingv1alpha1.NSScaler) string {
	var parts []string
	for _, e := range s.Spec.Wake {
		parts = append(parts, e.Namespace+"="+e.Until.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ",")
}

// TestWakeParkUnpark edits spec.wake through the fake apiserver: one entry
// per namespace, expired entries dropped, dry run writes nothing, a
// conflict is retried on a fresh copy, the whitelist is refused.
func TestWakeParkUnpark(t *testing.T) {
	ctx := context.Background()
	s := scaler("night", "proj-", wakeNow.Add(-time.Hour))
	s.Spec.Whitelist = []string{"proj-keep"}
	s.Spec.Wake = []scalingv1alpha1.WakeEntry{
		{Namespace: "proj-old", Until: metav1.NewTime(wakeNow.Add(-time.Minute))},
		{Namespace: "proj-b", Until: metav1.NewTime(wakeNow.Add(time.Hour))},
	}
	s.Spec.Schedule = &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{{Days: "Mon-Sun", From: "08:00", To: "20:00"}}}}
	conflicts := 1
	funcs := &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if conflicts > 0 {
			conflicts--
			return apierrors.NewConflict(schema.GroupResource{Group: "scaling.runbook.dev", Resource: "nsscalers"}, obj.GetName(), nil)
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
	cl := fakeClient(funcs, s)
	o := &wakeOptions{writeOptions: writeOptions{dryRun: "none"}, forD: 2 * time.Hour}

	msg, err := o.patch(ctx, cl, "night", "proj-a", wakeNow, o.wake)
	if err != nil || !strings.Contains(msg, "namespace proj-a runs until 2026-12-01T14:00:00Z (in 2h)") {
		t.Fatalf("wake: %q %v", msg, err)
	}
	if got := wakeList(getScaler(t, cl, "night")); got != "proj-a=2026-12-01T14:00:00Z,proj-b=2026-12-01T13:00:00Z" || conflicts != 0 {
		t.Errorf("after wake (retried after a conflict): %s", got)
	}

	dry := &wakeOptions{writeOptions: writeOptions{dryRun: "server"}, forD: time.Hour}
	if _, err := dry.patch(ctx, cl, "night", "proj-c", wakeNow, dry.wake); err != nil {
		t.Fatal(err)
	}
	if got := wakeList(getScaler(t, cl, "night")); strings.Contains(got, "proj-c") {
		t.Errorf("a dry run wrote %s", got)
	}

	msg, err = o.patch(ctx, cl, "night", "proj-b", wakeNow, o.park)
	if err != nil || !strings.Contains(msg, "wake entry removed") {
		t.Errorf("park: %q %v", msg, err)
	}
	msg, err = o.patch(ctx, cl, "night", "proj-b", wakeNow, o.park)
	if err != nil || !strings.Contains(msg, "has no wake entry in force on NSScaler night: nothing to end") {
		t.Errorf("park again: %q %v", msg, err)
	}

	// Asleep 08:00-20:00 every day: unpark wakes until 20:00, and never
	// shortens the entry of proj-a (14:00 < 20:00: it is extended).
	msg, err = o.patch(ctx, cl, "night", "proj-d", wakeNow, o.unpark)
	if err != nil || !strings.Contains(msg, "runs until 2026-12-01T20:00:00Z (in 8h)") {
		t.Errorf("unpark: %q %v", msg, err)
	}
	long := &wakeOptions{writeOptions: writeOptions{dryRun: "none"}, forD: 30 * time.Hour}
	if _, err := long.patch(ctx, cl, "night", "proj-e", wakeNow, long.wake); err != nil {
		t.Fatal(err)
	}
	msg, err = o.patch(ctx, cl, "night", "proj-e", wakeNow, o.unpark)
	if err != nil || !strings.Contains(msg, "already runs until 2026-12-02T18:00:00Z") {
		t.Errorf("unpark of a longer wake-up: %q %v", msg, err)
	}
	if got := wakeList(getScaler(t, cl, "night")); got != "proj-a=2026-12-01T14:00:00Z,proj-d=2026-12-01T20:00:00Z,proj-e=2026-12-02T18:00:00Z" {
		t.Errorf("final list %s", got)
	}

	for _, edit := range []wakeEdit{o.wake, o.park, o.unpark} {
		_, err := o.patch(ctx, cl, "night", "proj-keep", wakeNow, edit)
		wantErr(t, err, "namespace proj-keep is in spec.whitelist of NSScaler night: it always runs")
	}
}

func TestScalerForNamespace(t *testing.T) {
	ctx := context.Background()
	cl := fakeClient(nil, scaler("night", "proj-", wakeNow), namespace("proj-a", nil))
	if name, _, err := scalerFor(ctx, cl, "proj-a", ""); err != nil || name != "night" {
		t.Errorf("%q %v", name, err)
	}
	_, _, err := scalerFor(ctx, cl, "proj-zzz", "")
	wantErr(t, err, "namespace proj-zzz not found")
}
