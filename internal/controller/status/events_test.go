package status

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

// A note longer than the apiserver accepts is cut, not lost; a cut never
// splits a character.
func TestEventNotesFitTheAPILimit(t *testing.T) {
	for _, tc := range []struct {
		name, note string
		cut        bool
	}{
		{"short", "restarted Deployment web (health)", false},
		{"exactly the limit", strings.Repeat("a", maxNote), false},
		{"one byte over", strings.Repeat("a", maxNote+1), true},
		{"multi-byte runes across the cut", strings.Repeat("é", maxNote), true},
		{"a format verb in the text is kept", strings.Repeat("%d", 10), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1)
			Events{Recorder: rec}.Normal(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, nil, "Restarted", "Restart", "%s", tc.note)
			got := strings.TrimPrefix(<-rec.Events, "Normal Restarted ")
			if len(got) > maxNote || !utf8.ValidString(got) {
				t.Fatalf("note of %d bytes (valid UTF-8: %v)", len(got), utf8.ValidString(got))
			}
			if cut := got != tc.note; cut != tc.cut {
				t.Fatalf("cut = %v, want %v: %q", cut, tc.cut, got)
			}
			if tc.cut && !strings.HasSuffix(got, "…") {
				t.Fatalf("a cut note is not marked: %q", got[len(got)-10:])
			}
		})
	}
}
