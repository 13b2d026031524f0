package rebootpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

func tcpPolicy(name string, period int32) autorebootv1alpha1.Policy {
	return autorebootv1alpha1.Policy{Name: name, Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{PeriodSeconds: period,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "db.example", Port: intstr.FromInt(5432)}}}}}
}

func TestSpecRefusal(t *testing.T) {
	l := Limits{MinPeriod: 5 * time.Second}
	cases := []struct {
		name   string
		policy autorebootv1alpha1.Policy
		reason string
	}{
		{"at the minimum runs", tcpPolicy("a", 5), ""},
		{"below the minimum is refused", tcpPolicy("a", 1), autorebootv1alpha1.ReasonPeriodBelowMinimum},
		{"default probe period (10s) runs", tcpPolicy("a", 0), ""},
		{"sql below the minimum", autorebootv1alpha1.Policy{Name: "q", Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{PeriodSeconds: 2}}},
			autorebootv1alpha1.ReasonPeriodBelowMinimum},
		{"watch below the minimum", autorebootv1alpha1.Policy{Name: "w", Trigger: autorebootv1alpha1.Trigger{Watch: &autorebootv1alpha1.WatchTrigger{PeriodSeconds: 1}}},
			autorebootv1alpha1.ReasonPeriodBelowMinimum},
		{"invalid host comes first", func() autorebootv1alpha1.Policy {
			p := tcpPolicy("a", 1)
			p.Trigger.Probe.TCPSocket.Host = "db:5432"
			return p
		}(), autorebootv1alpha1.ReasonInvalidSpec},
	}
	for _, tc := range cases {
		rf := l.specRefusal(tc.policy)
		got := ""
		if rf != nil {
			got = rf.reason
		}
		if got != tc.reason {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.reason)
		}
	}
	if rf := (Limits{}).specRefusal(tcpPolicy("a", 1)); rf != nil {
		t.Fatalf("no minimum set, still refused: %+v", rf)
	}
}

func TestNamespaceShareGoesToTheOldestPolicies(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rbp := func(name string, created time.Duration, suspend bool, policies ...autorebootv1alpha1.Policy) *autorebootv1alpha1.RebootPolicy {
		return &autorebootv1alpha1.RebootPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(t0.Add(created))},
			Spec:       autorebootv1alpha1.RebootPolicySpec{Policies: policies, Suspend: suspend},
		}
	}
	oldest := rbp("oldest", 0, false, tcpPolicy("a", 10), tcpPolicy("b", 10))
	suspended := rbp("suspended", time.Second, true, tcpPolicy("a", 10), tcpPolicy("b", 10))
	middle := rbp("middle", 2*time.Second, false, tcpPolicy("a", 10), tcpPolicy("too-fast", 1))
	newest := rbp("newest", 3*time.Second, false, tcpPolicy("a", 10), tcpPolicy("b", 10))
	elsewhere := rbp("elsewhere", -time.Hour, false, tcpPolicy("a", 10), tcpPolicy("b", 10), tcpPolicy("c", 10))
	elsewhere.Namespace = "other"
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithStatusSubresource(&autorebootv1alpha1.RebootPolicy{}).WithObjects(oldest, suspended, middle, newest, elsewhere).Build()
	r := &Reconciler{Client: c, Limits: Limits{MinPeriod: 5 * time.Second, MaxPerNamespace: 4}}
	want := map[string][]string{"oldest": {"a", "b"}, "middle": {"a"}, "newest": {"a"}}
	for _, obj := range []*autorebootv1alpha1.RebootPolicy{oldest, middle, newest} {
		got, err := r.admitted(context.Background(), obj)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range obj.Spec.Policies {
			if got[p.Name] {
				names = append(names, p.Name)
			}
		}
		if strings.Join(names, ",") != strings.Join(want[obj.Name], ",") {
			t.Errorf("%s: admitted %v, want %v (suspended and refused policies hold no slot, other namespaces don't count)", obj.Name, names, want[obj.Name])
		}
	}
	rf := r.refusal(newest.Spec.Policies[1], false)
	if rf == nil || rf.reason != autorebootv1alpha1.ReasonTooManyProbes || !strings.Contains(rf.message, "4") {
		t.Fatalf("refusal beyond the share: %+v", rf)
	}
	newest.Status.Policies = []autorebootv1alpha1.PolicyStatus{{Name: "b", Reason: autorebootv1alpha1.ReasonTooManyProbes}}
	if err := c.Status().Update(context.Background(), newest); err != nil {
		t.Fatal(err)
	}
	reqs := r.policiesWaitingForSlots(context.Background(), oldest)
	if len(reqs) != 1 || reqs[0].Name != "newest" {
		t.Fatalf("a change of oldest wakes %v, want newest", reqs)
	}
}

// TestAdmissionOnAPartialCacheIsRevisited: a newer RebootPolicy admitted
// while the cache had not yet seen an older one gives its slot back as
// soon as a reconcile sees the older one, before that one starts: the
// namespace never runs more than its limit.
func TestAdmissionOnAPartialCacheIsRevisited(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rbp := func(name string) *autorebootv1alpha1.RebootPolicy {
		return &autorebootv1alpha1.RebootPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID(name), CreationTimestamp: t0},
			Spec:       autorebootv1alpha1.RebootPolicySpec{Policies: []autorebootv1alpha1.Policy{tcpPolicy("p", 10)}},
		}
	}
	b, c := rbp("b"), rbp("c")
	cl := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(b, c).Build()
	r := &Reconciler{Client: cl, Limits: Limits{MaxPerNamespace: 2},
		Workers: probe.NewWorkers(clock.RealClock{}, nil, (*Metrics)(nil), logr.Discard())}
	ctx := context.Background()
	for _, o := range []*autorebootv1alpha1.RebootPolicy{c, b} {
		if _, err := r.ensureWorkers(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.Workers.CountIn("team"); n != 2 {
		t.Fatalf("%d workers, want 2", n)
	}
	// "a" sorts first (same second, name first): it takes c's slot.
	a := rbp("a")
	if err := cl.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.CreationTimestamp = t0
	if err := cl.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	refused, err := r.ensureWorkers(ctx, a)
	if err != nil || len(refused) != 0 {
		t.Fatalf("a: refused %v, %v", refused, err)
	}
	if got := r.Workers.Keys(); len(got) != 2 || !strings.HasPrefix(got[0], "team/a/p@") || !strings.HasPrefix(got[1], "team/b/p@") {
		t.Fatalf("running %v, want a and b", got)
	}
	refused, err = r.ensureWorkers(ctx, c)
	if err != nil || refused["p"].reason != autorebootv1alpha1.ReasonTooManyProbes {
		t.Fatalf("c: refused %v, %v", refused, err)
	}
}
