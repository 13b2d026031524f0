package benchkit

import (
	"fmt"
	"os"
	"sort"
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

// ProcessCPUs is the CPU time spent so far by every process of the
// machine, by pid, with its command name.
type ProcessCPUs map[int]NamedCPU

// NamedCPU is one process's command name and CPU time.
type NamedCPU struct {
	Name string
	CPU  time.Duration
}

// CPUByProcess reads ProcessCPUs from /proc. Processes that exit between
// two readings drop out of the difference.
func CPUByProcess() (ProcessCPUs, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := ProcessCPUs{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		name, cpu, err := parseProcStatNameCPU(string(raw))
		if err == nil {
			out[pid] = NamedCPU{Name: commandGroup(name), CPU: cpu}
		}
	}
	return out, nil
}

// commandGroup folds the kernel's worker threads into one name: theirs
// carries the work queue they serve at the moment, which changes.
func commandGroup(name string) string {
	if strings.HasPrefix(name, "kworker/") {
		return "kworker"
	}
	return name
}

func parseProcStatNameCPU(stat string) (string, time.Duration, error) {
	start, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if start < 0 || end < start {
		return "", 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	cpu, err := parseProcStatCPU(stat)
	return stat[start+1 : end], cpu, err
}

// DescribeCPUSpent names the commands whose processes spent CPU between
// two CPUByProcess readings, most first, and the share of the machine's
// capacity they used over wall ("kube-apiserver 1.21s, etcd 0.40s, …; 1.9 of
// 2 cores"). A process started in between counts whole.
func DescribeCPUSpent(before, after ProcessCPUs, wall time.Duration, cores int) string {
	byName := map[string]time.Duration{}
	var total time.Duration
	for pid, a := range after {
		if delta := a.CPU - before[pid].CPU; delta > 0 {
			byName[a.Name] += delta
			total += delta
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := byName[names[i]], byName[names[j]]
		return a > b || (a == b && names[i] < names[j])
	})
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %.2fs", name, byName[name].Seconds()))
	}
	return fmt.Sprintf("%s; %.2f of %d cores over %s", strings.Join(parts, ", "), total.Seconds()/wall.Seconds(), cores, wall.Round(time.Millisecond))
}
