package rebootpolicy

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestHostileStatementsReachNothing: a tenant's sql triggers try to run a
// program, write files, take locks that outlive the statement and end
// another session on the database host, through a DSN whose user may only
// read and through the machine's superusers. The files in /tmp (the
// servers run on this machine), the servers' locks and the victim session
// show that nothing happened; the superuser DSN itself is refused
// (DSNTooPowerful).
func TestHostileStatementsReachNothing(t *testing.T) {
	for _, dbc := range databases {
		t.Run(string(dbc.driver), func(t *testing.T) {
			g := NewWithT(t)
			admin := plainDB(t, dbc.driver, dbc.dsn, nil)
			file := "/tmp/rbp_effect_" + suffix() + suffix()
			key := 600000 + time.Now().Nanosecond()%100000
			lock := "rbp_lock_" + suffix()
			victim, err := admin.Conn(context.Background())
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = victim.Close() })
			var victimID int64
			idQuery := "SELECT pg_backend_pid()"
			if dbc.driver == autorebootv1alpha1.DriverMySQL {
				idQuery = "SELECT CONNECTION_ID()"
			}
			g.Expect(victim.QueryRowContext(context.Background(), idQuery).Scan(&victimID)).To(Succeed())
			attacks := map[string]string{
				"program":   "COPY (SELECT 1) TO PROGRAM 'touch " + file + "-program'",
				"file":      "COPY (SELECT 1) TO '" + file + "-file'",
				"lock":      fmt.Sprintf("SELECT pg_advisory_lock(%d)", key),
				"terminate": fmt.Sprintf("SELECT pg_terminate_backend(%d)", victimID),
				"sleep":     "SELECT pg_sleep(60)",
			}
			if dbc.driver == autorebootv1alpha1.DriverMySQL {
				attacks = map[string]string{
					"outfile":  "SELECT 1 INTO OUTFILE '" + file + "-outfile'",
					"dumpfile": "SELECT 1 INTO DUMPFILE '" + file + "-dumpfile'",
					"comment":  "SELECT 1 /*M! INTO OUTFILE '" + file + "-comment' */",
					"lock":     "SELECT GET_LOCK('" + lock + "', 0)",
					"kill":     fmt.Sprintf("KILL %d", victimID),
					"sleep":    "SELECT SLEEP(60)",
				}
			}
			// One namespace per attack: the suite's manager runs at most
			// maxPerNamespace policies in one.
			reader := readOnlyUser(t, dbc.driver)
			probes := 0
			for name, q := range attacks {
				ns := createNamespace(t, "effects-"+name)
				createUsableSecret(t, ns, "reader", map[string]string{"dsn": reader})
				createUsableSecret(t, ns, "super", map[string]string{"dsn": dbc.dsn})
				g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
					sqlPolicy("reader", dbc.driver, "reader", q), sqlPolicy("super", dbc.driver, "super", q),
					sqlPolicy("super-select", dbc.driver, "super", "SELECT 1")))).To(Succeed())
				probes += 3
				defer func() {
					g.Expect(visibleText(t, ns)).NotTo(ContainSubstring(file), "the query text reached status, an event or a log")
				}()
				expectError(t, ns, "rbp", "super-select", autorebootv1alpha1.ReasonDSNTooPowerful)
				if name == "comment" {
					// MariaDB's executable comment is not SQL to the parser:
					// what runs is the statement without it.
					continue
				}
				for _, p := range []string{"reader", "super"} {
					ps := expectError(t, ns, "rbp", p, autorebootv1alpha1.ReasonQueryNotAllowed)
					g.Expect(ps.Message).To(HavePrefix("query refused before it was sent"), name+"/"+p)
				}
			}
			// Every attack runs a few more times.
			waitProbes(t, typeSQL, 3*probes)
			for name := range attacks {
				_, err := os.Stat(file + "-" + name)
				g.Expect(os.IsNotExist(err)).To(BeTrue(), "%s: the database host has %s-%s", name, file, name)
			}
			held := fmt.Sprintf("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %d", key)
			if dbc.driver == autorebootv1alpha1.DriverMySQL {
				held = "SELECT IS_USED_LOCK('" + lock + "') IS NOT NULL"
			}
			var n int
			g.Expect(admin.QueryRow(held).Scan(&n)).To(Succeed())
			g.Expect(n).To(BeZero(), "a lock outlived the probe")
			var again int64
			g.Expect(victim.QueryRowContext(context.Background(), idQuery).Scan(&again)).To(Succeed(), "the victim session was ended")
			g.Expect(again).To(Equal(victimID))
		})
	}
}

// TestRevokedSecretStopsTheTrigger: removing the usable label from a
// working sql trigger's Secret stops it at its next period
// (SecretNotUsable) and nothing fires while it is off, not even for a
// change of the table; labelling the Secret again resumes from the kept
// baseline without a restart; deleting the Secret stops it too.
func TestRevokedSecretStopsTheTrigger(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "revoke")
	admin := plainDB(t, autorebootv1alpha1.DriverPostgres, postgreDSN, nil)
	table := "rbp_revoke_" + suffix()
	mustExec(t, admin, "CREATE TABLE "+table+" (id int PRIMARY KEY, v text)")
	t.Cleanup(func() { _, _ = admin.Exec("DROP TABLE IF EXISTS " + table) })
	mustExec(t, admin, "INSERT INTO "+table+" VALUES (1, 'a')")
	createUsableSecret(t, ns, "db", map[string]string{"dsn": readOnlyUser(t, autorebootv1alpha1.DriverPostgres, "GRANT SELECT ON "+table+" TO %u")})
	deploy := newDeployment(ns, "web")
	g.Expect(k8s.Create(context.Background(), deploy)).To(Succeed())
	markRolledOut(t, deploy)
	policy := sqlPolicy("table", autorebootv1alpha1.DriverPostgres, "db", "SELECT id, v FROM "+table+" ORDER BY id")
	policy.Trigger.SQL.PeriodSeconds, policy.Trigger.SQL.TimeoutSeconds = 1, 1
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, policy))).To(Succeed())
	g.Eventually(func() string { return policyStatus(t, ns, "rbp", "table").Fingerprint }, timeout, interval).ShouldNot(BeEmpty())
	baseline := policyStatus(t, ns, "rbp", "table").Fingerprint

	setUsable := func(on bool) {
		var s corev1.Secret
		g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "db"}, &s)).To(Succeed())
		s.Labels = nil
		if on {
			s.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
		}
		g.Expect(k8s.Update(context.Background(), &s)).To(Succeed())
	}
	revoked := time.Now()
	setUsable(false)
	expectError(t, ns, "rbp", "table", autorebootv1alpha1.ReasonSecretNotUsable)
	t.Logf("SecretNotUsable %v after the label was removed (period 1s)", time.Since(revoked).Round(100*time.Millisecond))
	// Changed while consent is withdrawn: the manager does not look.
	mustExec(t, admin, "UPDATE "+table+" SET v = 'b'")
	waitProbes(t, typeSQL, 3)
	mustExec(t, admin, "UPDATE "+table+" SET v = 'a'")
	g.Expect(policyStatus(t, ns, "rbp", "table").Fingerprint).To(Equal(baseline), "the baseline was dropped")

	setUsable(true)
	g.Eventually(func() string {
		ps := policyStatus(t, ns, "rbp", "table")
		return ps.LastResult + "/" + ps.Message
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ResultSuccess + "/unchanged"))
	waitProbes(t, typeSQL, 3)
	g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "web"}, deploy)).To(Succeed())
	g.Expect(restartedAt(deploy)).To(BeEmpty(), "labelling the Secret again restarted the target")
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(BeZero())

	var s corev1.Secret
	g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "db"}, &s)).To(Succeed())
	g.Expect(k8s.Delete(context.Background(), &s)).To(Succeed())
	expectError(t, ns, "rbp", "table", autorebootv1alpha1.ReasonSecretNotUsable)
}

// TestAdminFlagAcceptsPowerfulDSNUsers: the manager binary started with
// --sql-allow-powerful-users runs a policy whose DSN user is the
// PostgreSQL superuser, which the suite's manager (without the flag)
// refuses as DSNTooPowerful; the statement check still holds.
func TestAdminFlagAcceptsPowerfulDSNUsers(t *testing.T) {
	g := NewWithT(t)
	bin, kubeconfig := managerBinary(t)
	ns := createNamespace(t, "powerful")
	createUsableSecret(t, ns, "super", map[string]string{"dsn": postgreDSN})
	m := startBinary(t, bin, kubeconfig, ns, "--sql-allow-powerful-users", "--probe-allow=127.0.0.1:5432")
	defer func() {
		g.Expect(m.Stop()).To(Succeed())
		m.DumpLogsOnFailure(t.Failed())
	}()
	file := "/tmp/rbp_flag_" + suffix() + suffix()
	allowed := newRBP(ns, "allowed", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		sqlPolicy("select", autorebootv1alpha1.DriverPostgres, "super", "SELECT 1"),
		sqlPolicy("program", autorebootv1alpha1.DriverPostgres, "super", "COPY (SELECT 1) TO PROGRAM 'touch "+file+"'"))
	allowed.Labels = map[string]string{externalManagerLabel: "binary"}
	g.Expect(createRBP(t, allowed)).To(Succeed())
	// The binary reconciles everything in its namespace: the suite
	// manager's case lives in another one.
	other := createNamespace(t, "powerful-refused")
	createUsableSecret(t, other, "super", map[string]string{"dsn": postgreDSN})
	g.Expect(createRBP(t, newRBP(other, "refused", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		sqlPolicy("select", autorebootv1alpha1.DriverPostgres, "super", "SELECT 1")))).To(Succeed())

	g.Eventually(func() string {
		ps := policyStatus(t, ns, "allowed", "select")
		return ps.LastResult + "/" + ps.Reason
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ResultSuccess+"/"), "the flag did not accept the superuser")
	expectError(t, ns, "allowed", "program", autorebootv1alpha1.ReasonQueryNotAllowed)
	expectError(t, other, "refused", "select", autorebootv1alpha1.ReasonDSNTooPowerful)
	_, err := os.Stat(file)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "COPY TO PROGRAM ran with the admin's flag")
}
