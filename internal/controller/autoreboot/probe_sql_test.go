package autoreboot

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The sql trigger against the real databases of the machine (CI runs
// MariaDB on 127.0.0.1:3306 and PostgreSQL on 127.0.0.1:5432).
var sqlBackends = []struct {
	driver autorebootv1alpha1.SQLDriver
	dsn    string
	// badDSN has a wrong password that must never show up in a message.
	badDSN   string
	password string
	create   string
}{
	{
		driver: autorebootv1alpha1.DriverMySQL, dsn: "root@tcp(127.0.0.1:3306)/test",
		badDSN: "root:S3cretPassw0rd@tcp(127.0.0.1:3306)/test", password: "S3cretPassw0rd",
		create: "CREATE TABLE %s (id INT PRIMARY KEY, name VARCHAR(64))",
	},
	{
		driver: autorebootv1alpha1.DriverPostgres, dsn: "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		badDSN: "postgres://nosuchuser:S3cretPassw0rd@127.0.0.1:5432/nosuchdb?sslmode=disable", password: "S3cretPassw0rd",
		create: "CREATE TABLE %s (id INT PRIMARY KEY, name VARCHAR(64))",
	},
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestSQLTriggerRealDatabases(t *testing.T) {
	for _, be := range sqlBackends {
		t.Run(string(be.driver), func(t *testing.T) {
			ctx := context.Background()
			connector, _, err := sqlConnector(be.driver, be.dsn)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(connector)
			defer db.Close()
			if err := db.PingContext(ctx); err != nil {
				t.Fatalf("database %s not reachable (CI must run it): %v", be.driver, err)
			}
			table := "rbp_unit_" + string(be.driver) + "_" + randomSuffix(t)
			mustExec := func(q string, args ...any) {
				t.Helper()
				if _, err := db.ExecContext(ctx, q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			mustExec(strings.Replace(be.create, "%s", table, 1))
			t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
			mustExec("INSERT INTO " + table + " (id, name) VALUES (1, 'aaa'), (2, 'bbb')")

			scheme := runtime.NewScheme()
			_ = clientgoscheme.AddToScheme(scheme)
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"},
				Data: map[string][]byte{"dsn": []byte(be.dsn), "bad": []byte(be.badDSN)}}
			reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()
			spec := autorebootv1alpha1.SQLTrigger{
				Driver:       be.driver,
				DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"},
				Query:        "SELECT id, name FROM " + table + " ORDER BY id",
			}
			p := newSQLProber(reader, "app", spec)
			defer p.close()
			st := newTriggerState(changeTrigger, 1, 1, policyState{})
			observe := func() observation {
				o := p.probe(ctx)
				st.observe(o, time.Time{})
				return o
			}

			first := observe()
			if first.result != ok || first.fingerprint == "" {
				t.Fatalf("first query: %+v", first)
			}
			if st.published.FireSeq != 0 {
				t.Fatal("the first observation restarted (it must only set the baseline)")
			}
			if o := observe(); o.fingerprint != first.fingerprint || st.published.FireSeq != 0 {
				t.Fatalf("unchanged table fired: %+v", o)
			}
			mustExec("UPDATE " + table + " SET name='ccc' WHERE id=1")
			changed := observe()
			if changed.fingerprint == first.fingerprint || st.published.FireSeq != 1 {
				t.Fatalf("UPDATE not detected: %+v fires=%d", changed, st.published.FireSeq)
			}
			if o := observe(); st.published.FireSeq != 1 || o.fingerprint != changed.fingerprint {
				t.Fatalf("fired twice for one change: %+v", o)
			}
			// A new row (with a NULL) is a change too.
			mustExec("INSERT INTO " + table + " (id, name) VALUES (3, NULL)")
			if o := observe(); st.published.FireSeq != 2 {
				t.Fatalf("INSERT not detected: %+v", o)
			}

			// A query error is an Error, never a change.
			bad := newSQLProber(reader, "app", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT * FROM no_such_table_" + randomSuffix(t),
				DSNSecretRef: spec.DSNSecretRef})
			defer bad.close()
			if o := bad.probe(ctx); o.result != errR || o.reason != autorebootv1alpha1.ReasonProbeError {
				t.Fatalf("bad query: %+v", o)
			}
			// Missing Secret and missing key.
			for _, ref := range []autorebootv1alpha1.SecretKeySelector{{Name: "nope", Key: "dsn"}, {Name: "db", Key: "nokey"}} {
				o := newSQLProber(reader, "app", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1", DSNSecretRef: ref}).probe(ctx)
				if o.result != errR || o.reason != autorebootv1alpha1.ReasonSecretNotFound {
					t.Fatalf("secret %v: %+v", ref, o)
				}
			}
			// The Secret is read in the policy's namespace only.
			if o := newSQLProber(reader, "other", spec).probe(ctx); o.reason != autorebootv1alpha1.ReasonSecretNotFound {
				t.Fatalf("secret from another namespace was used: %+v", o)
			}
			// A failing login never leaks the password or the DSN.
			o := newSQLProber(reader, "app", autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1",
				DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "bad"}}).probe(ctx)
			if o.result != errR {
				t.Fatalf("bad credentials: %+v", o)
			}
			if strings.Contains(o.message, be.password) || strings.Contains(o.message, be.badDSN) {
				t.Fatalf("message leaks the DSN: %q", o.message)
			}
		})
	}
}

func TestInvalidDSNMessageHasNoSecret(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	dsn := "postgres://u:TopSecret@[::1"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}, Data: map[string][]byte{"dsn": []byte(dsn)}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()
	for _, drv := range []autorebootv1alpha1.SQLDriver{autorebootv1alpha1.DriverMySQL, autorebootv1alpha1.DriverPostgres} {
		o := newSQLProber(reader, "app", autorebootv1alpha1.SQLTrigger{Driver: drv, Query: "SELECT 1",
			DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"}}).probe(context.Background())
		if o.result != errR || strings.Contains(o.message, "TopSecret") {
			t.Fatalf("%s: %+v", drv, o)
		}
	}
}
