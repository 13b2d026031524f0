package rebootpolicy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	rbpcontroller "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
)

// burstManager runs a second manager with the admin's default namespace
// limit, for the RebootPolicies labelled for it (the suite's manager, with
// its small limit, ignores them).
func burstManager(t *testing.T, ns string, limit int) *rbpcontroller.Reconciler {
	t.Helper()
	return startSecondManager(t, ns, "burst", rbpcontroller.Options{
		Limits:  rbpcontroller.Limits{MinPeriod: time.Second, MaxPerNamespace: limit},
		Clock:   clock.RealClock{},
		Metrics: rbpcontroller.NewMetrics(),
	})
}

// TestNamespaceLimitHoldsUnderABurst: 110 RebootPolicies created at once,
// in random order from several clients, in a namespace limited to 100:
// never more than 100 workers run at any moment, and in the end exactly
// the 100 oldest (creation time, then name) run and the other 10 say
// TooManyProbes. (While policies still reach the cache, one reconcile may
// free several slots at once for policies it saw to be older; those then
// start on their own reconciles: the count may dip below 100 meanwhile,
// never rise above it.)
func TestNamespaceLimitHoldsUnderABurst(t *testing.T) {
	const limit, n = 100, 110
	g := NewWithT(t)
	ns := createNamespace(t, "burst")
	r := burstManager(t, ns, limit)

	var most, least atomic.Int64
	least.Store(limit)
	var reached atomic.Bool
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			c := int64(r.Workers.CountIn(ns))
			if c > most.Load() {
				most.Store(c)
			}
			if c == limit {
				reached.Store(true)
			}
			if reached.Load() && c < least.Load() {
				least.Store(c)
			}
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(200 * time.Microsecond)
		}
	})
	defer func() { close(stop); sampler.Wait() }()

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%03d", i)
	}
	rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	port := external.Listener.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	next := make(chan string)
	for range 8 {
		wg.Go(func() {
			for name := range next {
				rbp := newRBP(ns, name, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
					autorebootv1alpha1.Policy{Name: "tcp", Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
						PeriodSeconds: 1, TimeoutSeconds: 1,
						ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(port)}}}}})
				rbp.Labels = map[string]string{externalManagerLabel: "burst"}
				if err := createRBP(t, rbp); err != nil {
					t.Errorf("create %s: %v", name, err)
				}
			}
		})
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()

	// The 100 oldest by (creation time, name) are the ones that run.
	var l autorebootv1alpha1.RebootPolicyList
	g.Expect(k8s.List(context.Background(), &l, client.InNamespace(ns))).To(Succeed())
	g.Expect(l.Items).To(HaveLen(n))
	sort.Slice(l.Items, func(i, j int) bool {
		a, b := l.Items[i].CreationTimestamp, l.Items[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return l.Items[i].Name < l.Items[j].Name
	})
	var want []string
	for _, it := range l.Items[:limit] {
		want = append(want, ns+"/"+it.Name+"/tcp")
	}
	sort.Strings(want)
	running := func() []string {
		var out []string
		for _, k := range r.Workers.Keys() {
			if key, _, ok := strings.Cut(k, "@"); ok && strings.HasPrefix(key, ns+"/") {
				out = append(out, key)
			}
		}
		return out
	}
	g.Eventually(running, timeout, interval).Should(Equal(want))
	g.Eventually(func() int {
		refused := 0
		var l autorebootv1alpha1.RebootPolicyList
		if err := k8s.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
			return -1
		}
		for _, it := range l.Items {
			for _, ps := range it.Status.Policies {
				if ps.Reason == autorebootv1alpha1.ReasonTooManyProbes {
					refused++
				}
			}
		}
		return refused
	}, timeout, interval).Should(Equal(n - limit))
	// Some periods later, still the same 100.
	start := time.Now()
	g.Consistently(running, 3*time.Second, 100*time.Millisecond).Should(Equal(want))
	t.Logf("after %v: most %d running at once, least %d once 100 had run", time.Since(start).Round(time.Second), most.Load(), least.Load())
	g.Expect(most.Load()).To(BeNumerically("<=", limit), "more workers than the limit ran at some moment")
}
