package sqlguard

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Hostile statements against the machine's real servers, through a user
// that may do only what a probe needs and through powerful ones. Each
// case checks the effect where it would show: a file of the database
// server in /tmp (the servers run on this machine), a lock or a session
// on the server, not only the error.

// dbUser is a login created for one test and dropped after it.
type dbUser struct{ name, dsn string }

// createPGUser creates a login role with the given extra SQL run as the
// admin after it ("%u" is the role's name).
func createPGUser(t *testing.T, attrs string, grants ...string) dbUser {
	t.Helper()
	admin := plainPG(t)
	name := randomName(t, "sg_user")
	mustExec(t, admin, "CREATE ROLE "+name+" LOGIN "+attrs)
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP OWNED BY "+name)
		_, _ = admin.ExecContext(context.Background(), "DROP ROLE IF EXISTS "+name)
	})
	for _, g := range grants {
		mustExec(t, admin, strings.ReplaceAll(g, "%u", name))
	}
	return dbUser{name, "host=127.0.0.1 port=5432 user=" + name + " dbname=test sslmode=disable"}
}

func createMySQLUser(t *testing.T, grants ...string) dbUser {
	t.Helper()
	admin := plainMySQL(t)
	name := randomName(t, "sg_user")
	pw := randomName(t, "pw")
	mustExec(t, admin, "CREATE USER '"+name+"'@'%' IDENTIFIED BY '"+pw+"'")
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS '"+name+"'@'%'") })
	for _, g := range grants {
		mustExec(t, admin, strings.ReplaceAll(g, "%u", "'"+name+"'@'%'"))
	}
	return dbUser{name, name + ":" + pw + "@tcp(127.0.0.1:3306)/test"}
}

// countingDial counts the connections a guard makes.
func countingDial(n *atomic.Int64) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
}

// hostileCase is one statement and the check of its effect.
type hostileCase struct {
	name  string
	query string
	// effect reports what the statement left behind, "" for nothing.
	effect func(t *testing.T) string
	// neutral: the checked statement is what the parser saw, without the
	// comment that hides the attack from it; it runs, harmlessly.
	neutral bool
}

func fileEffect(path string) func(t *testing.T) string {
	return func(t *testing.T) string {
		if info, err := os.Stat(path); err == nil {
			_ = os.Remove(path)
			return fmt.Sprintf("%s exists (mode %v)", path, info.Mode())
		}
		return ""
	}
}

func noEffect(*testing.T) string { return "" }

// pgAdvisoryEffect waits until no session holds the advisory lock key
// (a closing session releases it a moment after the client left).
func pgAdvisoryEffect(admin *sql.DB, key int) func(t *testing.T) string {
	return func(t *testing.T) string {
		return eventuallyZero(t, admin, fmt.Sprintf("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %d", key), "advisory lock held")
	}
}

func mysqlNamedLockEffect(admin *sql.DB, name string) func(t *testing.T) string {
	return func(t *testing.T) string {
		return eventuallyZero(t, admin, "SELECT IS_USED_LOCK('"+name+"') IS NOT NULL", "named lock held")
	}
}

// eventuallyZero polls q for up to 5 s and describes what it still found.
func eventuallyZero(t *testing.T, db *sql.DB, q, what string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return what
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// victimSession is a session of the admin that hostile statements try to
// end; its id is the server's.
func victimSession(t *testing.T, db *sql.DB, idQuery string) (id int64, alive func(t *testing.T) string) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.QueryRowContext(context.Background(), idQuery).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id, func(t *testing.T) string {
		if err := conn.PingContext(context.Background()); err != nil {
			return "the victim session was ended"
		}
		var again int64
		if err := conn.QueryRowContext(context.Background(), idQuery).Scan(&again); err != nil || again != id {
			return "the victim session was ended"
		}
		return ""
	}
}

func pgHostileCases(t *testing.T) []hostileCase {
	admin := plainPG(t)
	f := "/tmp/" + randomName(t, "sg_pg")
	key := 700000 + int(time.Now().UnixNano()%100000)
	pid, alive := victimSession(t, admin, "SELECT pg_backend_pid()")
	return []hostileCase{
		{"copy to program", "COPY (SELECT 1) TO PROGRAM 'touch " + f + "1'", fileEffect(f + "1"), false},
		{"copy to file", "COPY (SELECT 1) TO '" + f + "2'", fileEffect(f + "2"), false},
		{"copy from program", "COPY pg_class FROM PROGRAM 'touch " + f + "3'", fileEffect(f + "3"), false},
		{"copy to stdout", "COPY (SELECT 1) TO STDOUT", noEffect, false},
		{"second statement", "SELECT 1; COPY (SELECT 1) TO PROGRAM 'touch " + f + "4'", fileEffect(f + "4"), false},
		{"lo_export", "SELECT lo_export(lo_from_bytea(0, 'x'), '" + f + "5')", fileEffect(f + "5"), false},
		{"lo_import", "SELECT lo_import('/etc/hostname')", noEffect, false},
		{"pg_read_file", "SELECT pg_read_file('/etc/hostname')", noEffect, false},
		{"pg_ls_dir", "SELECT * FROM pg_ls_dir('/tmp')", noEffect, false},
		{"pg_stat_file", "SELECT pg_catalog.pg_stat_file('/etc/hostname')", noEffect, false},
		{"dblink", "SELECT * FROM dblink('host=127.0.0.1 dbname=test', 'SELECT 1') AS t(a int)", noEffect, false},
		{"advisory lock", fmt.Sprintf("SELECT pg_advisory_lock(%d)", key), pgAdvisoryEffect(admin, key), false},
		{"advisory lock in a subquery", fmt.Sprintf("SELECT (SELECT pg_catalog.pg_try_advisory_lock(%d))", key), pgAdvisoryEffect(admin, key), false},
		{"query_to_xml", fmt.Sprintf("SELECT query_to_xml('SELECT pg_advisory_lock(%d)', true, true, '')", key), pgAdvisoryEffect(admin, key), false},
		{"terminate", fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid), alive, false},
		{"cancel", fmt.Sprintf("SELECT pg_cancel_backend(%d)", pid), alive, false},
		{"reload", "SELECT pg_reload_conf()", noEffect, false},
		{"sleep", "SELECT pg_sleep(30)", noEffect, false},
		{"set_config", "SELECT set_config('standard_conforming_strings', 'off', false)", noEffect, false},
		{"select into", "SELECT 1 AS a INTO " + randomName(t, "sg_into"), noEffect, false},
		{"for update", "SELECT * FROM pg_class FOR UPDATE", noEffect, false},
		{"operator of another schema", "SELECT 1 OPERATOR(public.+) 1", noEffect, false},
	}
}

func mysqlHostileCases(t *testing.T) []hostileCase {
	admin := plainMySQL(t)
	f := "/tmp/" + randomName(t, "sg_my")
	lock := randomName(t, "sg_lock")
	id, alive := victimSession(t, admin, "SELECT CONNECTION_ID()")
	return []hostileCase{
		{"into outfile", "SELECT 1 INTO OUTFILE '" + f + "1'", fileEffect(f + "1"), false},
		{"into dumpfile", "SELECT 1 INTO DUMPFILE '" + f + "2'", fileEffect(f + "2"), false},
		{"outfile in MariaDB's executable comment", "SELECT 1 /*M! INTO OUTFILE '" + f + "3' */", fileEffect(f + "3"), true},
		{"outfile in an executable comment", "SELECT 1 /*!INTO OUTFILE '" + f + "4' */", fileEffect(f + "4"), false},
		{"load_file", "SELECT LOAD_FILE('/etc/hostname')", noEffect, false},
		{"get_lock", "SELECT GET_LOCK('" + lock + "', 0)", mysqlNamedLockEffect(admin, lock), false},
		{"get_lock in MariaDB's executable comment", "SELECT 1 /*M!, GET_LOCK('" + lock + "', 0) */", mysqlNamedLockEffect(admin, lock), true},
		{"get_lock in TiDB's comment", "SELECT 1 /*T! , ' */ , GET_LOCK('" + lock + "', 0) /*T! ' */", mysqlNamedLockEffect(admin, lock), false},
		{"kill", fmt.Sprintf("KILL %d", id), alive, false},
		{"kill after a select", fmt.Sprintf("SELECT 1; KILL %d", id), alive, false},
		{"sleep", "SELECT SLEEP(30)", noEffect, false},
		{"benchmark", "SELECT BENCHMARK(1000000000, MD5('x'))", noEffect, false},
		{"hint", "SELECT /*+ MAX_EXECUTION_TIME(0) */ 1", noEffect, false},
		{"variable", "SELECT @@global.secure_file_priv", noEffect, false},
		{"assignment", "SELECT @x := 1", noEffect, false},
		{"for update", "SELECT * FROM information_schema.tables FOR UPDATE", noEffect, false},
		{"set statement", "SET STATEMENT max_statement_time = 0 FOR SELECT 1", noEffect, false},
	}
}

// TestHostileStatementsHaveNoEffect runs each hostile statement through
// the guard as a superuser the admin trusts (so that only the statement
// check stands in the way) and as a user that may only SELECT. Nothing
// reaches the server: no connection is even made.
func TestHostileStatementsHaveNoEffect(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.driver, func(t *testing.T) {
			var cases []hostileCase
			var probe dbUser
			if be.driver == MySQL {
				cases, probe = mysqlHostileCases(t), createMySQLUser(t, "GRANT SELECT ON test.* TO %u")
			} else {
				cases, probe = pgHostileCases(t), createPGUser(t, "")
			}
			LoadParsers() // the timing below is of a refusal, not of loading
			for _, dsn := range []string{be.dsn, probe.dsn} {
				var dials atomic.Int64
				o := options(be.driver)
				o.Dial = countingDial(&dials)
				g := openGuard(t, dsn, o)
				for _, c := range cases {
					if c.neutral {
						continue
					}
					start := time.Now()
					_, err := g.Fingerprint(context.Background(), c.query, testKey)
					wantReason(t, err, ReasonQueryNotAllowed)
					if !strings.HasPrefix(err.Error(), "query refused before it was sent: ") {
						t.Errorf("%s: refused by %q, not the statement check", c.name, err)
					}
					if took := time.Since(start); took > time.Second {
						t.Errorf("%s: took %v to refuse", c.name, took)
					}
					if got := c.effect(t); got != "" {
						t.Errorf("%s: %s", c.name, got)
					}
					assertSafe(t, err, c.query)
				}
				if n := dials.Load(); n != 0 {
					t.Errorf("%d connections were made for refused statements", n)
				}
				for _, c := range cases {
					if !c.neutral {
						continue
					}
					if _, err := g.Fingerprint(context.Background(), c.query, testKey); err != nil {
						t.Errorf("%s: %v", c.name, err)
					}
					if got := c.effect(t); got != "" {
						t.Errorf("%s: %s", c.name, got)
					}
				}
			}
		})
	}
}

// TestHostileControls: without the guard, the same statements do have
// their effect on this machine's servers, so the test above would see it.
func TestHostileControls(t *testing.T) {
	pg := plainPG(t)
	f := "/tmp/" + randomName(t, "sg_ctl")
	t.Cleanup(func() { _ = os.Remove(f + "pg"); _ = os.Remove(f + "my"); _ = os.Remove(f + "my2") })
	// Inside a read-only transaction, as the guard's server-side layer has it.
	tx, err := pg.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("COPY (SELECT 1) TO PROGRAM 'touch " + f + "pg'"); err != nil {
		t.Fatalf("control COPY TO PROGRAM: %v", err)
	}
	_ = tx.Rollback()
	if fileEffect(f+"pg")(t) == "" {
		t.Fatal("control: COPY TO PROGRAM in a read-only transaction left no file")
	}
	my := plainMySQL(t)
	conn, err := my.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustConnExec(t, conn, "SET SESSION TRANSACTION READ ONLY")
	mustConnExec(t, conn, "START TRANSACTION READ ONLY")
	mustConnExec(t, conn, "SELECT 1 INTO OUTFILE '"+f+"my'")
	// MariaDB runs what its executable comments hold; TiDB's parser reads
	// them as comments: why the guard sends the text re-written from the
	// tree, not the tenant's.
	mustConnExec(t, conn, "SELECT 1 /*M! INTO OUTFILE '"+f+"my2' */")
	mustConnExec(t, conn, "ROLLBACK")
	for _, p := range []string{f + "my", f + "my2"} {
		if fileEffect(p)(t) == "" {
			t.Fatalf("control: %s was not written in a read-only transaction", p)
		}
	}
	if _, err := checkMySQLStatement("SELECT 1 /*M! INTO OUTFILE '" + f + "my2' */"); err != nil {
		t.Fatalf("the parser now reads MariaDB's executable comments (%v): revisit the hostile cases", err)
	}
}

func mustConnExec(t *testing.T, conn *sql.Conn, q string) {
	t.Helper()
	if _, err := conn.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
