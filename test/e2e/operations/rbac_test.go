package operations

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the test's own writes
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// TestRunsAsServiceAccount runs the manager with every controller,
// authenticated with a token of the ServiceAccount config/rbac binds, and
// drives one scenario per controller through it. The apiserver authorizes
// with RBAC, so each request the manager makes is checked against the
// ClusterRole generated from the markers and the leader election Role;
// any missing permission shows as a "forbidden" error in its logs or as a
// scenario that never converges.
func TestRunsAsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	// Positive control: the token is really least-privileged, so a pass
	// below means something.
	out, err := kubectlAs(ctx, saKubeconfig, "auth", "can-i", "list", "secrets", "--all-namespaces")
	g.Expect(err).To(HaveOccurred(), "the ServiceAccount may list Secrets cluster-wide: %s", out)
	g.Expect(out).To(Equal("no"))
	out, err = kubectlAs(ctx, saKubeconfig, "auth", "can-i", "patch", "deployments.apps", "--all-namespaces")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("yes"))
	out, err = kubectlAs(ctx, saKubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("system:serviceaccount:" + systemNamespace + ":" + serviceAccount))

	t.Setenv("POD_NAMESPACE", systemNamespace)
	leaseID := "ops-sa-" + suffix()
	m := startManager(t, saKubeconfig, "--controllers=all", "--leader-elect",
		"--leader-election-namespace="+systemNamespace, "--leader-election-id="+leaseID)
	g.Eventually(func(g Gomega) { g.Expect(leaseHolder(g, leaseID)).NotTo(BeEmpty()) }, timeout, poll).Should(Succeed())

	t.Run("Memcached", func(t *testing.T) {
		g := NewWithT(t)
		ns := createNamespace(t, "sa-mc-"+suffix())
		createMemcached(g, ns, "cache", 3)
		start := time.Now()
		g.Eventually(func(g Gomega) { memcachedSettled(g, ns, "cache", 3) }, timeout, poll).Should(Succeed())
		t.Logf("Memcached Available with 3 servers after %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("NSScaler", func(t *testing.T) {
		g := NewWithT(t)
		prefix := "sa-park-" + suffix() + "-"
		ns := createNamespace(t, prefix+"a")
		want := map[string]int32{"web": 3, "api": 1}
		for name, n := range want {
			g.Expect(k8s.Create(ctx, deployment(ns, name, n))).To(Succeed())
		}
		scaler := &scalingv1alpha1.NSScaler{
			ObjectMeta: metav1.ObjectMeta{Name: strings.TrimSuffix(prefix, "-")},
			Spec:       scalingv1alpha1.NSScalerSpec{NamespacePrefix: prefix},
		}
		g.Expect(k8s.Create(ctx, scaler)).To(Succeed())
		g.Eventually(func(g Gomega) {
			var s scalingv1alpha1.NSScaler
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: scaler.Name}, &s)).To(Succeed())
			g.Expect(s.Status.Done).To(BeTrue())
			g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(len(want))))
			g.Expect(s.Status.PodsRemaining).To(BeZero())
			for name, n := range want {
				var d appsv1.Deployment
				g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d)).To(Succeed())
				g.Expect(*d.Spec.Replicas).To(BeZero())
				g.Expect(originalReplicas(g, &d)).To(Equal(n))
			}
		}, timeout, poll).Should(Succeed())
		g.Expect(k8s.Delete(ctx, scaler)).To(Succeed())
		g.Eventually(func(g Gomega) {
			err := k8s.Get(ctx, types.NamespacedName{Name: scaler.Name}, &scalingv1alpha1.NSScaler{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NSScaler still there: %v", err)
			for name, n := range want {
				var d appsv1.Deployment
				g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d)).To(Succeed())
				g.Expect(*d.Spec.Replicas).To(Equal(n))
				g.Expect(d.Annotations).NotTo(HaveKey(originalAnnotation))
				g.Expect(d.Status.ReadyReplicas).To(Equal(n))
			}
		}, timeout, poll).Should(Succeed())
	})

	t.Run("RebootPolicy", func(t *testing.T) {
		g := NewWithT(t)
		ns := createNamespace(t, "sa-rbp-"+suffix())
		// An sql trigger reads its DSN from a Secret (get only) and queries
		// PostgreSQL; a watch trigger reads a ConfigMap.
		table := "ops_sa_" + strings.ReplaceAll(ns, "-", "_")
		db, err := sql.Open("pgx", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		g.Expect(err).NotTo(HaveOccurred())
		defer db.Close()
		_, err = db.ExecContext(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, v text)")
		g.Expect(err).NotTo(HaveOccurred(), "PostgreSQL on 127.0.0.1:5432 (trust, db test) is required")
		t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
		_, err = db.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1, 'a')")
		g.Expect(err).NotTo(HaveOccurred())
		// The DSN's user may only read the table: the manager refuses
		// more powerful ones (DSNTooPowerful).
		for _, q := range []string{"CREATE ROLE " + table + " LOGIN", "GRANT SELECT ON " + table + " TO " + table} {
			_, err = db.ExecContext(ctx, q)
			g.Expect(err).NotTo(HaveOccurred(), q)
		}
		t.Cleanup(func() {
			// db is closed by then (deferred above).
			admin, err := sql.Open("pgx", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
			if err != nil {
				return
			}
			defer admin.Close()
			_, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
			_, _ = admin.ExecContext(context.Background(), "DROP OWNED BY "+table)
			_, _ = admin.ExecContext(context.Background(), "DROP ROLE IF EXISTS "+table)
		})
		g.Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
			StringData: map[string]string{"dsn": "postgres://" + table + "@127.0.0.1:5432/test?sslmode=disable"},
		})).To(Succeed())
		setConfigMap(g, ns, "settings", "1")
		g.Expect(k8s.Create(ctx, deployment(ns, "web", 2))).To(Succeed())
		rbp := watchPolicy(ns, "web", "web", "settings")
		rbp.Spec.Policies = append(rbp.Spec.Policies, autorebootv1alpha1.Policy{
			Name: "table",
			Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{
				Driver:         autorebootv1alpha1.DriverPostgres,
				DSNSecretRef:   autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"},
				Query:          "SELECT id, v FROM " + table + " ORDER BY id",
				PeriodSeconds:  1,
				TimeoutSeconds: 1,
			}},
		})
		g.Expect(k8s.Create(ctx, rbp)).To(Succeed())
		waitBaseline(t, ns, "web")
		g.Eventually(func(g Gomega) {
			g.Expect(replicaSets(g, ns, "web")).To(Equal(1))
			rbp := getRBP(g, ns, "web")
			g.Expect(meta.IsStatusConditionTrue(rbp.Status.Conditions, autorebootv1alpha1.ConditionReady)).To(BeTrue())
		}, timeout, poll).Should(Succeed())
		expectRestarts(g, ns, "web", "web", 0)

		setConfigMap(g, ns, "settings", "2")
		g.Eventually(func(g Gomega) { expectRestarts(g, ns, "web", "web", 1) }, timeout, poll).Should(Succeed())
		// Wait for the rollout to finish so the next restart is not merely
		// pending behind it.
		g.Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &d)).To(Succeed())
			g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(2)))
			g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
			g.Expect(d.Status.Replicas).To(Equal(int32(2)))
		}, timeout, poll).Should(Succeed())
		_, err = db.ExecContext(ctx, "UPDATE "+table+" SET v = 'b' WHERE id = 1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) { expectRestarts(g, ns, "web", "web", 2) }, timeout, poll).Should(Succeed())
		g.Consistently(func(g Gomega) { expectRestarts(g, ns, "web", "web", 2) }, 5*time.Second, time.Second).Should(Succeed())
	})

	g.Expect(m.Logs()).NotTo(MatchRegexp(rbacDenied.String()), "a request of the manager was refused by RBAC")
	select {
	case <-m.Exited():
		t.Fatalf("the manager exited:\n%s", m.Logs())
	default:
	}
}
