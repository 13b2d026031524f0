package rebootpolicy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func managed(manager string, at time.Time, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at},
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

func TestAnnotationSetterReadsTheFieldManagerOfThatAnnotation(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	approve := `{"f:metadata":{"f:annotations":{"f:` + autorebootv1alpha1.ApproveAnnotation + `":{}}}}`
	// A value that merely mentions the key (a label value, a spec field)
	// does not count.
	lookalike := `{"f:metadata":{"f:labels":{"f:` + autorebootv1alpha1.ApproveAnnotation + `":{}}}}`
	resume := `{"f:metadata":{"f:annotations":{"f:` + autorebootv1alpha1.ResumeAnnotation + `":{}}}}`
	rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		managed("kubectl-runbook (alice)", t0, approve),
		managed("kubectl-runbook (bob)", t0.Add(time.Minute), approve),
		managed("mallory", t0.Add(time.Hour), lookalike),
		managed("kubectl-runbook (carol)", t0.Add(time.Hour), resume),
	}}}
	if got := annotationSetter(rbp, autorebootv1alpha1.ApproveAnnotation); got != "kubectl-runbook (bob)" {
		t.Errorf("approver %q, want the latest owner of the annotation", got)
	}
	if got := annotationSetter(rbp, autorebootv1alpha1.ResumeAnnotation); got != "kubectl-runbook (carol)" {
		t.Errorf("resumer %q", got)
	}
	if got := annotationSetter(&autorebootv1alpha1.RebootPolicy{}, autorebootv1alpha1.ResumeAnnotation); got != "unknown" {
		t.Errorf("no managedFields: %q", got)
	}
}

func TestGateAnnotationsChangedPassesOnlyTheirChanges(t *testing.T) {
	obj := func(ann map[string]string) *autorebootv1alpha1.RebootPolicy {
		return &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
	}
	p := gateAnnotationsChanged()
	for _, tc := range []struct {
		old, cur map[string]string
		want     bool
	}{
		{nil, map[string]string{autorebootv1alpha1.ResumeAnnotation: "n1"}, true},
		{map[string]string{autorebootv1alpha1.ApproveAnnotation: "a"}, map[string]string{autorebootv1alpha1.ApproveAnnotation: "b"}, true},
		{map[string]string{autorebootv1alpha1.ApproveAnnotation: "a"}, map[string]string{autorebootv1alpha1.ApproveAnnotation: "a", "x": "y"}, false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: obj(tc.old), ObjectNew: obj(tc.cur)}); got != tc.want {
			t.Errorf("%v -> %v: %v, want %v", tc.old, tc.cur, got, tc.want)
		}
	}
}

func TestProgressDeadlineOnlyForSequences(t *testing.T) {
	one := int32(1)
	for _, tc := range []struct {
		ro   *autorebootv1alpha1.RolloutSpec
		want time.Duration
	}{
		{nil, 0},
		{&autorebootv1alpha1.RolloutSpec{}, 0},
		{&autorebootv1alpha1.RolloutSpec{MaxConcurrent: &one}, defaultProgressDeadline},
		{&autorebootv1alpha1.RolloutSpec{MaxConcurrent: &one, ProgressDeadline: &metav1.Duration{Duration: time.Minute}}, time.Minute},
	} {
		rbp := &autorebootv1alpha1.RebootPolicy{Spec: autorebootv1alpha1.RebootPolicySpec{Rollout: tc.ro}}
		if got := progressDeadline(rbp); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.ro, got, tc.want)
		}
	}
}
