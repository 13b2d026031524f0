package nsscaler

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

var fakeNow = time.Unix(1000, 0)

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	parked := Plan{Parked: sets.New("a", "c"), Active: sets.New("b"), Foreign: sets.New[string](), Protected: sets.New[string]()}
	empty := Plan{Parked: sets.New[string](), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string]()}
	type want struct {
		done     bool
		ready    string
		parked   string
		degraded string
	}
	tests := []struct {
		name    string
		suspend bool
		obs     observation
		want    want
	}{
		{"all parked, no pods", false, observation{plan: parked, parkedWorkloads: 4},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonAllPodsGone, scalingv1alpha1.ReasonAsExpected}},
		{"pods still terminating", false, observation{plan: parked, parkedWorkloads: 4, podsRemaining: 2},
			want{false, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonPodsRemaining, scalingv1alpha1.ReasonAsExpected}},
		{"a write failed", false, observation{plan: parked, parkedWorkloads: 3, pendingTargets: 1, workloadErrs: []error{errors.New("boom")}},
			want{false, scalingv1alpha1.ReasonReconcileError, scalingv1alpha1.ReasonWorkloadsPending, scalingv1alpha1.ReasonWorkloadErrors}},
		{"suspended with unparked targets", true, observation{plan: parked, pendingTargets: 2},
			want{false, scalingv1alpha1.ReasonSuspended, scalingv1alpha1.ReasonWorkloadsPending, scalingv1alpha1.ReasonAsExpected}},
		{"nothing parked", false, observation{plan: empty},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonNothingParked, scalingv1alpha1.ReasonAsExpected}},
		{"conflict", false, observation{plan: Plan{Parked: sets.New("a"), Active: sets.New[string](), Foreign: sets.New("x"), Protected: sets.New[string](),
			Conflicts: []scalingv1alpha1.NamespaceConflict{{Namespace: "x", Owner: "older"}}}},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonAllPodsGone, scalingv1alpha1.ReasonNamespaceConflict}},
		{"kind unavailable", false, observation{plan: parked, kindErrs: []error{errors.New("no Gadget")}},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonAllPodsGone, scalingv1alpha1.ReasonKindUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 7}, Spec: scalingv1alpha1.NSScalerSpec{Suspend: tt.suspend}}
			st := computeStatus(s, &tt.obs, now)
			if st.ObservedGeneration != 7 || st.Done != tt.want.done {
				t.Fatalf("observedGeneration %d done %v, want 7 and %v", st.ObservedGeneration, st.Done, tt.want.done)
			}
			for typ, reason := range map[string]string{
				scalingv1alpha1.ConditionReady: tt.want.ready, scalingv1alpha1.ConditionParked: tt.want.parked, scalingv1alpha1.ConditionDegraded: tt.want.degraded,
			} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Reason != reason || c.ObservedGeneration != 7 {
					t.Errorf("%s = %+v, want reason %s", typ, c, reason)
				}
			}
			if int(st.ParkedNamespaceCount) != len(st.ParkedNamespaces) || int(st.ActiveNamespaceCount) != len(st.ActiveNamespaces) {
				t.Errorf("counts do not match lists: %+v", st)
			}
		})
	}
}

func TestComputeStatusKeepsTransitionTimeWhenUnchanged(t *testing.T) {
	obs := observation{plan: Plan{Parked: sets.New("a"), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string]()}}
	s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 1}}
	first := computeStatus(s, &obs, metav1.NewTime(time.Unix(1000, 0)))
	s.Status = first
	second := computeStatus(s, &obs, metav1.NewTime(time.Unix(2000, 0)))
	for _, c := range second.Conditions {
		if c.LastTransitionTime.Unix() != 1000 {
			t.Errorf("%s transition time moved to %v without a change", c.Type, c.LastTransitionTime)
		}
	}
}

func TestKindUnhandledBlocksOnlyWhatMayHideParkedObjects(t *testing.T) {
	widget := KindKey{Group: "test.runbook.dev", Kind: "Widget"}
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: widget.Group, Kind: widget.Kind}}
	tests := []struct {
		name             string
		previouslyParked bool
		err              error
		blocks           bool
	}{
		{"never parked, no scale subresource", false, errors.New("no scale subresource"), false},
		{"parked before, CRD gone", true, noMatch, false},
		{"parked before, cannot be read", true, errors.New("forbidden"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &observation{previouslyParked: sets.New[KindKey]()}
			if tt.previouslyParked {
				o.previouslyParked.Insert(widget)
			}
			o.kindUnhandled(widget, tt.err)
			if len(o.kindErrs) != 1 || (o.unrestorable == 1) != tt.blocks || (len(o.carried) == 1) != tt.blocks {
				t.Fatalf("observation %+v, want blocks=%v", o, tt.blocks)
			}
		})
	}
}
