package nsscaler

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestDecideParkedReplicas: park to N. A workload above N is parked to N
// with its count recorded; one at or below N is left as it is (nothing
// recorded, so nothing to restore); a change of N while parked re-parks to
// the new N, or restores a workload whose record is N or fewer.
func TestDecideParkedReplicas(t *testing.T) {
	kinds := sets.New(kindDeployment, kindCronJob, KindKey{Group: "test.runbook.dev", Kind: "Widget"})
	mine := func(replicas int32) string { return ReplicasOriginal(replicas, "me").Encode() }
	deploy := func(replicas int32, ann string) Workload {
		return Workload{Kind: kindDeployment, Namespace: "parked", Name: "d", Replicas: replicas, Annotation: ann, HasAnnotation: ann != ""}
	}
	scaledObject := func(target int32, paused *string, ann string) Workload {
		return Workload{Kind: kindScaledObject, Namespace: "parked", Name: "so", Target: kindDeployment, TargetName: "d",
			Replicas: target, PausedReplicas: paused, Annotation: ann, HasAnnotation: ann != ""}
	}
	tests := []struct {
		name      string
		n         int32
		w         Workload
		action    Action
		record    *int32 // replicas recorded with the park
		parkAt    int32
		keep      int32
		target    bool
		atOrBelow bool
	}{
		{name: "5 with N=2: parked to 2, 5 recorded", n: 2, w: deploy(5, ""), action: ActionPark, record: pointer(int32(5)), parkAt: 2, keep: 2, target: true},
		{name: "2 with N=2: left as it is", n: 2, w: deploy(2, ""), keep: 2, atOrBelow: true},
		{name: "1 with N=2: left as it is", n: 2, w: deploy(1, ""), keep: 1, atOrBelow: true},
		{name: "0 with N=0: left as it is", n: 0, w: deploy(0, ""), atOrBelow: true},
		{name: "parked at 2 with N=2: settled", n: 2, w: deploy(2, mine(5)), parkAt: 2, keep: 2, target: true},
		{name: "N lowered 2→0: re-parked to 0, record kept", n: 0, w: deploy(2, mine(5)), action: ActionPark, parkAt: 0, target: true},
		{name: "N raised 0→3: re-parked to 3, record kept", n: 3, w: deploy(0, mine(5)), action: ActionPark, parkAt: 3, keep: 3, target: true},
		{name: "N raised to the record: restored, then left as it is", n: 5, w: deploy(0, mine(5)), action: ActionRestore, keep: 5, atOrBelow: true},
		{name: "N raised above the record: restored", n: 7, w: deploy(3, mine(5)), action: ActionRestore, keep: 5, atOrBelow: true},
		{name: "scaled up by hand above N: re-parked to N", n: 2, w: deploy(4, mine(5)), action: ActionPark, parkAt: 2, keep: 2, target: true},
		{name: "scaled down by hand below N: re-parked to N", n: 2, w: deploy(1, mine(5)), action: ActionPark, parkAt: 2, keep: 2, target: true},
		{name: "custom kind above N: parked to N", n: 2, w: Workload{Kind: KindKey{Group: "test.runbook.dev", Kind: "Widget"}, Namespace: "parked", Replicas: 3},
			action: ActionPark, record: pointer(int32(3)), parkAt: 2, keep: 2, target: true},
		{name: "CronJob is suspended whatever N says", n: 2, w: Workload{Kind: kindCronJob, Namespace: "parked"}, action: ActionPark, target: true},
		{name: "ScaledObject whose target runs 5, N=2: paused at 2", n: 2, w: scaledObject(5, nil, ""), action: ActionPark, parkAt: 2, keep: 2, target: true},
		{name: "ScaledObject whose target runs 1, N=2: paused at 1, not scaled up", n: 2, w: scaledObject(1, nil, ""), action: ActionPark, parkAt: 1, keep: 1, target: true},
		{name: "ScaledObject whose target runs 0 (KEDA idle), N=0: paused at 0", n: 0, w: scaledObject(0, nil, ""), action: ActionPark, parkAt: 0, target: true},
		{name: "ScaledObject paused at 2, N lowered to 0: paused at 0", n: 0, w: scaledObject(2, pointer("2"), PauseOriginal(nil, "me").Encode()),
			action: ActionPark, parkAt: 0, target: true},
		{name: "ScaledObject paused at 1, N=2: settled", n: 2, w: scaledObject(1, pointer("1"), PauseOriginal(nil, "me").Encode()), parkAt: 1, keep: 1, target: true},
		{name: "ScaledObject un-paused by someone: paused again", n: 2, w: scaledObject(4, nil, PauseOriginal(nil, "me").Encode()),
			action: ActionPark, parkAt: 2, keep: 2, target: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Plan{Parked: sets.New("parked"), Active: sets.New[string](), Foreign: sets.New[string](), ParkedReplicas: tt.n}
			d, err := Decide(tt.w, plan, kinds, "me")
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tt.action || d.Target != tt.target || d.AtOrBelow != tt.atOrBelow || d.Keep != tt.keep {
				t.Fatalf("decision %+v, want action %v target %v atOrBelow %v keep %d", d, tt.action, tt.target, tt.atOrBelow, tt.keep)
			}
			if tt.action == ActionPark && d.ParkAt != tt.parkAt {
				t.Fatalf("parks at %d, want %d", d.ParkAt, tt.parkAt)
			}
			switch {
			case tt.record != nil && (d.Record == nil || d.Record.Replicas == nil || *d.Record.Replicas != *tt.record):
				t.Fatalf("record %+v, want replicas %d", d.Record, *tt.record)
			case tt.record == nil && d.Record != nil && (tt.w.HasAnnotation || tt.action != ActionPark):
				t.Fatalf("records %s", d.Record.Encode())
			}
		})
	}
}

// TestParkedStateUnderN: what counts as parked, and as un-parked by
// someone (a scale-up the fight tracker counts), under N.
func TestParkedStateUnderN(t *testing.T) {
	d := func(r int32) Workload { return Workload{Kind: kindDeployment, Replicas: r} }
	so := func(p *string) Workload { return Workload{Kind: kindScaledObject, PausedReplicas: p} }
	tests := []struct {
		name             string
		w                Workload
		n                int32
		parked, unparked bool
	}{
		{"deployment at N", d(2), 2, true, false},
		{"deployment below N (N raised)", d(0), 2, false, false},
		{"deployment above N", d(3), 2, false, true},
		{"ScaledObject paused below N", so(pointer("1")), 2, true, false},
		{"ScaledObject paused above N", so(pointer("3")), 2, false, true},
		{"ScaledObject not paused", so(nil), 2, false, true},
		{"ScaledObject paused at no count", so(pointer("x")), 2, false, true},
		{"ScaledObject paused at a negative count", so(pointer("-1")), 2, false, true},
		{"CronJob suspended", Workload{Kind: kindCronJob, Suspend: true}, 2, true, false},
		{"CronJob resumed", Workload{Kind: kindCronJob}, 2, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.isParked(tt.n); got != tt.parked {
				t.Errorf("isParked(%d) = %v", tt.n, got)
			}
			if got := tt.w.unparked(tt.n); got != tt.unparked {
				t.Errorf("unparked(%d) = %v", tt.n, got)
			}
		})
	}
}

// TestGraceEnd: a workload younger than the grace period waits until it
// is old enough; a creationTimestamp ahead of the clock is believed up to
// the grace period ahead, no further (bounded: at most twice the grace
// period from now).
func TestGraceEnd(t *testing.T) {
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	grace := 10 * time.Minute
	tests := []struct {
		name    string
		created time.Time
		grace   time.Duration
		want    time.Time
	}{
		{"created a minute ago", now.Add(-time.Minute), grace, now.Add(9 * time.Minute)},
		{"created just now", now, grace, now.Add(grace)},
		{"exactly as old as the grace period: parked", now.Add(-grace), grace, time.Time{}},
		{"older", now.Add(-time.Hour), grace, time.Time{}},
		{"no grace period", now, 0, time.Time{}},
		{"unknown creation", time.Time{}, grace, time.Time{}},
		{"clock skew: a minute ahead", now.Add(time.Minute), grace, now.Add(11 * time.Minute)},
		{"ahead by the grace period: the longest wait", now.Add(grace), grace, now.Add(2 * grace)},
		{"further ahead: not believed, parked", now.Add(grace + time.Second), grace, time.Time{}},
		{"year 9999: not believed, parked", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), grace, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := graceEnd(tt.created, tt.grace, now); !got.Equal(tt.want) {
				t.Fatalf("graceEnd = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGraceInThePass: the pass marks, counts and schedules the workloads in
// their grace period, and only those that would be parked otherwise.
func TestGraceInThePass(t *testing.T) {
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	obs := &observation{now: now}
	p := &workloadPass{
		plan:  Plan{Parked: sets.New("a", "b"), Active: sets.New("c"), Foreign: sets.New[string](), ParkedReplicas: 1},
		kinds: sets.New(kindDeployment), now: now, obs: obs, grace: 10 * time.Minute,
	}
	young := func(ns string, age time.Duration, replicas int32) Workload {
		return Workload{Kind: kindDeployment, Namespace: ns, Replicas: replicas, Created: now.Add(-age)}
	}
	cases := []struct {
		w       Workload
		inGrace bool
	}{
		{young("a", time.Minute, 3), true},
		{young("a", 5*time.Minute, 3), true},
		{young("b", 2*time.Minute, 3), true},
		{young("a", time.Hour, 3), false},
		{young("c", time.Minute, 3), false}, // active namespace
		{young("a", time.Minute, 1), false}, // at parkedReplicas: never parked anyway
		{func() Workload {
			w := young("a", time.Minute, 3)
			w.HasAnnotation, w.Annotation = true, ReplicasOriginal(3, "me").Encode()
			return w
		}(), false},
		{func() Workload { w := young("a", time.Minute, 3); w.Excluded = true; return w }(), false},
		{func() Workload { w := young("a", time.Minute, 3); w.Controlled = true; return w }(), false},
		{Workload{Kind: kindCronJob, Namespace: "a", Created: now}, false}, // kind not parked
	}
	for i, c := range cases {
		w := c.w
		p.applyGrace(&w)
		if w.InGrace != c.inGrace {
			t.Errorf("case %d: InGrace = %v, want %v", i, w.InGrace, c.inGrace)
		}
		if d, _ := Decide(w, p.plan, p.kinds, "me"); w.InGrace && d.Action != ActionNone {
			t.Errorf("case %d: a workload in its grace period is decided %v", i, d.Action)
		}
	}
	if obs.workloadsInGrace != 3 || obs.grace["a"].workloads != 2 || obs.grace["b"].workloads != 1 {
		t.Fatalf("counted %d in grace: a %+v b %+v", obs.workloadsInGrace, obs.grace["a"], obs.grace["b"])
	}
	if want := now.Add(9 * time.Minute); !obs.grace["a"].until.Equal(want) {
		t.Errorf("namespace a is in grace until %v, want %v (the last of its workloads)", obs.grace["a"].until, want)
	}
	if want := now.Add(5 * time.Minute); !obs.wakeup.Equal(want) {
		t.Errorf("reconcile arranged at %v, want %v (the first end)", obs.wakeup, want)
	}
	list := graceList(obs.grace)
	if len(list) != 2 || list[0].Namespace != "a" || list[0].Workloads != 2 || list[1].Namespace != "b" {
		t.Fatalf("status.inGrace = %+v", list)
	}
}

// TestGraceListIsBounded: status.inGrace names at most 10 namespaces.
func TestGraceListIsBounded(t *testing.T) {
	obs := &observation{now: time.Now()}
	for i := range 50 {
		obs.inGrace(string(rune('a'+i%26))+string(rune('a'+i/26)), obs.now.Add(time.Minute))
	}
	if got := graceList(obs.grace); len(got) != maxGraceListed || obs.workloadsInGrace != 50 {
		t.Fatalf("listed %d namespaces, counted %d", len(got), obs.workloadsInGrace)
	}
}

// failingRestore is a fakeHandler whose restores fail with errs first.
type failingRestore struct {
	*fakeHandler
	errs []error
}

func (f *failingRestore) restore(ctx context.Context, w Workload, orig Original) (Workload, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		f.restores = append(f.restores, orig)
		return Workload{}, err
	}
	return f.fakeHandler.restore(ctx, w, orig)
}

var errChanged = apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("changed"))

// TestConflictKeepsWhatThePassKnew: a workload re-read after a conflict
// keeps what the pass had found out about it (here: excluded, so it is
// restored, not parked again), and its grace is judged again (a workload
// re-created under the same name is young: not parked).
func TestConflictKeepsWhatThePassKnew(t *testing.T) {
	r := testReconciler(t)
	p := testPass()
	annotated := Workload{Kind: kindDeployment, Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "1", Replicas: 0,
		Annotation: ReplicasOriginal(3, "me").Encode(), HasAnnotation: true, Excluded: true}
	fresh := annotated
	fresh.ResourceVersion, fresh.Excluded = "2", false
	h := &failingRestore{fakeHandler: &fakeHandler{fresh: fresh}, errs: []error{errChanged}}
	d, err := Decide(annotated, p.plan, p.kinds, p.self)
	if err != nil || d.Action != ActionRestore {
		t.Fatalf("decision %+v, %v", d, err)
	}
	if o := r.writeWorkload(context.Background(), p, job{h: h, w: annotated, d: d}); o.err != nil || o.done != ActionRestore {
		t.Fatalf("outcome %+v: an excluded workload was not restored after a conflict (parks %v)", o, h.parks)
	}
	if len(h.parks) != 0 || len(h.restores) != 2 {
		t.Fatalf("parks %v, restores %v", h.parks, h.restores)
	}

	p.grace = 10 * time.Minute
	old := Workload{Kind: kindDeployment, Namespace: "ns", Name: "job", UID: "old", ResourceVersion: "1", Replicas: 3, Created: fakeNow.Add(-time.Hour)}
	recreated := Workload{Kind: kindDeployment, Namespace: "ns", Name: "job", UID: "new", ResourceVersion: "5", Replicas: 3, Created: fakeNow.Add(-time.Minute)}
	ph := &fakeHandler{parkErrs: []error{errChanged}, fresh: recreated}
	d, _ = Decide(old, p.plan, p.kinds, p.self)
	if o := r.writeWorkload(context.Background(), p, job{h: ph, w: old, d: d}); o.err != nil || o.done != ActionNone {
		t.Fatalf("outcome %+v: a re-created young workload was parked", o)
	}
	if len(ph.parks) != 1 {
		t.Fatalf("parks %v: want only the first, refused one", ph.parks)
	}
}
