package benchkit

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{name: "plain", stat: "42 (manager) S 1 42 42 0 -1 4194560 100 0 0 0 150 23 0 0 20 0 8 0",
			want: 1730 * time.Millisecond},
		{name: "command with spaces and parentheses", stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0",
			want: 30 * time.Millisecond},
		{name: "no parenthesis", stat: "7 manager R 1", wantErr: true},
		{name: "short", stat: "7 (m) R 1 2 3", wantErr: true},
		{name: "not a number", stat: "7 (m) R 1 7 7 0 -1 0 0 0 0 0 x 2 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStatCPU(tt.stat)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseProcStatCPU = %v, %v; want %v (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestProcessCPUOfItself(t *testing.T) {
	if _, err := ProcessCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestParseProcStatus(t *testing.T) {
	status := "Name:\tmanager\nVmHWM:\t   40960 kB\nVmRSS:\t   20480 kB\nRssAnon:\t    1024 kB\nThreads:\t12\nbroken:\tx kB\n"
	got := parseProcStatus(status)
	want := map[string]float64{"VmHWM": 40, "VmRSS": 20, "RssAnon": 1}
	if len(got) != len(want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v MiB, want %v", k, got[k], v)
		}
	}
}

func TestParseProcStatNameCPU(t *testing.T) {
	name, cpu, err := parseProcStatNameCPU("7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0")
	if err != nil || name != "a (b) c" || cpu != 30*time.Millisecond {
		t.Fatalf("got %q %v %v; want \"a (b) c\" 30ms", name, cpu, err)
	}
	if _, _, err := parseProcStatNameCPU("7 manager R 1"); err == nil {
		t.Fatal("a line without a command name was read")
	}
}

func TestCPUByProcessSeesItself(t *testing.T) {
	all, err := CPUByProcess()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := all[os.Getpid()].Name, strings.TrimSpace(string(self)); got != want {
		t.Fatalf("this process is %q in the reading, want %q (of %d processes)", got, want, len(all))
	}
}

func TestDescribeCPUSpent(t *testing.T) {
	before := ProcessCPUs{
		1: {"etcd", time.Second}, 2: {"kube-apiserver", 2 * time.Second}, 3: {"idle", time.Second},
		4: {"kworker", 3 * time.Second}, 9: {"gone", time.Second},
	}
	after := ProcessCPUs{
		1: {"etcd", 1500 * time.Millisecond}, 2: {"kube-apiserver", 3 * time.Second}, 3: {"idle", time.Second},
		// A worker thread renamed in between is the same pid: only its
		// delta counts.
		4: {"kworker", 3100 * time.Millisecond}, 5: {"new", 400 * time.Millisecond},
	}
	got := DescribeCPUSpent(before, after, time.Second, 2)
	want := "kube-apiserver 1.00s, etcd 0.50s, new 0.40s, kworker 0.10s; 2.00 of 2 cores over 1s"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestCommandGroup(t *testing.T) {
	for name, want := range map[string]string{
		"kworker/u8:2-ext4-rsv-conversion": "kworker", "kworker/1:0-virtio_vsock": "kworker", "kube-apiserver": "kube-apiserver",
	} {
		if got := commandGroup(name); got != want {
			t.Errorf("commandGroup(%q) = %q, want %q", name, got, want)
		}
	}
}
