package benchkit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// MachineSteal is the CPU time the hypervisor has taken from this machine's
// CPUs so far: the steal column of /proc/stat, time a virtual CPU was ready
// to run while the host ran something else. On a shared virtual machine it
// is the part of a slow run that no process of the machine caused.
func MachineSteal() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseSteal(string(raw))
}

// parseSteal reads the steal column (the eighth number) of the aggregate
// "cpu" line of /proc/stat, in USER_HZ ticks.
func parseSteal(stat string) (time.Duration, error) {
	for line := range strings.SplitSeq(stat, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, fmt.Errorf("no steal column in /proc/stat line %q", line)
		}
		ticks, err := strconv.ParseInt(f[8], 10, 64)
		if err != nil || ticks < 0 {
			return 0, fmt.Errorf("steal column %q of /proc/stat: not a tick count", f[8])
		}
		return time.Duration(ticks) * time.Second / clockTicks, nil
	}
	return 0, errors.New("no aggregate cpu line in /proc/stat")
}

// DescribeSteal is what the hypervisor took between two MachineSteal
// readings, over wall: "0.31s (0.14 cores)".
func DescribeSteal(before, after, wall time.Duration) string {
	d := max(after-before, 0)
	return fmt.Sprintf("%.2fs (%.2f cores)", d.Seconds(), d.Seconds()/wall.Seconds())
}
