package nsscaler

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

var ssNow = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func ssScaler(s *scalingv1alpha1.SelfService) *scalingv1alpha1.NSScaler {
	sc := &scalingv1alpha1.NSScaler{Spec: scalingv1alpha1.NSScalerSpec{SelfService: s}}
	sc.Name = "nights"
	return sc
}

func enabled(maxDur time.Duration, perDay int32) *scalingv1alpha1.SelfService {
	return &scalingv1alpha1.SelfService{Enabled: true, MaxDuration: &metav1.Duration{Duration: maxDur}, MaxPerDay: perDay}
}

func wakeReq(ns, name string, created time.Time, d time.Duration, until time.Time) scalingv1alpha1.WakeRequest {
	r := scalingv1alpha1.WakeRequest{}
	r.Namespace, r.Name, r.CreationTimestamp = ns, name, metav1.NewTime(created)
	if d > 0 {
		r.Spec.Duration = &metav1.Duration{Duration: d}
	}
	if !until.IsZero() {
		u := metav1.NewTime(until)
		r.Spec.Until = &u
	}
	return r
}

func granted(r scalingv1alpha1.WakeRequest, by string, at, until time.Time) scalingv1alpha1.WakeRequest {
	r.Status.Phase, r.Status.NSScaler = scalingv1alpha1.WakeRequestGranted, by
	a, u := metav1.NewTime(at), metav1.NewTime(until)
	r.Status.GrantedAt, r.Status.GrantedUntil = &a, &u
	return r
}

func ownsAll(string) bool { return true }

// verdictOf is the verdict the pass reached on a request (phase "" when
// it left the request as it is).
func verdictOf(p *selfServicePass, name string) wakeVerdict {
	for _, d := range p.decisions {
		if d.request.Name == name {
			return d.verdict
		}
	}
	return wakeVerdict{}
}

func TestDecideSelfService(t *testing.T) {
	old := ssNow.Add(-time.Hour)
	cases := []struct {
		name       string
		service    *scalingv1alpha1.SelfService
		requests   []scalingv1alpha1.WakeRequest
		ledger     []scalingv1alpha1.SelfServiceGrants
		want       map[string]string // request → reason ("" untouched)
		wantUntil  map[string]time.Time
		wantWoken  map[string]string // namespace → request
		wantLedger int               // grants of namespace a after the pass
	}{
		{
			name: "disabled: refused", service: nil,
			requests: []scalingv1alpha1.WakeRequest{wakeReq("a", "r1", old, time.Hour, time.Time{})},
			want:     map[string]string{"r1": scalingv1alpha1.ReasonSelfServiceDisabled},
		},
		{
			name: "granted for its duration", service: enabled(4*time.Hour, 3),
			requests:  []scalingv1alpha1.WakeRequest{wakeReq("a", "r1", old, 2*time.Hour, time.Time{})},
			want:      map[string]string{"r1": scalingv1alpha1.ReasonWakeGranted},
			wantUntil: map[string]time.Time{"r1": ssNow.Add(2 * time.Hour)},
			wantWoken: map[string]string{"a": "r1"}, wantLedger: 1,
		},
		{
			name: "until in year 9999: clipped to maxDuration", service: enabled(4*time.Hour, 3),
			requests:  []scalingv1alpha1.WakeRequest{wakeReq("a", "r1", old, 0, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))},
			want:      map[string]string{"r1": scalingv1alpha1.ReasonWakeClipped},
			wantUntil: map[string]time.Time{"r1": ssNow.Add(4 * time.Hour)},
			wantWoken: map[string]string{"a": "r1"}, wantLedger: 1,
		},
		{
			name: "a huge duration: clipped, no overflow", service: enabled(time.Hour, 3),
			requests:  []scalingv1alpha1.WakeRequest{wakeReq("a", "r1", old, time.Duration(1<<62), time.Time{})},
			want:      map[string]string{"r1": scalingv1alpha1.ReasonWakeClipped},
			wantUntil: map[string]time.Time{"r1": ssNow.Add(time.Hour)},
			wantWoken: map[string]string{"a": "r1"}, wantLedger: 1,
		},
		{
			name: "until in the past: refused", service: enabled(time.Hour, 3),
			requests: []scalingv1alpha1.WakeRequest{wakeReq("a", "r1", old, 0, ssNow.Add(-time.Minute))},
			want:     map[string]string{"r1": scalingv1alpha1.ReasonInThePast},
		},
		{
			name: "one grant per namespace, the oldest request wins", service: enabled(time.Hour, 3),
			requests: []scalingv1alpha1.WakeRequest{
				wakeReq("a", "r2", old.Add(time.Second), time.Hour, time.Time{}),
				wakeReq("a", "r1", old, time.Hour, time.Time{}),
				wakeReq("b", "r3", old, time.Hour, time.Time{}),
			},
			want:      map[string]string{"r1": scalingv1alpha1.ReasonWakeGranted, "r2": scalingv1alpha1.ReasonAlreadyWoken, "r3": scalingv1alpha1.ReasonWakeGranted},
			wantWoken: map[string]string{"a": "r1", "b": "r3"}, wantLedger: 1,
		},
		{
			name: "a grant in force holds; a new request is refused", service: enabled(time.Hour, 3),
			requests: []scalingv1alpha1.WakeRequest{
				granted(wakeReq("a", "r1", old, time.Hour, time.Time{}), "nights", old, ssNow.Add(time.Minute)),
				wakeReq("a", "r2", old, time.Hour, time.Time{}),
			},
			want:      map[string]string{"r1": "", "r2": scalingv1alpha1.ReasonAlreadyWoken},
			wantWoken: map[string]string{"a": "r1"}, wantLedger: 1,
		},
		{
			name: "an expired grant ends, then the next request is decided", service: enabled(time.Hour, 3),
			requests: []scalingv1alpha1.WakeRequest{
				granted(wakeReq("a", "r1", old, time.Hour, time.Time{}), "nights", old, ssNow),
				wakeReq("a", "r2", old.Add(time.Second), time.Hour, time.Time{}),
			},
			want:      map[string]string{"r1": scalingv1alpha1.ReasonExpired, "r2": scalingv1alpha1.ReasonWakeGranted},
			wantWoken: map[string]string{"a": "r2"}, wantLedger: 2,
		},
		{
			name: "maxPerDay counts the ledger, even of deleted requests", service: enabled(time.Hour, 2),
			ledger: []scalingv1alpha1.SelfServiceGrants{{Namespace: "a", GrantedAt: []metav1.Time{
				metav1.NewTime(ssNow.Add(-23 * time.Hour)), metav1.NewTime(ssNow.Add(-2 * time.Hour))}}},
			requests:   []scalingv1alpha1.WakeRequest{wakeReq("a", "r1", old, time.Hour, time.Time{})},
			want:       map[string]string{"r1": scalingv1alpha1.ReasonOverLimit},
			wantLedger: 2,
		},
		{
			name: "grants older than 24h leave the ledger", service: enabled(time.Hour, 1),
			ledger: []scalingv1alpha1.SelfServiceGrants{{Namespace: "a", GrantedAt: []metav1.Time{
				metav1.NewTime(ssNow.Add(-25 * time.Hour))}}},
			requests:   []scalingv1alpha1.WakeRequest{wakeReq("a", "r1", old, time.Hour, time.Time{})},
			want:       map[string]string{"r1": scalingv1alpha1.ReasonWakeGranted},
			wantWoken:  map[string]string{"a": "r1"},
			wantLedger: 1,
		},
		{
			name: "disabling self-service withdraws a grant in force", service: &scalingv1alpha1.SelfService{},
			requests: []scalingv1alpha1.WakeRequest{
				granted(wakeReq("a", "r1", old, time.Hour, time.Time{}), "nights", old, ssNow.Add(time.Hour)),
			},
			want: map[string]string{"r1": scalingv1alpha1.ReasonWithdrawn}, wantLedger: 1,
		},
		{
			name: "a grant by another NSScaler is withdrawn", service: enabled(time.Hour, 3),
			requests: []scalingv1alpha1.WakeRequest{
				granted(wakeReq("a", "r1", old, time.Hour, time.Time{}), "other", old, ssNow.Add(time.Hour)),
			},
			want: map[string]string{"r1": scalingv1alpha1.ReasonWithdrawn},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ssScaler(tc.service)
			s.Status.SelfServiceGrants = tc.ledger
			p := decideSelfService(s, ownsAll, tc.requests, ssNow)
			for req, reason := range tc.want {
				if got := verdictOf(p, req).reason; got != reason {
					t.Errorf("%s: reason %q, want %q", req, got, reason)
				}
			}
			for req, until := range tc.wantUntil {
				if got := verdictOf(p, req).grantedUntil; !got.Equal(until) {
					t.Errorf("%s: until %s, want %s", req, got, until)
				}
			}
			woken := map[string]string{}
			for ns, w := range p.woken {
				woken[ns] = w.Request
			}
			if fmt.Sprint(woken) != fmt.Sprint(orEmpty(tc.wantWoken)) {
				t.Errorf("woken %v, want %v", woken, tc.wantWoken)
			}
			if got := len(p.ledger["a"]); got != tc.wantLedger {
				t.Errorf("ledger of a: %d grants, want %d", got, tc.wantLedger)
			}
		})
	}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// TestDecideSelfServiceOnlyOwnedNamespaces: requests of namespaces the
// NSScaler does not own are neither decided nor woken.
func TestDecideSelfServiceOnlyOwnedNamespaces(t *testing.T) {
	reqs := []scalingv1alpha1.WakeRequest{wakeReq("mine", "r1", ssNow, time.Hour, time.Time{}), wakeReq("theirs", "r2", ssNow, time.Hour, time.Time{})}
	p := decideSelfService(ssScaler(enabled(time.Hour, 3)), func(ns string) bool { return ns == "mine" }, reqs, ssNow)
	if len(p.decisions) != 1 || p.decisions[0].request.Name != "r1" {
		t.Fatalf("decisions %+v, want only r1", p.decisions)
	}
	if _, ok := p.woken["theirs"]; ok || len(p.woken) != 1 {
		t.Fatalf("woken %v, want only mine", p.woken)
	}
}

// TestDecideSelfServiceFloodIsBounded: thousands of requests in one
// namespace make one grant; the ledger and the status stay small.
func TestDecideSelfServiceFloodIsBounded(t *testing.T) {
	var reqs []scalingv1alpha1.WakeRequest
	for i := range 5000 {
		reqs = append(reqs, wakeReq("a", fmt.Sprintf("r%05d", i), ssNow.Add(-time.Hour), time.Hour, time.Time{}))
	}
	p := decideSelfService(ssScaler(enabled(time.Hour, 3)), ownsAll, reqs, ssNow)
	grants := 0
	for _, d := range p.decisions {
		if d.verdict.phase == scalingv1alpha1.WakeRequestGranted {
			grants++
		}
	}
	if grants != 1 || len(p.tenantWakes()) != 1 || len(p.grantsLedger()) != 1 || len(p.grantsLedger()[0].GrantedAt) != 1 {
		t.Fatalf("grants %d, tenantWakes %d, ledger %+v: want one of each", grants, len(p.tenantWakes()), p.grantsLedger())
	}
	if verdictOf(p, "r00000").phase != scalingv1alpha1.WakeRequestGranted || verdictOf(p, "r04999").reason != scalingv1alpha1.ReasonAlreadyWoken {
		t.Fatal("want the oldest granted and the rest refused AlreadyWoken")
	}
}

// TestWokenPhraseNamesWhoWoke: status.reason tells spec.wake entries from
// WakeRequest grants.
func TestWokenPhraseNamesWhoWoke(t *testing.T) {
	obs := &observation{plan: Plan{Woken: sets.New("a", "b")}}
	if got := wokenPhrase(obs); got != "; a, b woken by spec.wake" {
		t.Errorf("without requests: %q", got)
	}
	obs.selfService = &selfServicePass{woken: map[string]scalingv1alpha1.TenantWake{"b": {Namespace: "b"}, "z": {Namespace: "z"}}}
	if got := wokenPhrase(obs); got != "; a woken by spec.wake; b woken by a WakeRequest" {
		t.Errorf("with a request: %q", got)
	}
}
