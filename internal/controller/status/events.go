package status

import (
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Events emits a controller's events. A nil Recorder drops them (unit
// tests that do not look at events).
type Events struct {
	Recorder events.EventRecorder
}

// Normal records a Normal event about regarding (related may be nil).
func (e Events) Normal(regarding, related runtime.Object, reason, action, note string, args ...any) {
	e.emit(regarding, related, corev1.EventTypeNormal, reason, action, note, args...)
}

// Warning records a Warning event about regarding (related may be nil).
func (e Events) Warning(regarding, related runtime.Object, reason, action, note string, args ...any) {
	e.emit(regarding, related, corev1.EventTypeWarning, reason, action, note, args...)
}

// maxNote is the apiserver's limit on an events.k8s.io/v1 note: a longer
// one is refused and the event lost.
const maxNote = 1024

func (e Events) emit(regarding, related runtime.Object, typ, reason, action, note string, args ...any) {
	if e.Recorder == nil {
		return
	}
	e.Recorder.Eventf(regarding, related, typ, reason, action, "%s", truncateNote(fmt.Sprintf(note, args...)))
}

// truncateNote shortens a note to maxNote bytes, at a rune boundary, marked
// with an ellipsis.
func truncateNote(s string) string {
	if len(s) <= maxNote {
		return s
	}
	const mark = "…"
	cut := maxNote - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
