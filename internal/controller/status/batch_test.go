package status

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Nothing is recorded before Flush; Flush records in order, once.
func TestBatchRecordsOnFlushOnly(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	b := Events{Recorder: rec}.Batch()
	b.Normal(obj, nil, "Created", "Create", "created %s", "Service")
	b.Warning(obj, nil, "Degraded", "Reconcile", "secret %q not usable", "db")
	if got := drain(rec); len(got) != 0 {
		t.Fatalf("recorded before Flush: %q", got)
	}
	b.Flush()
	b.Flush()
	want := []string{"Normal Created created Service", `Warning Degraded secret "db" not usable`}
	if got := drain(rec); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("recorded %q, want %q", got, want)
	}
}

// A reconcile acting on hundreds of objects records MaxEventsPerReason of
// a reason and one more that counts the rest; other reasons are not held
// back by it.
func TestBatchBoundsEachReason(t *testing.T) {
	rec := events.NewFakeRecorder(1000)
	b := Events{Recorder: rec}.Batch()
	for i := range 500 {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d", i)}}
		b.Normal(obj, nil, "Restarted", "Restart", "restarted t%d", i)
	}
	b.Warning(&corev1.ConfigMap{}, nil, "RestartFailed", "Restart", "t500 failed")
	b.Flush()
	got := drain(rec)
	if len(got) != MaxEventsPerReason+2 {
		t.Fatalf("%d events, want %d: %q", len(got), MaxEventsPerReason+2, got)
	}
	if got[MaxEventsPerReason] != "Warning RestartFailed t500 failed" {
		t.Errorf("the other reason is %q", got[MaxEventsPerReason])
	}
	want := fmt.Sprintf("Normal Restarted restarted t%d (and %d more Restarted events of this reconcile, left out)",
		MaxEventsPerReason, 500-MaxEventsPerReason-1)
	if last := got[len(got)-1]; last != want {
		t.Errorf("summary %q, want %q", last, want)
	}
}

// Exactly one over the bound is recorded as it is: a count of zero says
// nothing.
func TestBatchOneOverTheBoundIsRecordedAsIs(t *testing.T) {
	rec := events.NewFakeRecorder(100)
	b := Events{Recorder: rec}.Batch()
	for i := range MaxEventsPerReason + 1 {
		b.Normal(&corev1.ConfigMap{}, nil, "Scaled", "Scale", "n%d", i)
	}
	b.Flush()
	got := drain(rec)
	if len(got) != MaxEventsPerReason+1 || got[MaxEventsPerReason] != fmt.Sprintf("Normal Scaled n%d", MaxEventsPerReason) {
		t.Fatalf("%q", got)
	}
}

// A hostile note (a tenant's name with a format verb, or megabytes) stays
// literal and within the apiserver's limit.
func TestBatchNotesAreLiteralAndBounded(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	b := Events{Recorder: rec}.Batch()
	b.Warning(&corev1.ConfigMap{}, nil, "Bad", "Reconcile", "name %s", "%d%s%n")
	b.Warning(&corev1.ConfigMap{}, nil, "Huge", "Reconcile", "%s", strings.Repeat("x", 1<<20))
	b.Flush()
	got := drain(rec)
	if got[0] != "Warning Bad name %d%s%n" {
		t.Errorf("format verbs of a tenant's string were read: %q", got[0])
	}
	if note := strings.TrimPrefix(got[1], "Warning Huge "); len(note) > maxNote {
		t.Errorf("note of %d bytes", len(note))
	}
}
