package probe

import (
	"hash"
	"testing"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

const (
	ok   = autorebootv1alpha1.ResultSuccess
	fail = autorebootv1alpha1.ResultFailure
	errR = autorebootv1alpha1.ResultError
)

func TestThresholdTrigger(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name             string
		failureThreshold int32
		successThreshold int32
		results          []string
		wantFires        uint64
		wantPublishes    int
		wantLast         string
	}{
		{"steady success publishes once", 3, 1, []string{ok, ok, ok, ok, ok}, 0, 1, ok},
		{"two failures below threshold 3 do not fire", 3, 1, []string{ok, fail, fail, ok}, 0, 3, ok},
		{"three consecutive failures fire once", 3, 1, []string{fail, fail, fail}, 1, 2, fail},
		{"interrupted failures do not fire", 3, 1, []string{fail, fail, ok, fail, fail, ok}, 0, 4, ok},
		{"counter resets after a fire", 3, 1, []string{fail, fail, fail, fail, fail}, 1, 2, fail},
		{"six failures fire twice", 3, 1, []string{fail, fail, fail, fail, fail, fail}, 2, 3, fail},
		{"threshold 1 fires on every failure", 1, 1, []string{fail, fail, ok}, 2, 3, ok},
		{"success threshold 2 needs two successes to recover", 3, 2, []string{fail, ok, fail, ok, ok}, 0, 2, ok},
		{"errors never fire", 1, 1, []string{errR, errR, errR}, 0, 1, errR},
		{"error resets the failure count", 3, 1, []string{fail, fail, errR, fail, fail}, 0, 3, fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newTriggerState(thresholdTrigger, tc.failureThreshold, tc.successThreshold, PolicyState{})
			publishes := 0
			for i, r := range tc.results {
				o := Observation{Result: r, Message: "m"}
				if r == errR {
					o.Reason = autorebootv1alpha1.ReasonProbeError
				}
				if st.observe(o, t0.Add(time.Duration(i)*time.Second)) {
					publishes++
				}
			}
			if st.published.FireSeq != tc.wantFires {
				t.Errorf("fires = %d, want %d", st.published.FireSeq, tc.wantFires)
			}
			if publishes != tc.wantPublishes {
				t.Errorf("publishes = %d, want %d", publishes, tc.wantPublishes)
			}
			if st.published.LastResult != tc.wantLast {
				t.Errorf("last result = %q, want %q", st.published.LastResult, tc.wantLast)
			}
		})
	}
}

func TestThresholdTriggerRecordsCountAndTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := newTriggerState(thresholdTrigger, 2, 1, PolicyState{})
	st.observe(Observation{Result: fail, Message: "HTTP 500"}, t0)
	if st.published.ConsecutiveFailures != 1 {
		t.Fatalf("consecutive failures = %d, want 1", st.published.ConsecutiveFailures)
	}
	st.observe(Observation{Result: fail, Message: "HTTP 503"}, t0.Add(time.Second))
	p := st.published
	if p.FireSeq != 1 || !p.FiredAt.Equal(t0.Add(time.Second)) || p.ConsecutiveFailures != 2 || p.Message != "HTTP 503" {
		t.Fatalf("after fire: %+v", p)
	}
}

// While merging, reaching the threshold starts a fresh count instead of
// firing; a change trigger ignores merging (each change moves the settle
// delay).
func TestMergingFoldsOnlyThresholdFires(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		kind      triggerKind
		obs       []Observation
		wantFires uint64
		wantPubs  int
	}{
		{"probe failing on", thresholdTrigger, []Observation{{Result: fail}, {Result: fail}, {Result: fail}}, 0, 1},
		{"probe recovering and failing", thresholdTrigger, []Observation{{Result: fail}, {Result: ok}, {Result: fail}}, 0, 3},
		{"change trigger", changeTrigger, []Observation{{Result: ok, Fingerprint: "h1.k1.a"}, {Result: ok, Fingerprint: "h1.k1.b"}, {Result: ok, Fingerprint: "h1.k1.c"}}, 2, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newTriggerState(tc.kind, 1, 1, PolicyState{})
			st.merging = true
			pubs := 0
			for i, o := range tc.obs {
				if st.observe(o, t0.Add(time.Duration(i)*time.Second)) {
					pubs++
				}
			}
			if st.published.FireSeq != tc.wantFires || pubs != tc.wantPubs {
				t.Fatalf("fires %d publishes %d, want %d and %d", st.published.FireSeq, pubs, tc.wantFires, tc.wantPubs)
			}
			if tc.kind == thresholdTrigger && st.failures != 0 {
				t.Fatalf("failure count %d after a merged fire, want a fresh count", st.failures)
			}
		})
	}
	st := newTriggerState(thresholdTrigger, 2, 1, PolicyState{})
	st.merging = true
	st.observe(Observation{Result: fail}, t0)
	st.observe(Observation{Result: fail}, t0.Add(time.Second))
	st.merging = false
	st.observe(Observation{Result: fail}, t0.Add(2*time.Second))
	if st.published.FireSeq != 0 {
		t.Fatal("a failure counted before a merged fire counted towards the next fire")
	}
	st.observe(Observation{Result: fail}, t0.Add(3*time.Second))
	if st.published.FireSeq != 1 {
		t.Fatalf("fire seq %d after failureThreshold fresh failures, want 1", st.published.FireSeq)
	}
}

func TestChangeTrigger(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Keyed fingerprints as the probers make them: "h1.<key id>.<hmac>".
	fp := func(s string) Observation { return Observation{Result: ok, Fingerprint: "h1.k1." + s} }
	e := Observation{Result: errR, Reason: autorebootv1alpha1.ReasonSecretNotFound, Message: "secret x not found"}
	cases := []struct {
		name          string
		baseline      string
		obs           []Observation
		wantFires     uint64
		wantPublishes int
		wantFP        string
	}{
		{"first Observation is the baseline, no fire", "", []Observation{fp("a")}, 0, 1, "h1.k1.a"},
		{"unchanged result never fires nor publishes again", "", []Observation{fp("a"), fp("a"), fp("a")}, 0, 1, "h1.k1.a"},
		{"a change fires once and becomes the baseline", "", []Observation{fp("a"), fp("b"), fp("b")}, 1, 3, "h1.k1.b"},
		{"two changes fire twice", "", []Observation{fp("a"), fp("b"), fp("c")}, 2, 3, "h1.k1.c"},
		{"baseline from status survives a restart", "h1.k1.a", []Observation{fp("a")}, 0, 0, "h1.k1.a"},
		{"a change while the operator was down fires", "h1.k1.a", []Observation{fp("b")}, 1, 1, "h1.k1.b"},
		{"errors keep the baseline", "", []Observation{fp("a"), e, e, fp("a")}, 0, 3, "h1.k1.a"},
		{"change after an error fires", "", []Observation{fp("a"), e, fp("b")}, 1, 3, "h1.k1.b"},
		{"a baseline of another key is recorded anew, no fire", "h1.k0.a", []Observation{fp("b")}, 0, 1, "h1.k1.b"},
		{"an unkeyed baseline of an older manager is recorded anew, no fire", "0f1e2d", []Observation{fp("b")}, 0, 1, "h1.k1.b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := PolicyState{Fingerprint: tc.baseline}
			if tc.baseline != "" {
				// As restored from status: a success was recorded.
				base.LastResult = ok
			}
			st := newTriggerState(changeTrigger, 1, 1, base)
			publishes := 0
			for i, o := range tc.obs {
				if st.observe(o, t0.Add(time.Duration(i)*time.Second)) {
					publishes++
				}
			}
			if st.published.FireSeq != tc.wantFires {
				t.Errorf("fires = %d, want %d", st.published.FireSeq, tc.wantFires)
			}
			if publishes != tc.wantPublishes {
				t.Errorf("publishes = %d, want %d", publishes, tc.wantPublishes)
			}
			if st.published.Fingerprint != tc.wantFP {
				t.Errorf("fingerprint = %q, want %q", st.published.Fingerprint, tc.wantFP)
			}
		})
	}
}

func TestDataFingerprint(t *testing.T) {
	key, err := fingerprint.NewKey([]byte("unit-test-key-unit-test-key-0123"))
	if err != nil {
		t.Fatal(err)
	}
	dataFingerprint := func(data map[string][]byte, keys []string) string {
		return key.Sum(func(h hash.Hash) { writeData(h, data, keys) })
	}
	a := map[string][]byte{"x": []byte("1"), "y": []byte("2")}
	b := map[string][]byte{"y": []byte("2"), "x": []byte("1")}
	if dataFingerprint(a, nil) != dataFingerprint(b, nil) {
		t.Fatal("fingerprint depends on map order")
	}
	c := map[string][]byte{"x": []byte("1"), "y": []byte("3")}
	if dataFingerprint(a, nil) == dataFingerprint(c, nil) {
		t.Fatal("changed value, same fingerprint")
	}
	if dataFingerprint(a, []string{"x"}) != dataFingerprint(c, []string{"x"}) {
		t.Fatal("a change of an unselected key changed the fingerprint")
	}
	if dataFingerprint(map[string][]byte{"x": {}}, []string{"x"}) == dataFingerprint(map[string][]byte{}, []string{"x"}) {
		t.Fatal("missing key and empty value hash the same")
	}
	if dataFingerprint(map[string][]byte{"ab": []byte("c")}, nil) == dataFingerprint(map[string][]byte{"a": []byte("bc")}, nil) {
		t.Fatal("key/value boundary is ambiguous")
	}
}

func testKeys(t testing.TB) *fingerprint.Source {
	t.Helper()
	k, err := fingerprint.NewKey([]byte("unit-test-key-unit-test-key-0123"))
	if err != nil {
		t.Fatal(err)
	}
	return fingerprint.StaticSource(k)
}
