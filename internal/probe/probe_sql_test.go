package probe

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The sql trigger against the real databases of the machine (CI runs
// MariaDB on 127.0.0.1:3306 and PostgreSQL on 127.0.0.1:5432), reached the
// way an admin allows them: by exact address and port.
var sqlBackends = []struct {
	driver autorebootv1alpha1.SQLDriver
	dsn    string
	// badDSN has a wrong password that must never show up in a message.
	badDSN   string
	password string
	addr     string
}{
	{
		driver: autorebootv1alpha1.DriverMySQL, dsn: "root@tcp(127.0.0.1:3306)/test",
		badDSN: "root:S3cretPassw0rd@tcp(127.0.0.1:3306)/test", password: "S3cretPassw0rd", addr: "127.0.0.1:3306",
	},
	{
		driver: autorebootv1alpha1.DriverPostgres, dsn: "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		badDSN: "postgres://nosuchuser:S3cretPassw0rd@127.0.0.1:5432/nosuchdb?sslmode=disable", password: "S3cretPassw0rd", addr: "127.0.0.1:5432",
	},
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// plainDB is a direct connection for the test's own setup and checks.
func plainDB(t *testing.T, driver autorebootv1alpha1.SQLDriver, dsn string) *sql.DB {
	t.Helper()
	var db *sql.DB
	if driver == autorebootv1alpha1.DriverMySQL {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db = sql.OpenDB(c)
	} else {
		db = stdlib.OpenDB(*mustPgConfig(t, dsn))
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("database %s not reachable (CI must run it): %v", driver, err)
	}
	return db
}

func usableSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name,
		Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func fakeReader(objs ...client.Object) client.Reader {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func TestSQLTriggerRealDatabases(t *testing.T) {
	for _, be := range sqlBackends {
		t.Run(string(be.driver), func(t *testing.T) {
			ctx := context.Background()
			db := plainDB(t, be.driver, be.dsn)
			table := "rbp_unit_" + string(be.driver) + "_" + randomSuffix(t)
			mustExec := func(q string) {
				t.Helper()
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			mustExec("CREATE TABLE " + table + " (id INT PRIMARY KEY, name VARCHAR(64))")
			t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
			mustExec("INSERT INTO " + table + " (id, name) VALUES (1, 'aaa'), (2, 'bbb')")
			probeDSN := selectOnlyUser(t, be.driver, db, table)

			unlabelled := usableSecret("unlabelled", map[string]string{"dsn": probeDSN})
			unlabelled.Labels = nil
			reader := fakeReader(usableSecret("db", map[string]string{"dsn": probeDSN, "bad": be.badDSN}), unlabelled,
				usableSecret("files", map[string]string{"dsn": filesDSN(be.driver)}))
			f := testProbers(t, reader, Settings{}, be.addr)
			spec := autorebootv1alpha1.SQLTrigger{
				Driver:         be.driver,
				DSNSecretRef:   autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"},
				Query:          "SELECT id, name FROM " + table + " ORDER BY id",
				TimeoutSeconds: 5,
			}
			prober := func(ns string, s autorebootv1alpha1.SQLTrigger) *sqlProber {
				p := newSQLProber(f, ns, s)
				t.Cleanup(p.Close)
				return p
			}
			p := prober("app", spec)
			st := newTriggerState(changeTrigger, 1, 1, PolicyState{})
			observe := func() Observation {
				o := p.Probe(ctx)
				st.observe(o, time.Time{})
				return o
			}

			first := observe()
			if first.Result != ok || !strings.HasPrefix(first.Fingerprint, "h1.") {
				t.Fatalf("first query: %+v", first)
			}
			if st.published.FireSeq != 0 {
				t.Fatal("the first Observation restarted (it must only set the baseline)")
			}
			if o := observe(); o.Fingerprint != first.Fingerprint || st.published.FireSeq != 0 {
				t.Fatalf("unchanged table fired: %+v", o)
			}
			mustExec("UPDATE " + table + " SET name='ccc' WHERE id=1")
			changed := observe()
			if changed.Fingerprint == first.Fingerprint || st.published.FireSeq != 1 {
				t.Fatalf("UPDATE not detected: %+v fires=%d", changed, st.published.FireSeq)
			}
			if o := observe(); st.published.FireSeq != 1 || o.Fingerprint != changed.Fingerprint {
				t.Fatalf("fired twice for one change: %+v", o)
			}
			mustExec("INSERT INTO " + table + " (id, name) VALUES (3, NULL)")
			if o := observe(); st.published.FireSeq != 2 {
				t.Fatalf("INSERT not detected: %+v", o)
			}

			// Errors are Errors with a stable reason, never changes.
			cases := []struct {
				name   string
				spec   autorebootv1alpha1.SQLTrigger
				ns     string
				reason string
			}{
				{"unknown table", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT * FROM no_such_table_" + randomSuffix(t), DSNSecretRef: spec.DSNSecretRef}, "app", autorebootv1alpha1.ReasonQueryFailed},
				{"a write", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "DELETE FROM " + table, DSNSecretRef: spec.DSNSecretRef}, "app", autorebootv1alpha1.ReasonQueryNotAllowed},
				{"missing Secret", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1", DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "nope", Key: "dsn"}}, "app", autorebootv1alpha1.ReasonSecretNotUsable},
				{"unlabelled Secret", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1", DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "unlabelled", Key: "dsn"}}, "app", autorebootv1alpha1.ReasonSecretNotUsable},
				{"missing key", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1", DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "nokey"}}, "app", autorebootv1alpha1.ReasonSecretNotFound},
				{"Secret of another namespace", spec, "other", autorebootv1alpha1.ReasonSecretNotUsable},
				{"file-reading DSN parameter", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1", DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "files", Key: "dsn"}}, "app", autorebootv1alpha1.ReasonDSNNotAllowed},
			}
			for _, tc := range cases {
				if o := prober(tc.ns, tc.spec).Probe(ctx); o.Result != errR || o.Reason != tc.reason {
					t.Errorf("%s: %+v, want Error/%s", tc.name, o, tc.reason)
				}
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil || n != 3 {
				t.Fatalf("rows after the DELETE policy: %d (%v), want 3", n, err)
			}
			// A failing login never leaks the password or the DSN.
			o := prober("app", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1",
				DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "bad"}}).Probe(ctx)
			if o.Result != errR || strings.Contains(o.Message, be.password) || strings.Contains(o.Message, be.badDSN) {
				t.Fatalf("bad credentials: %+v", o)
			}
		})
	}
}

// selectOnlyUser creates a database user that may only read table, as a
// probe's user should be, and returns its DSN; it is dropped after the
// test.
func selectOnlyUser(t *testing.T, driver autorebootv1alpha1.SQLDriver, admin *sql.DB, table string) string {
	t.Helper()
	name := "rbp_probe_" + randomSuffix(t)
	var stmts, cleanup []string
	var dsn string
	if driver == autorebootv1alpha1.DriverMySQL {
		pw := randomSuffix(t)
		stmts = []string{"CREATE USER '" + name + "'@'%' IDENTIFIED BY '" + pw + "'"}
		on := "test.*"
		if table != "" {
			on = "test." + table
		}
		stmts = append(stmts, "GRANT SELECT ON "+on+" TO '"+name+"'@'%'")
		cleanup = []string{"DROP USER IF EXISTS '" + name + "'@'%'"}
		dsn = name + ":" + pw + "@tcp(127.0.0.1:3306)/test"
	} else {
		stmts = []string{"CREATE ROLE " + name + " LOGIN"}
		if table != "" {
			stmts = append(stmts, "GRANT SELECT ON "+table+" TO "+name)
		}
		cleanup = []string{"DROP OWNED BY " + name, "DROP ROLE IF EXISTS " + name}
		dsn = "postgres://" + name + "@127.0.0.1:5432/test?sslmode=disable"
	}
	t.Cleanup(func() {
		for _, q := range cleanup {
			_, _ = admin.ExecContext(context.Background(), q)
		}
	})
	for _, q := range stmts {
		if _, err := admin.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return dsn
}

// filesDSN sets a parameter that reads the manager's files.
func filesDSN(driver autorebootv1alpha1.SQLDriver) string {
	if driver == autorebootv1alpha1.DriverMySQL {
		return "root@tcp(127.0.0.1:3306)/test?allowAllFiles=true"
	}
	return "host=127.0.0.1 user=postgres dbname=test passfile=/etc/shadow"
}

// The database is reached through the network policy: without the admin's
// allow rule, loopback is refused.
func TestSQLConnectionsFollowTheNetworkPolicy(t *testing.T) {
	for _, be := range sqlBackends {
		reader := fakeReader(usableSecret("db", map[string]string{"dsn": be.dsn}))
		f := testProbers(t, reader, Settings{})
		p := newSQLProber(f, "app", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1",
			DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"}, TimeoutSeconds: 2})
		o := p.Probe(context.Background())
		p.Close()
		if o.Result != errR || o.Reason != autorebootv1alpha1.ReasonAddressNotAllowed {
			t.Errorf("%s without an allow rule: %+v", be.driver, o)
		}
	}
}

func TestInvalidDSNMessageHasNoSecret(t *testing.T) {
	reader := fakeReader(usableSecret("db", map[string]string{"dsn": "postgres://u:TopSecret@[::1"}))
	f := testProbers(t, reader, Settings{})
	for _, drv := range []autorebootv1alpha1.SQLDriver{autorebootv1alpha1.DriverMySQL, autorebootv1alpha1.DriverPostgres} {
		o := newSQLProber(f, "app", autorebootv1alpha1.SQLTrigger{Driver: drv, Query: "SELECT 1",
			DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"}}).Probe(context.Background())
		if o.Result != errR || strings.Contains(o.Message, "TopSecret") {
			t.Fatalf("%s: %+v", drv, o)
		}
	}
}
