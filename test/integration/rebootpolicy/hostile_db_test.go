package rebootpolicy

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/sqlguard"
)

// The hostile-input suite: a tenant who may create RebootPolicies (and
// Secrets) in its namespace tries to make the manager read its files,
// write to a database, leak data or exhaust it. Each test asserts the safe
// outcome and, where that can be checked, that the attack works without
// the defence (docs/security.md maps each case to its defence).

const (
	mariaDSN   = "root@tcp(127.0.0.1:3306)/test"
	postgreDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

var databases = []struct {
	driver autorebootv1alpha1.SQLDriver
	dsn    string
}{
	{autorebootv1alpha1.DriverMySQL, mariaDSN},
	{autorebootv1alpha1.DriverPostgres, postgreDSN},
}

// plainDB is a connection of the test itself, with the driver's defaults
// plus change (the "without the defence" control).
func plainDB(t *testing.T, driver autorebootv1alpha1.SQLDriver, dsn string, change func(*mysql.Config)) *sql.DB {
	t.Helper()
	var db *sql.DB
	if driver == autorebootv1alpha1.DriverMySQL {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if change != nil {
			change(cfg)
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db = sql.OpenDB(c)
	} else {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		db = stdlib.OpenDB(*cfg)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("%s on this machine is required (CI starts it): %v", driver, err)
	}
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// readOnlyUser creates a database user that may only read (what a probe
// needs; the manager refuses more powerful ones) and returns its DSN. The
// statements in grants run as the admin, %u standing for the user.
func readOnlyUser(t *testing.T, driver autorebootv1alpha1.SQLDriver, grants ...string) string {
	t.Helper()
	name := "rbp_probe_" + suffix() + suffix()
	if driver == autorebootv1alpha1.DriverMySQL {
		db := plainDB(t, driver, mariaDSN, nil)
		pw := "pw-" + suffix()
		mustExec(t, db, "CREATE USER '"+name+"'@'%' IDENTIFIED BY '"+pw+"'")
		t.Cleanup(func() { _, _ = db.Exec("DROP USER IF EXISTS '" + name + "'@'%'") })
		for _, g := range append([]string{"GRANT SELECT ON test.* TO %u"}, grants...) {
			mustExec(t, db, strings.ReplaceAll(g, "%u", "'"+name+"'@'%'"))
		}
		return name + ":" + pw + "@tcp(127.0.0.1:3306)/test"
	}
	db := plainDB(t, driver, postgreDSN, nil)
	mustExec(t, db, "CREATE ROLE "+name+" LOGIN")
	t.Cleanup(func() {
		_, _ = db.Exec("DROP OWNED BY " + name)
		_, _ = db.Exec("DROP ROLE IF EXISTS " + name)
	})
	for _, g := range grants {
		mustExec(t, db, strings.ReplaceAll(g, "%u", name))
	}
	return "postgres://" + name + "@127.0.0.1:5432/test?sslmode=disable"
}

// createUsableSecret creates a Secret that opts in to RebootPolicies.
func createUsableSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}}, StringData: data}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func sqlPolicy(name string, driver autorebootv1alpha1.SQLDriver, secret, query string) autorebootv1alpha1.Policy {
	return autorebootv1alpha1.Policy{Name: name, Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{
		Driver: driver, Query: query, PeriodSeconds: 2, TimeoutSeconds: 2,
		DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: secret, Key: "dsn"}}}}
}

// policyStatus waits until the policy has reported a result and returns it.
func policyStatus(t *testing.T, ns, name, policy string) autorebootv1alpha1.PolicyStatus {
	t.Helper()
	var out autorebootv1alpha1.PolicyStatus
	NewWithT(t).Eventually(func() string {
		for _, ps := range getRBP(t, ns, name).Status.Policies {
			if ps.Name == policy {
				out = ps
				return ps.LastResult
			}
		}
		return ""
	}, timeout, interval).ShouldNot(BeEmpty(), "policy %s/%s/%s never reported", ns, name, policy)
	return out
}

// expectError waits for the policy's Error result with reason.
func expectError(t *testing.T, ns, name, policy, reason string) autorebootv1alpha1.PolicyStatus {
	t.Helper()
	var out autorebootv1alpha1.PolicyStatus
	NewWithT(t).Eventually(func() string {
		out = policyStatus(t, ns, name, policy)
		return out.LastResult + "/" + out.Reason
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ResultError+"/"+reason), func() string {
		return fmt.Sprintf("policy %s: %+v", policy, out)
	})
	return out
}

// visibleText is everything the manager wrote that a tenant or an admin
// could read about namespace ns: status, events and its logs (not the
// spec, which is the tenant's own text).
func visibleText(t *testing.T, ns string) string {
	t.Helper()
	var l autorebootv1alpha1.RebootPolicyList
	if err := k8s.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var statuses []autorebootv1alpha1.RebootPolicyStatus
	for _, r := range l.Items {
		statuses = append(statuses, r.Status)
	}
	var ev eventsv1.EventList
	if err := k8s.List(context.Background(), &ev, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(struct {
		Policies any
		Events   any
	}{statuses, ev.Items})
	return string(b) + managerLogs.String()
}

func TestHostileLocalInfile(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "infile")
	marker := "MARKER-" + suffix() + suffix()
	file := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(file, []byte(marker+"\n"), 0o600)).To(Succeed())
	loot := "loot_" + suffix()
	db := plainDB(t, autorebootv1alpha1.DriverMySQL, mariaDSN, nil)
	mustExec(t, db, "CREATE TABLE "+loot+" (line TEXT)")
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE " + loot) })
	query := fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE %s", file, loot)

	// Without the defence: the plain driver with allowAllFiles uploads the
	// file (MariaDB has local_infile ON).
	open := plainDB(t, autorebootv1alpha1.DriverMySQL, mariaDSN, func(c *mysql.Config) { c.AllowAllFiles = true })
	mustExec(t, open, query)
	g.Expect(countRows(t, db, loot)).To(Equal(1), "control: LOAD DATA LOCAL did not read the file")
	mustExec(t, db, "DELETE FROM "+loot)

	createUsableSecret(t, ns, "files", map[string]string{"dsn": mariaDSN + "?allowAllFiles=true"})
	createUsableSecret(t, ns, "clean", map[string]string{"dsn": mariaDSN})
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		sqlPolicy("files", autorebootv1alpha1.DriverMySQL, "files", query),
		sqlPolicy("clean", autorebootv1alpha1.DriverMySQL, "clean", query)))).To(Succeed())

	refused := expectError(t, ns, "rbp", "files", autorebootv1alpha1.ReasonDSNNotAllowed)
	g.Expect(refused.Message).To(ContainSubstring("allowAllFiles"))
	clean := policyStatus(t, ns, "rbp", "clean")
	g.Expect(clean.LastResult).To(Equal(autorebootv1alpha1.ResultError), "%+v", clean)
	// Several periods later nothing reached the table or anything visible.
	waitProbes(t, typeSQL, 4)
	g.Expect(countRows(t, db, loot)).To(BeZero(), "the manager uploaded its file")
	g.Expect(visibleText(t, ns)).NotTo(ContainSubstring(marker))
}

func TestHostileWritesAreRefused(t *testing.T) {
	for _, dbc := range databases {
		t.Run(string(dbc.driver), func(t *testing.T) {
			g := NewWithT(t)
			ns := createNamespace(t, "writes")
			db := plainDB(t, dbc.driver, dbc.dsn, nil)
			victim := "victim_" + suffix()
			mustExec(t, db, "CREATE TABLE "+victim+" (id INT)")
			t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + victim) })
			mustExec(t, db, "INSERT INTO "+victim+" VALUES (1), (2), (3)")
			createUsableSecret(t, ns, "db", map[string]string{"dsn": dbc.dsn})
			attacks := map[string]string{
				"delete":   "DELETE FROM " + victim,
				"update":   "UPDATE " + victim + " SET id = 0",
				"drop":     "DROP TABLE " + victim,
				"truncate": "TRUNCATE TABLE " + victim,
				"multi":    "SELECT 1; DELETE FROM " + victim,
				"commit":   "COMMIT",
			}
			var policies []autorebootv1alpha1.Policy
			for name, q := range attacks {
				policies = append(policies, sqlPolicy(name, dbc.driver, "db", q))
			}
			g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, policies...))).To(Succeed())
			for name := range attacks {
				ps := policyStatus(t, ns, "rbp", name)
				if name != "commit" {
					g.Expect(ps.LastResult).To(Equal(autorebootv1alpha1.ResultError), "%s: %+v", name, ps)
				}
			}
			// Every attack runs at least twice more.
			waitProbes(t, typeSQL, 2*len(attacks))
			g.Expect(countRows(t, db, victim)).To(Equal(3), "rows were written through the manager")
			var ids int
			g.Expect(db.QueryRow("SELECT SUM(id) FROM " + victim).Scan(&ids)).To(Succeed())
			g.Expect(ids).To(Equal(6))

			// Control: the same DELETE through a plain connection deletes.
			mustExec(t, db, "DELETE FROM "+victim)
			g.Expect(countRows(t, db, victim)).To(BeZero())
		})
	}
}

func TestHostilePgxFileParameters(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "pgfiles")
	secretPath := "/tmp/SECRET-PATH-" + suffix()
	params := []string{"passfile", "servicefile", "sslrootcert", "sslkey", "sslcert", "options"}
	var policies []autorebootv1alpha1.Policy
	for _, p := range params {
		name := strings.ReplaceAll(p, "_", "-")
		dsn := fmt.Sprintf("host=127.0.0.1 user=postgres dbname=test sslmode=disable %s=%s", p, secretPath)
		if p == "options" {
			dsn = "host=127.0.0.1 user=postgres dbname=test options='-c default_transaction_read_only=off " + secretPath + "'"
		}
		createUsableSecret(t, ns, name, map[string]string{"dsn": dsn})
		policies = append(policies, sqlPolicy(name, autorebootv1alpha1.DriverPostgres, name, "SELECT 1"))
	}
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, policies...))).To(Succeed())
	for _, p := range params {
		ps := expectError(t, ns, "rbp", strings.ReplaceAll(p, "_", "-"), autorebootv1alpha1.ReasonDSNNotAllowed)
		g.Expect(ps.Message).To(ContainSubstring(p), "the refusal does not name the parameter")
	}
	g.Expect(visibleText(t, ns)).NotTo(ContainSubstring(secretPath), "a parameter's value leaked")
}

func TestHostileHugeRowAndResult(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "huge")
	createUsableSecret(t, ns, "pg", map[string]string{"dsn": readOnlyUser(t, autorebootv1alpha1.DriverPostgres)})
	createUsableSecret(t, ns, "maria", map[string]string{"dsn": readOnlyUser(t, autorebootv1alpha1.DriverMySQL)})
	// Loading PostgreSQL's parser (once per process) is not what this
	// test bounds.
	sqlguard.LoadParsers()
	peak, stop := sampleHeap()
	defer stop()
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		// Timeouts far above what the bounds need: on a starved machine a
		// query can outlive the default 5 s before the bound trips, and
		// this test is about the bound, not the timeout. The period equals
		// the timeout, and a worker's first probe waits for its slot in the
		// period (up to a period), so period plus timeout must fit in the
		// wait below (60 s): 20 s each. The row is 128 MiB (2,048 times the
		// 64 KiB bound, twice the heap growth allowed below): PostgreSQL
		// needs 8 s of one core just to build a 600 MB value on a slow
		// machine, and with the copy it makes to send it, such a row
		// outlived a 30 s timeout while other tests ran.
		withTimeout(sqlPolicy("row", autorebootv1alpha1.DriverPostgres, "pg", "SELECT repeat('x', 134217728)"), 20),
		withTimeout(sqlPolicy("result", autorebootv1alpha1.DriverPostgres, "pg", "SELECT repeat('x', 1000) FROM generate_series(1, 1000000)"), 20),
		withTimeout(sqlPolicy("maria", autorebootv1alpha1.DriverMySQL, "maria", "SELECT seq, REPEAT('x', 1000) FROM seq_1_to_1000000"), 20)))).To(Succeed())
	for _, p := range []string{"row", "result", "maria"} {
		ps := expectError(t, ns, "rbp", p, autorebootv1alpha1.ReasonResultTooLarge)
		g.Expect(ps.Message).To(HavePrefix("result too large"))
	}
	// The manager runs in this process: its heap never grew by anything
	// near the 128 MiB row or the 1 GB results.
	g.Expect(peak()).To(BeNumerically("<", 64<<20), "heap grew by %d MiB while the hostile queries ran", peak()>>20)
}

func withTimeout(p autorebootv1alpha1.Policy, seconds int32) autorebootv1alpha1.Policy {
	p.Trigger.SQL.TimeoutSeconds = seconds
	p.Trigger.SQL.PeriodSeconds = seconds
	return p
}

// sampleHeap samples the live heap every few milliseconds and reports the
// largest growth over the level at the start.
func sampleHeap() (peak func() uint64, stop func()) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var max atomic.Uint64
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > max.Load() {
				max.Store(m.HeapAlloc - base)
			}
		}
	}()
	return max.Load, func() { close(done) }
}

func TestHostileErrorText(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "errtext")
	secret := "s3cr3t-VALUE-" + suffix()
	createUsableSecret(t, ns, "pg", map[string]string{"dsn": readOnlyUser(t, autorebootv1alpha1.DriverPostgres)})
	createUsableSecret(t, ns, "maria", map[string]string{"dsn": readOnlyUser(t, autorebootv1alpha1.DriverMySQL)})
	wrongPassword := "WrongPassw0rd-" + suffix()
	createUsableSecret(t, ns, "badpw", map[string]string{"dsn": "root:" + wrongPassword + "@tcp(127.0.0.1:3306)/test"})
	g.Expect(createRBP(t, newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
		sqlPolicy("cast", autorebootv1alpha1.DriverPostgres, "pg", fmt.Sprintf("SELECT CAST('%s' AS int)", secret)),
		sqlPolicy("xpath", autorebootv1alpha1.DriverMySQL, "maria", fmt.Sprintf("SELECT EXTRACTVALUE('<a/>', '/%s[')", secret)),
		sqlPolicy("login", autorebootv1alpha1.DriverMySQL, "badpw", "SELECT 1")))).To(Succeed())
	cast := expectError(t, ns, "rbp", "cast", autorebootv1alpha1.ReasonQueryFailed)
	g.Expect(cast.Message).To(ContainSubstring("SQLSTATE 22P02"))
	policyStatus(t, ns, "rbp", "xpath")
	policyStatus(t, ns, "rbp", "login")
	text := visibleText(t, ns)
	g.Expect(text).NotTo(ContainSubstring(secret), "a value from the query reached status, an event or a log")
	g.Expect(text).NotTo(ContainSubstring(wrongPassword), "a password reached status, an event or a log")
}
