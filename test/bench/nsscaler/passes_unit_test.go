package nsscaler

import (
	"testing"
	"time"
)

func TestWritePassesPlacedInTheirPhases(t *testing.T) {
	logs := `{"level":"info","ts":"2026-12-04T12:00:00.5Z","msg":"starting"}
{"level":"info","ts":"2026-12-04T12:00:01.300Z","msg":"workloads written","parked":600,"restored":0,"jobs":600,"seconds":1.2}
{"level":"info","ts":"2026-12-04T12:00:01.900Z","msg":"workloads written","parked":400,"restored":0,"jobs":400,"seconds":0.5}
{"level":"info","ts":"2026-12-04T12:00:21.000Z","msg":"workloads written","parked":0,"restored":1000,"jobs":1000,"seconds":0.9}
`
	passes, err := writePasses(logs)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, "2026-12-04T12:00:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name       string
		wrote      func(writePass) int
		start, end time.Time
		want       passTiming
	}{
		{"park: two passes, the first from 00.1", func(p writePass) int { return p.parked }, at("00.000"), at("02.000"),
			passTiming{leadIn: 100 * time.Millisecond, writes: 1800 * time.Millisecond, tail: 100 * time.Millisecond}},
		{"restore: one pass", func(p writePass) int { return p.restored }, at("20.000"), at("21.250"),
			passTiming{leadIn: 100 * time.Millisecond, writes: 900 * time.Millisecond, tail: 250 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := phaseOf(passes, tc.wrote, tc.start, tc.end)
			if !ok || got != tc.want {
				t.Errorf("phaseOf = %+v, %v; want %+v", got, ok, tc.want)
			}
		})
	}
	if _, ok := phaseOf(passes[:1], func(p writePass) int { return p.restored }, at("20.000"), at("21.000")); ok {
		t.Error("a phase without a pass was placed")
	}
}

func TestWritePassesNeedPreciseTimes(t *testing.T) {
	_, err := writePasses(`{"ts":"1733313600.5","msg":"workloads written","parked":1,"seconds":0.1}` + "\n")
	if err == nil {
		t.Fatal("a log time that is not RFC 3339 was accepted")
	}
}
