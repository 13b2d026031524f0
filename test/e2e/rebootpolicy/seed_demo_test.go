package rebootpolicy

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestSeedDemo is the seed's acceptance scenario: nginx restarts when a row
// of demo_tbl in MariaDB changes, and not before.
func TestSeedDemo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	// demo_tbl lives in a database of its own so parallel runs never share it.
	dbName := "rbp_e2e_" + suffix()
	root, err := mysql.NewConnector(&mysql.Config{User: "root", Net: "tcp", Addr: "127.0.0.1:3306", AllowNativePasswords: true})
	g.Expect(err).NotTo(HaveOccurred())
	admin := sql.OpenDB(root)
	defer admin.Close()
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+dbName)
	g.Expect(err).NotTo(HaveOccurred(), "MariaDB on 127.0.0.1:3306 (root, no password) is required")
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE "+dbName)
		_, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS '"+dbName+"'@'%'")
	})
	dsn := dbName + ":pw-" + dbName + "@tcp(127.0.0.1:3306)/" + dbName
	for _, q := range []string{
		"CREATE TABLE " + dbName + ".demo_tbl (id INT PRIMARY KEY, name VARCHAR(64))",
		"INSERT INTO " + dbName + ".demo_tbl (id, name) VALUES (1, 'aaa'), (2, 'bbb')",
		// The DSN's user may only read, as make demo's: the manager refuses
		// more powerful ones.
		"CREATE USER '" + dbName + "'@'%' IDENTIFIED BY 'pw-" + dbName + "'",
		"GRANT SELECT ON " + dbName + ".* TO '" + dbName + "'@'%'",
	} {
		_, err := admin.ExecContext(ctx, q)
		g.Expect(err).NotTo(HaveOccurred(), q)
	}

	ns := createNamespace(t, "demo")
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-db", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		StringData: map[string]string{"dsn": dsn},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, nginxDeployment(ns, "nginx", 3))).To(Succeed())
	before := waitRunning(t, ns, "nginx", 3)

	g.Expect(k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nginx-on-demo-tbl"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target: autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment, Name: "nginx"},
			Policies: []autorebootv1alpha1.Policy{{
				Name:    "demo-tbl",
				Comment: "restart nginx when demo_tbl changes",
				Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{
					Driver:         autorebootv1alpha1.DriverMySQL,
					DSNSecretRef:   autorebootv1alpha1.SecretKeySelector{Name: "demo-db", Key: "dsn"},
					Query:          "SELECT id, name FROM demo_tbl ORDER BY id",
					PeriodSeconds:  5,
					TimeoutSeconds: 3,
				}},
			}},
		},
	})).To(Succeed())
	waitBaseline(t, ns, "nginx-on-demo-tbl")

	// No restart before the change: three more periods, same pods.
	g.Consistently(func(g Gomega) {
		g.Expect(restartCount(g, ns, "nginx-on-demo-tbl")).To(BeZero())
		running, _ := runningPods(g, ns, "nginx")
		g.Expect(running).To(Equal(before))
	}, 15*time.Second, time.Second).Should(Succeed())

	_, err = admin.ExecContext(ctx, "UPDATE "+dbName+".demo_tbl SET name='ccc' WHERE id=1")
	g.Expect(err).NotTo(HaveOccurred())

	after := waitReplaced(t, ns, "nginx", 3, before)
	t.Logf("pods before %v, after %v", before, after)
	var dep appsv1.Deployment
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Annotations).To(HaveKey(autorebootv1alpha1.RestartedAtAnnotation))

	// Exactly one restart, and it stays one.
	g.Consistently(func(g Gomega) {
		g.Expect(restartCount(g, ns, "nginx-on-demo-tbl")).To(Equal(int64(1)))
	}, 15*time.Second, time.Second).Should(Succeed())
	running, _ := runningPods(g, ns, "nginx")
	g.Expect(running).To(Equal(after))
	rbp := getRBP(g, ns, "nginx-on-demo-tbl")
	g.Expect(rbp.Status.Policies[0].LastTriggerTime).NotTo(BeNil())
	g.Expect(rbp.Status.Policies[0].PendingTrigger).To(BeFalse())
	g.Expect(mgr.Logs()).NotTo(ContainSubstring(dsn), "the DSN leaked into the logs")
}
