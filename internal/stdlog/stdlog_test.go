package stdlog

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/time/rate"
)

type entry struct{ prefix, args string }

func recorder(entries *[]entry) logr.Logger {
	return funcr.New(func(prefix, args string) {
		*entries = append(*entries, entry{prefix, args})
	}, funcr.Options{Verbosity: 1})
}

func TestWriterBoundsWhatAPeerCanMakeUsLog(t *testing.T) {
	tests := []struct {
		name        string
		lines       []string
		maxLine     int
		wantEntries int
		check       func(t *testing.T, got []entry)
	}{{
		name:        "a line within the limits is one structured entry",
		lines:       []string{"Unsolicited response received on idle HTTP channel starting with \"HTTP/1.1 200\"\n"},
		maxLine:     512,
		wantEntries: 1,
		check: func(t *testing.T, got []entry) {
			if !strings.Contains(got[0].args, `Unsolicited response`) || strings.Contains(got[0].args, "truncated") {
				t.Errorf("entry %q", got[0].args)
			}
		},
	}, {
		name:        "a long line is cut and marked",
		lines:       []string{strings.Repeat("x", 10_000)},
		maxLine:     16,
		wantEntries: 1,
		check: func(t *testing.T, got []entry) {
			if strings.Count(got[0].args, "x") != 16 || !strings.Contains(got[0].args, `"truncated"=true`) {
				t.Errorf("entry %q", got[0].args)
			}
		},
	}, {
		name:        "a flood keeps the burst and counts the rest",
		lines:       repeat("line", 1000),
		maxLine:     16,
		wantEntries: 3,
		check: func(t *testing.T, got []entry) {
			for _, e := range got {
				if strings.Contains(e.args, "droppedBefore") {
					t.Errorf("nothing was written after the drops yet, but %q counts them", e.args)
				}
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []entry
			// A zero rate refills nothing: only the burst passes, whatever
			// the machine's speed.
			w := NewWriter(recorder(&got), rate.Limit(0), 3, tt.maxLine)
			for _, l := range tt.lines {
				if n, err := w.Write([]byte(l)); err != nil || n != len(l) {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(l))
				}
			}
			if len(got) != tt.wantEntries {
				t.Fatalf("%d entries, want %d: %v", len(got), tt.wantEntries, got)
			}
			tt.check(t, got)
		})
	}
}

func TestWriterReportsDropsInTheNextEntry(t *testing.T) {
	var got []entry
	w := NewWriter(recorder(&got), rate.Inf, 1, 64)
	w.limiter.SetLimit(0) // the burst token is used by the first write, none refills
	_, _ = w.Write([]byte("first"))
	_, _ = w.Write([]byte("dropped 1"))
	_, _ = w.Write([]byte("dropped 2"))
	w.limiter.SetLimit(rate.Inf)
	_, _ = w.Write([]byte("after"))
	if len(got) != 2 || !strings.Contains(got[1].args, `"droppedBefore"=2`) {
		t.Fatalf("entries %v: want the second to count 2 dropped lines", got)
	}
}

func TestWriterLogsAtVerbosityOne(t *testing.T) {
	var got []entry
	quiet := funcr.New(func(prefix, args string) { got = append(got, entry{prefix, args}) }, funcr.Options{Verbosity: 0})
	_, _ = NewWriter(quiet, rate.Inf, 1, 64).Write([]byte("x"))
	if len(got) != 0 {
		t.Fatalf("a V(0) logger printed %v", got)
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
