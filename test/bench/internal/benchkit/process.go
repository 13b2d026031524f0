package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture the benchmarks run on (the kernel exports it
// as a fixed ABI value, independent of CONFIG_HZ).
const clockTicks = 100

// ProcessCPU is the CPU time a process has spent so far, user plus system
// (utime + stime of /proc/<pid>/stat), at a resolution of 10 ms.
func ProcessCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(raw))
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so the fields are counted from
// the last ')'.
func parseProcStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	// After ") " come field 3 (state) onwards: utime is the 12th of them.
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc stat line %q", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat CPU field %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// CPUSeconds is ProcessCPU in seconds.
func CPUSeconds(pid int) (float64, error) {
	d, err := ProcessCPU(pid)
	return d.Seconds(), err
}

// ProcStatusMiB reads the kB fields of /proc/<pid>/status (VmRSS, VmHWM,
// RssAnon, RssFile, ...), in MiB.
func ProcStatusMiB(pid int) (map[string]float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	return parseProcStatus(string(raw)), nil
}

func parseProcStatus(status string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(status, "\n") {
		key, val, ok := strings.Cut(line, ":")
		f := strings.Fields(val)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[key] = kb / 1024
		}
	}
	return out
}

// RSSMiB is the process's resident set in MiB (0 once it is gone).
func RSSMiB(pid int) float64 {
	st, err := ProcStatusMiB(pid)
	if err != nil {
		return 0
	}
	return st["VmRSS"]
}
