package nsscaler

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

func pointer[T any](v T) *T { return &v }

func TestDecide(t *testing.T) {
	plan := Plan{
		Parked:  sets.New("parked"),
		Active:  sets.New("active"),
		Foreign: sets.New("foreign"),
	}
	defaults := sets.New(kindDeployment, kindStatefulSet)
	withCron := sets.New(kindDeployment, kindStatefulSet, kindCronJob)
	mine := func(replicas int32) string { return ReplicasOriginal(replicas, "me").Encode() }
	deploy := func(ns string, replicas int32, ann string) Workload {
		return Workload{Kind: kindDeployment, Namespace: ns, Name: "d", Replicas: replicas, Annotation: ann, HasAnnotation: ann != ""}
	}
	tests := []struct {
		name      string
		w         Workload
		kinds     sets.Set[KindKey]
		action    Action
		record    *int32 // replicas recorded with the park
		restoreTo *int32
		suspendTo *bool
		target    bool
		wantErr   bool
	}{
		{name: "running target is parked and its count recorded", w: deploy("parked", 3, ""), kinds: defaults,
			action: ActionPark, record: pointer(int32(3)), target: true},
		{name: "target at zero is left as it is: nothing written, nothing recorded", w: deploy("parked", 0, ""), kinds: defaults},
		{name: "parked target is left alone", w: deploy("parked", 0, mine(3)), kinds: defaults, action: ActionNone, target: true},
		{name: "manual scale-up is re-parked and the original kept", w: deploy("parked", 5, mine(3)), kinds: defaults,
			action: ActionPark, target: true},
		{name: "whitelisted namespace is restored to the recorded count", w: deploy("active", 0, mine(3)), kinds: defaults,
			action: ActionRestore, restoreTo: pointer(int32(3))},
		{name: "restore to the recorded count even after a manual change", w: deploy("active", 7, mine(3)), kinds: defaults,
			action: ActionRestore, restoreTo: pointer(int32(3))},
		{name: "restore of a recorded zero", w: deploy("active", 0, mine(0)), kinds: defaults,
			action: ActionRestore, restoreTo: pointer(int32(0))},
		{name: "unannotated workload in an active namespace is left alone", w: deploy("active", 2, ""), kinds: defaults},
		{name: "kind removed from the spec is restored", w: Workload{Kind: kindCronJob, Namespace: "parked", Suspend: true,
			Annotation: SuspendOriginal(false, "me").Encode(), HasAnnotation: true}, kinds: defaults,
			action: ActionRestore, suspendTo: pointer(false)},
		{name: "cronjob is suspended and its flag recorded", w: Workload{Kind: kindCronJob, Namespace: "parked"}, kinds: withCron,
			action: ActionPark, target: true},
		{name: "cronjob not in kinds is left alone", w: Workload{Kind: kindCronJob, Namespace: "parked"}, kinds: defaults},
		{name: "controlled workload is not a target", w: Workload{Kind: kindDeployment, Namespace: "parked", Replicas: 2, Controlled: true},
			kinds: defaults},
		{name: "workload that became controlled is restored", w: Workload{Kind: kindDeployment, Namespace: "parked", Controlled: true,
			Annotation: mine(2), HasAnnotation: true}, kinds: defaults, action: ActionRestore, restoreTo: pointer(int32(2))},
		{name: "namespace that stopped matching: mine is restored", w: deploy("elsewhere", 0, mine(4)), kinds: defaults,
			action: ActionRestore, restoreTo: pointer(int32(4))},
		{name: "namespace that stopped matching: another's is left alone", w: deploy("elsewhere", 0, ReplicasOriginal(4, "other").Encode()),
			kinds: defaults},
		{name: "foreign namespace: even mine is left to the owner", w: deploy("foreign", 0, mine(4)), kinds: defaults},
		{name: "owned namespace adopts another's annotation", w: deploy("active", 0, ReplicasOriginal(6, "gone").Encode()), kinds: defaults,
			action: ActionRestore, restoreTo: pointer(int32(6))},
		{name: "owned parked namespace keeps another's original", w: deploy("parked", 2, ReplicasOriginal(6, "gone").Encode()), kinds: defaults,
			action: ActionPark, target: true},
		{name: "annotation of an unknown version is an error", w: deploy("parked", 2, `{"v":9,"replicas":1,"by":"me"}`), kinds: defaults, wantErr: true},
		{name: "suspend annotation on a deployment is an error", w: deploy("active", 0, SuspendOriginal(true, "me").Encode()), kinds: defaults, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decide(tt.w, plan, tt.kinds, "me")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Decide accepted, decision %+v", d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tt.action || d.Target != tt.target {
				t.Fatalf("action %v target %v, want %v target %v", d.Action, d.Target, tt.action, tt.target)
			}
			if tt.record != nil {
				if d.Record == nil || d.Record.Replicas == nil || *d.Record.Replicas != *tt.record || d.Record.By != "me" {
					t.Fatalf("record = %+v, want replicas %d by me", d.Record, *tt.record)
				}
			} else if d.Action == ActionPark && tt.w.HasAnnotation && d.Record != nil {
				t.Fatalf("a recorded original would be overwritten with %s", d.Record.Encode())
			}
			if tt.restoreTo != nil && (d.Original.Replicas == nil || *d.Original.Replicas != *tt.restoreTo) {
				t.Fatalf("restore to %+v, want %d", d.Original, *tt.restoreTo)
			}
			if tt.suspendTo != nil && (d.Original.Suspend == nil || *d.Original.Suspend != *tt.suspendTo) {
				t.Fatalf("restore to %+v, want suspend %v", d.Original, *tt.suspendTo)
			}
		})
	}
}

func TestWriteTrackerPrefersNewerWrites(t *testing.T) {
	tr := newWriteTracker(nil)
	tr.record(Workload{Kind: kindDeployment, UID: "u", ResourceVersion: "10", Replicas: 0, HasAnnotation: true})
	stale := Workload{Kind: kindDeployment, UID: "u", ResourceVersion: "9", Replicas: 3}
	if got, known := tr.freshest(stale); got.ResourceVersion != "10" || !got.HasAnnotation || !known {
		t.Fatalf("stale cache copy won: %+v", got)
	}
	caught := Workload{Kind: kindDeployment, UID: "u", ResourceVersion: "11", Replicas: 5}
	if got, known := tr.freshest(caught); got.ResourceVersion != "11" || !known {
		t.Fatalf("newer cache copy lost: %+v", got)
	}
	if got, known := tr.freshest(stale); got.ResourceVersion != "9" || known {
		t.Fatalf("entry not forgotten once the cache caught up: %+v", got)
	}
	tr.record(Workload{Kind: kindDeployment, UID: "gone", ResourceVersion: "5"})
	tr.forget(tr.tracked(kindDeployment))
	if len(tr.written) != 0 {
		t.Fatalf("entries of deleted objects kept: %v", tr.written)
	}
}
