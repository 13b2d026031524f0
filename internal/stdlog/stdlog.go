// Package stdlog sends what the standard library writes to package log
// into the manager's structured logger, rate-limited and truncated.
//
// Why: net/http's Transport reports some peer misbehaviour (for example
// bytes a server sends on an idle keep-alive connection) with log.Printf,
// quoting what the peer sent. Probe targets are chosen by tenants, so left
// on the process's stderr those lines would be unbounded and unstructured
// text a tenant controls. Through this writer they become structured
// entries at V(1), at most Burst at once and Rate per second, each cut to
// MaxLine bytes; what is dropped is counted in the next entry written.
package stdlog

import (
	"bytes"
	"log"
	"sync"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
)

// Defaults for Redirect.
const (
	Rate    = rate.Limit(1)
	Burst   = 5
	MaxLine = 512
)

// Writer is an io.Writer for log.SetOutput.
type Writer struct {
	logger  logr.Logger
	limiter *rate.Limiter
	maxLine int

	mu      sync.Mutex
	dropped int
}

// NewWriter returns a Writer that logs to logger at V(1).
func NewWriter(logger logr.Logger, limit rate.Limit, burst, maxLine int) *Writer {
	return &Writer{logger: logger, limiter: rate.NewLimiter(limit, burst), maxLine: maxLine}
}

// Redirect points package log at logger with the package defaults.
func Redirect(logger logr.Logger) {
	log.SetFlags(0)
	log.SetOutput(NewWriter(logger, Rate, Burst, MaxLine))
}

// Write logs p as one entry; it never fails, so a caller of log.Printf is
// never affected by what happens here.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.limiter.Allow() {
		w.dropped++
		return len(p), nil
	}
	line := bytes.TrimRight(p, "\n")
	truncated := len(line) > w.maxLine
	if truncated {
		line = line[:w.maxLine]
	}
	kv := []any{"line", string(line)}
	if truncated {
		kv = append(kv, "truncated", true)
	}
	if w.dropped > 0 {
		kv = append(kv, "droppedBefore", w.dropped)
		w.dropped = 0
	}
	w.logger.V(1).Info("standard library log", kv...)
	return len(p), nil
}
