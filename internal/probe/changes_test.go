package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

func manyKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

func TestObjectChangeMessages(t *testing.T) {
	cm, sec := autorebootv1alpha1.WatchConfigMap, autorebootv1alpha1.WatchSecret
	for _, tc := range []struct {
		name string
		c    objectChange
		want string
	}{
		{"one key changed", objectChange{kind: cm, name: "app-config", keys: fingerprint.KeyDiff{Changed: []string{"db.url"}}},
			"ConfigMap app-config: key db.url changed"},
		{"changed and added", objectChange{kind: cm, name: "app-config", keys: fingerprint.KeyDiff{Changed: []string{"db.url"}, Added: []string{"feature.x"}}},
			"ConfigMap app-config: keys db.url changed, feature.x added"},
		{"all three", objectChange{kind: sec, name: "creds", keys: fingerprint.KeyDiff{Changed: []string{"a", "b"}, Added: []string{"c"}, Removed: []string{"d"}}},
			"Secret creds: keys a, b changed, c added, d removed"},
		{"deleted", objectChange{kind: sec, name: "creds", deleted: true}, "Secret creds deleted"},
		{"created", objectChange{kind: cm, name: "later", created: true}, "ConfigMap later created"},
		{"too many keys to tell", objectChange{kind: cm, name: "huge", keys: fingerprint.KeyDiff{Unknown: true}},
			fmt.Sprintf("ConfigMap huge changed (more than %d keys: which changed is not tracked)", fingerprint.MaxDigestedKeys)},
		{"10,000 keys changed", objectChange{kind: cm, name: "big", keys: fingerprint.KeyDiff{Changed: manyKeys("k", 10000)}},
			"ConfigMap big: keys k00000, k00001, k00002, k00003, k00004, k00005, k00006, k00007, k00008, k00009 and 9990 more changed"},
		{"the budget spans the kinds", objectChange{kind: cm, name: "big", keys: fingerprint.KeyDiff{Changed: manyKeys("c", 9), Added: manyKeys("a", 3), Removed: manyKeys("r", 2)}},
			"ConfigMap big: keys c00000, c00001, c00002, c00003, c00004, c00005, c00006, c00007, c00008 changed, a00000 and 2 more added, 2 more removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.String(); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestDescribeChangesBoundsTheObjects(t *testing.T) {
	var cs []objectChange
	for i := range 8 {
		cs = append(cs, objectChange{kind: autorebootv1alpha1.WatchConfigMap, name: fmt.Sprintf("cm-%d", i), deleted: true})
	}
	got := describeChanges(cs)
	if !strings.HasSuffix(got, "ConfigMap cm-4 deleted; and 3 more objects changed") || strings.Contains(got, "cm-5") {
		t.Fatalf("%q", got)
	}
}

// Key and object names are chosen by tenants: none may end a line, forge
// a list entry or smuggle terminal escapes into an event, a log line or a
// webhook message.
func TestHostileNamesAreQuoted(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"db.url", "db.url"},
		{"new\nline", `"new\nline"`},
		{"a, b changed; Secret x deleted", `"a, b changed; Secret x deleted"`},
		{"\x1b[31mred", `"\x1b[31mred"`},
		{"\u202egnp.exe", `"\u202egnp.exe"`},
		{"clé", `"cl\u00e9"`},
		{`quote"d`, `"quote\"d"`},
		{"", `""`},
		{strings.Repeat("a", 300), `"` + strings.Repeat("a", maxShownName) + `"...`},
		// A cut in a multi-byte rune keeps whole runes.
		{strings.Repeat("a", maxShownName-1) + "é", `"` + strings.Repeat("a", maxShownName-1) + `"...`},
	} {
		if got := shownName(tc.in); got != tc.want {
			t.Errorf("shownName(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	msg := objectChange{kind: autorebootv1alpha1.WatchConfigMap, name: "cfg\r\nWarning Restarted forged",
		keys: fingerprint.KeyDiff{Changed: []string{"x\nNormal Restarted forged", strings.Repeat("ü", 500)}}}.String()
	if strings.ContainsAny(msg, "\r\n\x1b") || len(msg) > 300 {
		t.Fatalf("a hostile name escaped: %q (%d bytes)", msg, len(msg))
	}
	for _, r := range msg {
		if r > 0x7e || r < 0x20 {
			t.Fatalf("non-printable or non-ASCII %U in %q", r, msg)
		}
	}
}

func TestChangeNoteSince(t *testing.T) {
	n := ChangeNote{Base: "h1.k.aa", Text: "ConfigMap a: key x changed", What: "ConfigMap a"}
	if got := n.Since("h1.k.aa"); got != n.Text {
		t.Fatalf("known base: %q", got)
	}
	// The prober's previous data is not the baseline (the manager
	// restarted, or the prober started after the baseline was recorded).
	if got := n.Since("h1.k.bb"); !strings.HasPrefix(got, "ConfigMap a changed (which keys is unknown") {
		t.Fatalf("other base: %q", got)
	}
	if got := (ChangeNote{}).Since("x"); got != "" {
		t.Fatalf("sql: %q", got)
	}
}

func TestMergeChange(t *testing.T) {
	for _, tc := range []struct{ old, cur, want string }{
		{"", "a", "a"},
		{"a", "", "a"},
		{"a", "a", "a"},
		{"a; b", "b", "a; b"},
		{"a", "b", "a; b"},
		{"a", "a; b", "a; b"},
	} {
		if got := MergeChange(tc.old, tc.cur); got != tc.want {
			t.Errorf("MergeChange(%q, %q) = %q, want %q", tc.old, tc.cur, got, tc.want)
		}
	}
	long := MergeChange(strings.Repeat("x", 400), strings.Repeat("y", 400))
	if len(long) != MaxChangeText || !strings.HasSuffix(long, "...") {
		t.Fatalf("%d bytes", len(long))
	}
}

func TestWatchProberNamesTheKeysNotTheValues(t *testing.T) {
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "creds", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		Data: map[string][]byte{"password": []byte("s3cr3t-old"), "user": []byte("admin"), "gone": []byte("x")}}
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(sec).Build()
	keys := testKeys(t)
	p := newWatchProber(c, keys, "app", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchSecret, Name: "creds"})
	st := newTriggerState(changeTrigger, 1, 1, PolicyState{})
	now := time.Now()
	st.observe(p.Probe(ctx), now)

	sec.Data = map[string][]byte{"password": []byte("s3cr3t-new"), "user": []byte("admin"), "token": []byte("t0k3n")}
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if !st.observe(p.Probe(ctx), now) || st.published.FireSeq != 1 {
		t.Fatalf("no fire: %+v", st.published)
	}
	want := "Secret creds: keys password changed, token added, gone removed"
	if st.published.Change != want || st.published.Message != want {
		t.Fatalf("change %q message %q, want %q", st.published.Change, st.published.Message, want)
	}
	for _, v := range []string{"s3cr3t", "admin", "t0k3n"} {
		if strings.Contains(fmt.Sprintf("%+v", st.published), v) {
			t.Fatalf("value %q in %+v", v, st.published)
		}
	}
	// Unchanged data: no digest work, no change.
	if o := p.Probe(ctx); o.Change.Text != "" {
		t.Fatalf("unchanged data described as %q", o.Change.Text)
	}

	// A manager that starts with a baseline from status has not seen the
	// previous data: the fire says the keys are unknown.
	restarted := newWatchProber(c, keys, "app", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchSecret, Name: "creds"})
	st2 := newTriggerState(changeTrigger, 1, 1, PolicyState{Fingerprint: st.published.Fingerprint})
	sec.Data["password"] = []byte("s3cr3t-newer")
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if !st2.observe(restarted.Probe(ctx), now) || st2.published.FireSeq != 1 {
		t.Fatalf("no fire after a restart: %+v", st2.published)
	}
	if got := st2.published.Change; got != "Secret creds changed (which keys is unknown: the manager had not seen the previous data)" {
		t.Fatalf("change after a restart %q", got)
	}
}

func TestReferencedProberNamesWhatChanged(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"used": "value-1", "other": "x"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		Data: map[string][]byte{"tls.key": []byte("key-1")}}
	fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{},
		cm, sec, referencingDeployment("web", "cfg", "tls"))
	st := newTriggerState(referencedTrigger, 1, 1, PolicyState{})
	now := time.Now()
	st.observe(fx.prober.Probe(ctx), now)
	step := func(change string, wantText string) {
		t.Helper()
		if !st.observe(fx.prober.Probe(ctx), now) {
			t.Fatalf("%s: no transition", change)
		}
		got := st.published.Targets["web"].Change
		if got != wantText {
			t.Fatalf("%s: change %q, want %q", change, got, wantText)
		}
		if !strings.HasPrefix(st.published.Message, wantText+"; tracking") {
			t.Fatalf("%s: message %q", change, st.published.Message)
		}
		for _, v := range []string{"value-", "key-"} {
			if strings.Contains(fmt.Sprintf("%+v", st.published), v) {
				t.Fatalf("a value in %+v", st.published)
			}
		}
		st.observe(fx.prober.Probe(ctx), now) // back to Success
	}
	fx.update(t, cm, func() { cm.Data["used"] = "value-2"; cm.Data["other"] = "y" })
	step("ConfigMap key", "ConfigMap cfg: key used changed")
	fx.update(t, sec, func() { sec.Data["tls.key"] = []byte("key-2"); sec.Data["tls.crt"] = []byte("crt") })
	step("Secret keys", "Secret tls: keys tls.key changed, tls.crt added")
	// (A deleted Secret looks like an unlabelled one: not tracked, no
	// fire; a deleted ConfigMap is a change.)
	if err := fx.c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	step("ConfigMap deleted", "ConfigMap cfg deleted")
	if err := fx.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"used": "value-3"}}); err != nil {
		t.Fatal(err)
	}
	step("ConfigMap created", "ConfigMap cfg created")
}

// The ConfigMap of the brief: 10,000 keys change at once; the note names
// ten and counts the rest, within an event's 1 KiB.
func TestTenThousandChangedKeysAreBounded(t *testing.T) {
	ctx := context.Background()
	data := map[string]string{}
	for _, k := range manyKeys("key-", 10000) {
		data[k] = "1"
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "big"}, Data: data}
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(cm).Build()
	p := newWatchProber(c, testKeys(t), "app", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "big"})
	st := newTriggerState(changeTrigger, 1, 1, PolicyState{})
	st.observe(p.Probe(ctx), time.Now())
	for k := range cm.Data {
		cm.Data[k] = "2"
	}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	st.observe(p.Probe(ctx), time.Now())
	want := "ConfigMap big: keys key-00000, key-00001, key-00002, key-00003, key-00004, key-00005, key-00006, key-00007, key-00008, key-00009 and 9990 more changed"
	if st.published.Change != want {
		t.Fatalf("%q", st.published.Change)
	}
}

// With --referenced-secrets-without-label a missing Secret is a missing
// reference like a ConfigMap, and its deletion is named.
func TestReferencedSecretDeletionIsNamedWhenUnlabelledSecretsCount(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"used": "1"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"pw": []byte("pw-value")}}
	fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		ReferencedSettings{SecretsWithoutLabel: true}, cm, sec, referencingDeployment("web", "cfg", "creds"))
	st := newTriggerState(referencedTrigger, 1, 1, PolicyState{})
	now := time.Now()
	st.observe(fx.prober.Probe(ctx), now)
	if err := fx.c.Delete(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if !st.observe(fx.prober.Probe(ctx), now) || st.published.FireSeq != 1 {
		t.Fatalf("no fire: %+v", st.published)
	}
	if got := st.published.Targets["web"].Change; got != "Secret creds deleted" {
		t.Fatalf("%q", got)
	}
}

// Two changes before the restart: the worker merges them while the first
// waits (the status side is TestWatchFiresThatWaitAreNamedOnceInStatus in
// the controller).
func TestWatchFiresThatWaitAreNamedOnce(t *testing.T) {
	k := testKeyFor(t)
	fp := func(s string) string { return k.FormatHex(s) }
	st := newTriggerState(changeTrigger, 1, 1, PolicyState{Fingerprint: fp("00")})
	now := time.Now()
	obs := func(from, to, text string) Observation {
		return Observation{Result: ok, Fingerprint: fp(to), Change: ChangeNote{Base: fp(from), Text: text, What: "ConfigMap app"}}
	}
	st.observe(obs("00", "01", "ConfigMap app: key a changed"), now)
	if st.published.Change != "ConfigMap app: key a changed" {
		t.Fatalf("worker: %q", st.published.Change)
	}
	st.merging = true // the restart is pending in status
	st.observe(obs("01", "02", "ConfigMap app: key b changed"), now)
	if st.published.Change != "ConfigMap app: key a changed; ConfigMap app: key b changed" {
		t.Fatalf("worker: %q", st.published.Change)
	}
}
