package operations

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
)

// leaderElectionArgs are the flags of a manager replica with leader
// election, as config/default runs it, with the given Lease timings.
func leaderElectionArgs(leaseID string, lease, renew, retry time.Duration) []string {
	return []string{
		"--leader-elect", "--leader-election-namespace=" + systemNamespace, "--leader-election-id=" + leaseID,
		"--leader-election-lease-duration=" + lease.String(),
		"--leader-election-renew-deadline=" + renew.String(),
		"--leader-election-retry-period=" + retry.String(),
	}
}

// startPair starts a first manager, waits until it holds the Lease, then
// starts a standby. It returns both and the leader's identity.
func startPair(t *testing.T, leaseID string, args ...string) (leader, standby *cluster.Manager, leaderID string) {
	t.Helper()
	g := NewWithT(t)
	leader = startManager(t, saKubeconfig, args...)
	g.Eventually(func(g Gomega) {
		leaderID = leaseHolder(g, leaseID)
		g.Expect(leaderID).NotTo(BeEmpty())
	}, timeout, 100*time.Millisecond).Should(Succeed())
	standby = startManager(t, saKubeconfig, args...)
	// The standby is ready (caches synced) but does not take the Lease.
	g.Consistently(func(g Gomega) { g.Expect(leaseHolder(g, leaseID)).To(Equal(leaderID)) }, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(standby.Logs()).NotTo(ContainSubstring("Starting workers"), "the standby started its controllers")
	return leader, standby, leaderID
}

// parkWatcher follows every Deployment in the namespaces with a prefix and
// reports how many have been scaled to 0.
type parkWatcher struct {
	mu        sync.Mutex
	replicas  map[string]int32
	threshold int
	reached   chan struct{}
	once      sync.Once
}

// watchParking closes reached once threshold Deployments are at 0.
func watchParking(t *testing.T, prefix string, threshold int) *parkWatcher {
	t.Helper()
	wc, err := client.NewWithWatch(kc.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &appsv1.DeploymentList{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); cancel() })
	pw := &parkWatcher{replicas: map[string]int32{}, threshold: threshold, reached: make(chan struct{})}
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || !strings.HasPrefix(d.Namespace, prefix) || ev.Type == watch.Deleted {
				continue
			}
			pw.mu.Lock()
			pw.replicas[d.Namespace+"/"+d.Name] = *d.Spec.Replicas
			pw.mu.Unlock()
			if pw.parked() >= pw.threshold {
				pw.once.Do(func() { close(pw.reached) })
			}
		}
	}()
	return pw
}

// watchRestartPatch reports the first of the named Deployments whose pod
// template gets a restartedAt annotation.
func watchRestartPatch(t *testing.T, ns string, names []string) <-chan string {
	t.Helper()
	wc, err := client.NewWithWatch(kc.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); cancel() })
	first := make(chan string, 1)
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || !slices.Contains(names, d.Name) || d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] == "" {
				continue
			}
			first <- d.Name
			return
		}
	}()
	return first
}

func (pw *parkWatcher) parked() int {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	n := 0
	for _, r := range pw.replicas {
		if r == 0 {
			n++
		}
	}
	return n
}

// TestLeaderFailover SIGKILLs the leader of two managers in the middle of
// an NSScaler park of 100 Deployments, right after the ConfigMaps watched by
// four RebootPolicies changed. The standby must take the Lease over within
// one lease duration (plus slack), finish the park with every original
// replica count recorded correctly, restart each RebootPolicy's target
// exactly once for its one change, and restore every Deployment exactly
// when the NSScaler is deleted.
func TestLeaderFailover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Setenv("POD_NAMESPACE", systemNamespace)
	const (
		// The production defaults. Shorter timings (6s/4s/1s were tried)
		// make the new leader lose its Lease on this loaded machine: each
		// renewal request may take only renew/2, and the apiserver answered
		// slower than 2 s while ~200 pods were being deleted.
		lease = 15 * time.Second
		renew = 10 * time.Second
		retry = 2 * time.Second
		// The standby measures expiry from when it *observed* the last
		// renewal (up to one jittered retry period, ×1.2, after it was
		// made) and acquires at its next jittered tick: lease + 2×1.2×retry
		// at worst, plus request latency on a loaded machine.
		slack       = 2*retry*12/10 + 3*time.Second
		namespaces  = 10
		perNS       = 10
		deployments = namespaces * perNS
		policies    = 4
	)

	// 100 Deployments with 1 to 3 replicas in ten namespaces.
	sfx := suffix()
	prefix := "fo-" + sfx + "-"
	want := map[string]int32{}
	for i := range namespaces {
		ns := createNamespace(t, fmt.Sprintf("%s%02d", prefix, i))
		for j := range perNS {
			n := int32(1 + (i*perNS+j)%3)
			name := fmt.Sprintf("app-%02d", j)
			g.Expect(k8s.Create(ctx, deployment(ns, name, n))).To(Succeed())
			want[ns+"/"+name] = n
		}
	}
	// RebootPolicies probing (every second, each worker with its own start
	// jitter) across the failover, one Deployment each.
	rbpNS := createNamespace(t, "fo-rbp-"+sfx)
	var webs []string
	for i := range policies {
		web := fmt.Sprintf("web-%d", i)
		webs = append(webs, web)
		setConfigMap(g, rbpNS, web, "1")
		g.Expect(k8s.Create(ctx, deployment(rbpNS, web, 1))).To(Succeed())
		g.Expect(k8s.Create(ctx, watchPolicy(rbpNS, web, web, web))).To(Succeed())
	}

	leaseID := "ops-failover-" + sfx
	// One write in flight, ten a second: the park of 100 Deployments takes
	// about 10 s, long enough to be caught in the middle whatever the
	// machine's speed.
	args := append(leaderElectionArgs(leaseID, lease, renew, retry),
		"--controllers=nsscaler,rebootpolicy", "--nsscaler-write-concurrency=1", "--nsscaler-write-qps=10")
	leader, standby, leaderID := startPair(t, leaseID, args...)
	for _, web := range webs {
		waitBaseline(t, rbpNS, web)
		g.Eventually(func(g Gomega) { g.Expect(replicaSets(g, rbpNS, web)).To(Equal(1)) }, timeout, poll).Should(Succeed())
	}

	// The old leader restarts web-0 for its change; the new one must not
	// do it again.
	setConfigMap(g, rbpNS, webs[0], "2")
	g.Eventually(func(g Gomega) { expectRestarts(g, rbpNS, webs[0], webs[0], 1) }, timeout, poll).Should(Succeed())

	// The leader dies with about a fifth of the park done.
	pw := watchParking(t, prefix, deployments/5)
	scaler := &scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: "fo-" + sfx},
		Spec:       scalingv1alpha1.NSScalerSpec{NamespacePrefix: prefix},
	}
	g.Expect(k8s.Create(ctx, scaler)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), scaler) })
	select {
	case <-pw.reached:
	case <-time.After(timeout):
		t.Fatalf("fewer than %d Deployments were parked within %s", pw.threshold, timeout)
	}
	// The other policies' changes land just before the kill, which comes
	// the moment the old leader's first restart patch for them is seen:
	// restarts are in flight when the leader dies (fire persisted or not,
	// target patched or not, status written or not). Whatever the instant,
	// the new leader must act on each change exactly once.
	firstPatch := watchRestartPatch(t, rbpNS, webs[1:])
	for _, web := range webs[1:] {
		setConfigMap(g, rbpNS, web, "2")
	}
	select {
	case web := <-firstPatch:
		t.Logf("the old leader's restart patch of %s is in: killing it now", web)
	case <-time.After(timeout):
		t.Fatalf("the leader restarted none of %v within %s", webs[1:], timeout)
	}
	leader.Kill()
	killedAt := time.Now()
	parkedAtKill := pw.parked()
	t.Logf("SIGKILLed the leader %s (pid %d) with %d/%d Deployments parked", leaderID, leader.Pid(), parkedAtKill, deployments)
	g.Expect(parkedAtKill).To(BeNumerically("<", deployments), "the park finished before the kill: nothing was tested")

	var newID string
	g.Eventually(func(g Gomega) {
		newID = leaseHolder(g, leaseID)
		g.Expect(newID).NotTo(BeEmpty())
		g.Expect(newID).NotTo(Equal(leaderID))
	}, lease+slack+5*time.Second, 50*time.Millisecond).Should(Succeed())
	takeover := time.Since(killedAt)
	t.Logf("the standby %s took the Lease over %s after the SIGKILL (lease duration %s)", newID, takeover.Round(10*time.Millisecond), lease)
	g.Expect(takeover).To(BeNumerically("<=", lease+slack), "takeover slower than one lease duration plus %s", slack)

	// The new leader finishes the park; every original is right.
	start := time.Now()
	g.Eventually(func(g Gomega) {
		var s scalingv1alpha1.NSScaler
		g.Expect(k8s.Get(ctx, types.NamespacedName{Name: scaler.Name}, &s)).To(Succeed())
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(deployments)))
		g.Expect(s.Status.Done).To(BeTrue())
		var l appsv1.DeploymentList
		g.Expect(k8s.List(ctx, &l)).To(Succeed())
		seen := 0
		for i := range l.Items {
			d := &l.Items[i]
			n, ok := want[d.Namespace+"/"+d.Name]
			if !ok {
				continue
			}
			seen++
			g.Expect(*d.Spec.Replicas).To(BeZero(), "%s/%s", d.Namespace, d.Name)
			g.Expect(originalReplicas(g, d)).To(Equal(n), "original of %s/%s", d.Namespace, d.Name)
		}
		g.Expect(seen).To(Equal(deployments))
	}, timeout, poll).Should(Succeed())
	t.Logf("the new leader finished the park %s after the takeover", time.Since(start).Round(time.Millisecond))

	// Exactly one restart per change, across the failover.
	stamps := map[string]string{}
	for _, web := range webs {
		g.Eventually(func(g Gomega) {
			expectRestarts(g, rbpNS, web, web, 1)
			stamps[web] = restartedAt(g, rbpNS, web)
			g.Expect(stamps[web]).NotTo(BeEmpty())
		}, timeout, poll).Should(Succeed())
		at, err := time.Parse(time.RFC3339, stamps[web])
		g.Expect(err).NotTo(HaveOccurred())
		who := "the new leader"
		switch killed := killedAt.Truncate(time.Second); {
		case at.Before(killed):
			who = "the old leader, before it died"
		case at.Equal(killed):
			who = "either leader (the second of the kill)"
		}
		t.Logf("%s restarted at %s by %s (SIGKILL at %s)", web, stamps[web], who, killedAt.UTC().Format(time.RFC3339Nano))
	}
	if n := strings.Count(standby.Logs(), "restart for this trigger already done, recorded it"); n > 0 {
		t.Logf("the new leader recognised %d restart(s) the old one made but did not record, by their restart id", n)
	}
	g.Consistently(func(g Gomega) {
		for _, web := range webs {
			expectRestarts(g, rbpNS, web, web, 1)
			g.Expect(restartedAt(g, rbpNS, web)).To(Equal(stamps[web]))
		}
	}, 10*time.Second, 500*time.Millisecond).Should(Succeed())

	// Deleting the NSScaler restores every Deployment exactly.
	g.Expect(k8s.Delete(ctx, scaler)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, types.NamespacedName{Name: scaler.Name}, &scalingv1alpha1.NSScaler{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NSScaler still there: %v", err)
		var l appsv1.DeploymentList
		g.Expect(k8s.List(ctx, &l)).To(Succeed())
		seen := 0
		for _, d := range l.Items {
			n, ok := want[d.Namespace+"/"+d.Name]
			if !ok {
				continue
			}
			seen++
			g.Expect(*d.Spec.Replicas).To(Equal(n), "%s/%s", d.Namespace, d.Name)
			g.Expect(d.Annotations).NotTo(HaveKey(originalAnnotation))
		}
		g.Expect(seen).To(Equal(deployments))
	}, timeout, poll).Should(Succeed())

	g.Expect(leader.Logs()+standby.Logs()).NotTo(MatchRegexp(rbacDenied.String()), "a request of a manager was refused by RBAC")
	select {
	case <-standby.Exited():
		t.Fatalf("the new leader exited:\n%s", standby.Logs())
	default:
	}
}

// TestSIGTERMReleasesLease stops the leader gracefully: it gives the Lease
// up as it exits, so the standby takes over within a retry period instead
// of waiting out the 15 s lease duration.
func TestSIGTERMReleasesLease(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("POD_NAMESPACE", systemNamespace)
	const (
		lease = 15 * time.Second
		retry = 2 * time.Second
	)
	leaseID := "ops-sigterm-" + suffix()
	args := append(leaderElectionArgs(leaseID, lease, 10*time.Second, retry), "--controllers=all")
	leader, standby, leaderID := startPair(t, leaseID, args...)

	stopped := make(chan error, 1)
	termAt := time.Now()
	go func() { stopped <- leader.Stop() }()
	var newID string
	var releasedAfter time.Duration
	g.Eventually(func(g Gomega) {
		newID = leaseHolder(g, leaseID)
		if newID != leaderID && releasedAfter == 0 {
			releasedAfter = time.Since(termAt)
		}
		g.Expect(newID).NotTo(BeEmpty())
		g.Expect(newID).NotTo(Equal(leaderID))
	}, lease, 50*time.Millisecond).Should(Succeed())
	handover := time.Since(termAt)
	var exitErr error
	select {
	case exitErr = <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("the leader did not exit within a minute of SIGTERM")
	}
	t.Logf("SIGTERM → Lease released after %s → standby %s holds it after %s (the old leader has exited by %s)",
		releasedAfter.Round(10*time.Millisecond), newID, handover.Round(10*time.Millisecond), time.Since(termAt).Round(10*time.Millisecond))
	g.Expect(exitErr).NotTo(HaveOccurred(), "the leader's exit after SIGTERM")
	// Without the release the standby would wait for the lease to expire:
	// 13–17 s after the SIGTERM. Released means far less: the old leader's
	// graceful stop, then one retry period of the standby.
	g.Expect(releasedAfter).To(BeNumerically("<", lease/2), "the Lease was not released at exit")
	g.Expect(handover).To(BeNumerically("<", lease*2/3), "handover after SIGTERM waited for the lease to expire")
	g.Eventually(func() string { return standby.Logs() }, timeout, poll).Should(ContainSubstring("Starting workers"))
}
