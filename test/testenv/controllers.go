package testenv

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envtest runs an apiserver and no controllers: a test plays the ones its
// product waits for, and reads the events the product wrote.

// MarkRolledOut writes the status the workload's controller writes once a
// rollout is complete: every replica updated, ready and available, at the
// workload's generation. obj is a Deployment, StatefulSet or DaemonSet; it
// is read again first, so it need not be current.
func MarkRolledOut(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		n := *o.Spec.Replicas
		o.Status = appsv1.DeploymentStatus{ObservedGeneration: o.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	case *appsv1.StatefulSet:
		n := *o.Spec.Replicas
		o.Status = appsv1.StatefulSetStatus{ObservedGeneration: o.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n, CurrentRevision: "r1", UpdateRevision: "r1"}
	case *appsv1.DaemonSet:
		o.Status = appsv1.DaemonSetStatus{ObservedGeneration: o.Generation, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2, NumberReady: 2}
	default:
		t.Fatalf("MarkRolledOut: %T is not a Deployment, StatefulSet or DaemonSet", obj)
	}
	if err := c.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// EventReasons lists the reasons of the events.k8s.io events in ns about
// the object name (none when they cannot be listed: a caller waits for
// them).
func EventReasons(c client.Client, ns, name string) []string {
	var out []string
	for _, e := range eventsAbout(c, ns, name) {
		out = append(out, e.Reason)
	}
	return out
}

// EventNotes lists the notes of those events with the reason.
func EventNotes(c client.Client, ns, name, reason string) []string {
	var out []string
	for _, e := range eventsAbout(c, ns, name) {
		if e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

func eventsAbout(c client.Client, ns, name string) []eventsv1.Event {
	var l eventsv1.EventList
	if err := c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []eventsv1.Event
	for _, e := range l.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}
