// Package startup benchmarks the manager's fixed cost: the size of the
// release binary (built with the Makefile's STATIC_BUILD_FLAGS, as make
// build and make image build it) and its resident memory with nothing
// cached, running every controller as installed (leader election, secure
// metrics with the TokenReview/SubjectAccessReview filter) against a local
// control plane (envtest) holding the CRDs and no object.
//
// Each run starts the binary, reads /proc/<pid>/status once /readyz
// answers (ready) and again after an idle window (settled: controllers
// started, first lease renewals done), then stops it. The figures are the
// medians of the runs. They carry no target of their own: the fixed cost is
// part of the manager's resident set at 5,000 workloads, which the NSScaler
// benchmark holds to its target. The manager runs with the Go runtime
// environment of the Helm chart's defaults (benchkit.ChartRuntimeEnv).
//
// BENCH_STARTUP_RUNS=n and BENCH_STARTUP_SETTLE=5s change the runs and the
// window; BENCH_STARTUP_BINARY=/path measures a binary built elsewhere (an
// older commit, for a before/after comparison) instead of building one.
package startup

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	fullRuns = 3
	// fullSettle is long enough for the controllers to start after the
	// lease is won and for a few lease renewals (every 2 s).
	fullSettle = 10 * time.Second
	operatorNS = "runbook-system"
)

// sample is one run's figures.
type sample struct {
	readyAfter       time.Duration
	readyRSS, hwm    float64 // MiB
	settledRSS       float64
	anon, file       float64 // of the settled RSS
	cpuReady, cpuAll float64 // CPU seconds until ready, until settled
}

func BenchmarkStartup(b *testing.B) {
	for range b.N {
		runOnce(b)
	}
}

func runOnce(b *testing.B) {
	runs := benchkit.Size(b, "startup_runs", fullRuns)
	settle := benchkit.Window(b, "startup_settle", fullSettle, 2*time.Second)
	sum := benchkit.NewSummary("startup")
	defer sum.Finish(b)
	ctx := context.Background()
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	env, err := testenv.Start(testenv.Options{Scheme: scheme})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	defer func() { _ = env.Stop() }()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	dir := b.TempDir()
	kubeconfig, err := adminKubeconfig(env, dir)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	bin, err := managerBinary(ctx, dir, sum)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	st, err := os.Stat(bin)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	sum.Figure("binary %.1f MB (%d bytes)", float64(st.Size())/1e6, st.Size())
	// Set after the control plane started, so only the manager inherits them.
	sum.Figure("manager runs with the chart's %s", benchkit.UseChartRuntimeEnv(b))

	var samples []sample
	for i := range runs {
		s, err := measure(ctx, bin, kubeconfig, settle)
		if err != nil {
			sum.Fatalf(b, "run %d: %v", i+1, err)
		}
		b.Logf("run %d: ready after %.2fs, RSS ready %.1f MiB (peak %.1f), settled %.1f MiB (anon %.1f, file %.1f), CPU %.2fs to ready, %.2fs in all",
			i+1, s.readyAfter.Seconds(), s.readyRSS, s.hwm, s.settledRSS, s.anon, s.file, s.cpuReady, s.cpuAll)
		samples = append(samples, s)
	}
	med := func(f func(sample) float64) float64 { return median(samples, f) }
	sum.Figure("ready after %.2f s", med(func(s sample) float64 { return s.readyAfter.Seconds() }))
	sum.Figure("RSS when ready, nothing cached %.1f MiB", med(func(s sample) float64 { return s.readyRSS }))
	sum.Figure("RSS settled after %s %.1f MiB (anon %.1f, file %.1f)", settle,
		med(func(s sample) float64 { return s.settledRSS }), med(func(s sample) float64 { return s.anon }),
		med(func(s sample) float64 { return s.file }))
	sum.Figure("peak RSS while starting %.1f MiB", med(func(s sample) float64 { return s.hwm }))
	sum.Figure("CPU %.2f s to ready, %.2f s until settled", med(func(s sample) float64 { return s.cpuReady }),
		med(func(s sample) float64 { return s.cpuAll }))
	sum.Figure("median of %d runs", runs)
}

// managerBinary is BENCH_STARTUP_BINARY, or the release build of the
// working tree.
func managerBinary(ctx context.Context, dir string, sum *benchkit.Summary) (string, error) {
	if bin := os.Getenv("BENCH_STARTUP_BINARY"); bin != "" {
		sum.Figure("binary given: %s", bin)
		return bin, nil
	}
	bin, flags, err := benchkit.BuildReleaseManager(ctx, dir)
	if err != nil {
		return "", err
	}
	sum.Figure("built with CGO_ENABLED=0 %s", strings.Join(quoted(flags), " "))
	return bin, nil
}

func quoted(flags []string) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		if strings.ContainsAny(f, " \t") {
			f = strconv.Quote(f)
		}
		out[i] = f
	}
	return out
}

// measure runs the manager once, as installed: every controller, leader
// election, secure metrics.
func measure(ctx context.Context, bin, kubeconfig string, settle time.Duration) (sample, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	m, err := cluster.StartManager(ctx, bin, kubeconfig,
		"--controllers=all",
		"--leader-elect", "--leader-election-namespace="+operatorNS,
		"--operator-namespace="+operatorNS,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port))
	if err != nil {
		return sample{}, err
	}
	var s sample
	s.readyAfter = time.Since(start)
	st, err := benchkit.ProcStatusMiB(m.Pid())
	if err == nil {
		s.readyRSS = st["VmRSS"]
		s.cpuReady, err = benchkit.CPUSeconds(m.Pid())
	}
	if err == nil {
		// The idle window is the measurement: a timer, with an early end
		// if the manager dies.
		select {
		case <-m.Exited():
			err = fmt.Errorf("the manager exited while idle:\n%s", m.Logs())
		case <-time.After(settle):
		}
	}
	if err == nil {
		if st, err = benchkit.ProcStatusMiB(m.Pid()); err == nil {
			s.settledRSS, s.anon, s.file, s.hwm = st["VmRSS"], st["RssAnon"], st["RssFile"], st["VmHWM"]
			s.cpuAll, err = benchkit.CPUSeconds(m.Pid())
		}
	}
	if stopErr := m.Stop(); err == nil && stopErr != nil {
		err = fmt.Errorf("stopping the manager: %w", stopErr)
	}
	m.DumpLogsOnFailure(err != nil)
	return s, err
}

func adminKubeconfig(env *testenv.Env, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

func median(samples []sample, f func(sample) float64) float64 {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
