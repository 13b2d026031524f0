package sqlguard

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestPowerfulUsersRefused: a DSN whose user could act outside the
// database's own data is refused on connect, before the query runs,
// unless the admin accepts such users; a user that may only SELECT runs.
func TestPowerfulUsersRefused(t *testing.T) {
	users := map[string][]struct {
		name string
		user func(t *testing.T) dbUser
	}{
		Postgres: {
			{"superuser", func(t *testing.T) dbUser { return createPGUser(t, "SUPERUSER") }},
			{"program", func(t *testing.T) dbUser { return createPGUser(t, "", "GRANT pg_execute_server_program TO %u") }},
			{"write files", func(t *testing.T) dbUser { return createPGUser(t, "", "GRANT pg_write_server_files TO %u") }},
			{"read files", func(t *testing.T) dbUser { return createPGUser(t, "", "GRANT pg_read_server_files TO %u") }},
			{"signal", func(t *testing.T) dbUser { return createPGUser(t, "", "GRANT pg_signal_backend TO %u") }},
			// Not inherited, but SET ROLE reaches it.
			{"noinherit member", func(t *testing.T) dbUser {
				return createPGUser(t, "NOINHERIT", "GRANT pg_execute_server_program TO %u")
			}},
			{"indirect member", func(t *testing.T) dbUser {
				role := randomName(t, "sg_role")
				admin := plainPG(t)
				mustExec(t, admin, "CREATE ROLE "+role)
				t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP ROLE IF EXISTS "+role) })
				mustExec(t, admin, "GRANT pg_write_server_files TO "+role)
				return createPGUser(t, "", "GRANT "+role+" TO %u")
			}},
		},
		MySQL: {
			{"file", func(t *testing.T) dbUser { return createMySQLUser(t, "GRANT SELECT, FILE ON *.* TO %u") }},
			{"super", func(t *testing.T) dbUser { return createMySQLUser(t, "GRANT SELECT, SUPER ON *.* TO %u") }},
			{"process", func(t *testing.T) dbUser {
				return createMySQLUser(t, "GRANT SELECT ON test.* TO %u", "GRANT PROCESS ON *.* TO %u")
			}},
			{"insert", func(t *testing.T) dbUser { return createMySQLUser(t, "GRANT SELECT, INSERT ON test.* TO %u") }},
			{"create", func(t *testing.T) dbUser { return createMySQLUser(t, "GRANT SELECT, CREATE ROUTINE ON test.* TO %u") }},
			{"grant option", func(t *testing.T) dbUser { return createMySQLUser(t, "GRANT SELECT ON test.* TO %u WITH GRANT OPTION") }},
			{"table update", func(t *testing.T) dbUser {
				table := victim(t, plainMySQL(t), "sg_priv")
				return createMySQLUser(t, "GRANT SELECT ON test.* TO %u", "GRANT UPDATE ON test."+table+" TO %u")
			}},
			{"column update", func(t *testing.T) dbUser {
				table := victim(t, plainMySQL(t), "sg_priv")
				return createMySQLUser(t, "GRANT SELECT ON test.* TO %u", "GRANT UPDATE (name) ON test."+table+" TO %u")
			}},
			{"global select", func(t *testing.T) dbUser { return createMySQLUser(t, "GRANT SELECT ON *.* TO %u") }},
			{"default role with file", func(t *testing.T) dbUser {
				role := randomName(t, "sg_role")
				admin := plainMySQL(t)
				mustExec(t, admin, "CREATE ROLE "+role)
				t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP ROLE IF EXISTS "+role) })
				mustExec(t, admin, "GRANT FILE ON *.* TO "+role)
				return createMySQLUser(t, "GRANT SELECT ON test.* TO %u", "GRANT "+role+" TO %u", "SET DEFAULT ROLE "+role+" FOR %u")
			}},
		},
	}
	for _, be := range backends() {
		t.Run(be.driver, func(t *testing.T) {
			for _, u := range users[be.driver] {
				t.Run(strings.ReplaceAll(u.name, " ", "_"), func(t *testing.T) {
					user := u.user(t)
					o := options(be.driver)
					o.AllowPowerfulUser = false
					_, err := openGuard(t, user.dsn, o).Fingerprint(context.Background(), "SELECT 1", testKey)
					wantReason(t, err, ReasonDSNTooPowerful)
					t.Logf("%s: %v", u.name, err)
					assertSafe(t, err, user.name)
					o.AllowPowerfulUser = true
					if _, err := openGuard(t, user.dsn, o).Fingerprint(context.Background(), "SELECT 1", testKey); err != nil {
						t.Fatalf("accepted by the admin, still refused: %v", err)
					}
				})
			}
			t.Run("select_only", func(t *testing.T) {
				user := createPGUser(t, "")
				if be.driver == MySQL {
					user = createMySQLUser(t, "GRANT SELECT ON test.* TO %u")
				}
				o := options(be.driver)
				o.AllowPowerfulUser = false
				if _, err := openGuard(t, user.dsn, o).Fingerprint(context.Background(), "SELECT 1", testKey); err != nil {
					t.Fatalf("a SELECT-only user was refused: %v", err)
				}
			})
		})
	}
}

// TestSessionStateDiesWithTheProbe: a view the statement check cannot see
// into takes a session-level lock; the probe's session ends with the
// probe, and the lock with it. The superuser's run shows that it holds
// even when the admin trusts the user.
func TestSessionStateDiesWithTheProbe(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.driver, func(t *testing.T) {
			admin := be.plain(t)
			view := randomName(t, "sg_view")
			key := 800000 + int(time.Now().UnixNano()%100000)
			lock := randomName(t, "sg_lock")
			var probe dbUser
			var effect func(*testing.T) string
			var heldQuery string
			if be.driver == MySQL {
				mustExec(t, admin, fmt.Sprintf("CREATE VIEW test.%s AS SELECT GET_LOCK('%s', 0) AS got", view, lock))
				// The EXPLAIN gate needs SHOW VIEW to look into a view.
				probe = createMySQLUser(t, "GRANT SELECT, SHOW VIEW ON test.* TO %u")
				effect = mysqlNamedLockEffect(admin, lock)
				heldQuery = "SELECT IS_USED_LOCK('" + lock + "') IS NOT NULL"
			} else {
				mustExec(t, admin, fmt.Sprintf("CREATE VIEW %s AS SELECT pg_advisory_lock(%d)::text AS got", view, key))
				probe = createPGUser(t, "", "GRANT SELECT ON "+view+" TO %u")
				effect = pgAdvisoryEffect(admin, key)
				heldQuery = fmt.Sprintf("SELECT COUNT(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = %d", key)
			}
			t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP VIEW IF EXISTS "+view) })
			// Control: a session that stays open keeps the lock.
			conn, err := admin.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got sql.NullString
			if err := conn.QueryRowContext(context.Background(), "SELECT got FROM "+view).Scan(&got); err != nil {
				t.Fatal(err)
			}
			var held bool
			if err := admin.QueryRowContext(context.Background(), heldQuery).Scan(&held); err != nil || !held {
				t.Fatalf("control: the view took no lock (%v)", err)
			}
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			_ = conn.Close()
			if msg := effect(t); msg != "" {
				t.Fatalf("control: %s after its session ended", msg)
			}
			for _, dsn := range []string{probe.dsn, be.dsn} {
				g := openGuard(t, dsn, options(be.driver))
				if _, err := g.Fingerprint(context.Background(), "SELECT got FROM "+view, testKey); err != nil {
					t.Fatalf("the view's query: %v", err)
				}
				if got := effect(t); got != "" {
					t.Fatalf("after the probe returned: %s", got)
				}
			}
		})
	}
}

// TestPGSearchPathCannotShadowBuiltins: a role whose search path puts its
// own schema first, with a function named like an allowed built-in, still
// gets the built-in.
func TestPGSearchPathCannotShadowBuiltins(t *testing.T) {
	admin := plainPG(t)
	schema := randomName(t, "sg_schema")
	user := createPGUser(t, "")
	mustExec(t, admin, "CREATE SCHEMA "+schema+" AUTHORIZATION "+user.name)
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	mustExec(t, admin, "CREATE FUNCTION "+schema+".lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'shadow'::text $$")
	mustExec(t, admin, "ALTER ROLE "+user.name+" SET search_path = "+schema+", pg_catalog")
	// Control: the role's own session finds its function first.
	cfg, err := pgx.ParseConfig(user.dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctl := plainDB(t, "PostgreSQL", stdlib.OpenDB(*cfg))
	var got string
	if err := ctl.QueryRowContext(context.Background(), "SELECT lower('X')").Scan(&got); err != nil || got != "shadow" {
		t.Fatalf("control: lower('X') = %q, %v: the shadowing function was not found", got, err)
	}
	o := options(Postgres)
	o.AllowPowerfulUser = false
	shadowed, err := openGuard(t, user.dsn, o).Fingerprint(context.Background(), "SELECT lower('X')", testKey)
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := openGuard(t, pgDSN, options(Postgres)).Fingerprint(context.Background(), "SELECT lower('X')", testKey)
	if err != nil {
		t.Fatal(err)
	}
	if shadowed != builtin {
		t.Fatal("the tenant's lower() ran instead of the built-in")
	}
}
