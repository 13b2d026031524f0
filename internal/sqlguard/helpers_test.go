package sqlguard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The machine and CI run MariaDB on 127.0.0.1:3306 (root, no password) and
// PostgreSQL on 127.0.0.1:5432 (trust). Tests fail when they do not answer.
const (
	mysqlDSN = "root@tcp(127.0.0.1:3306)/test"
	pgDSN    = "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable"
)

// backend is what the tests need to know about one database.
type backend struct {
	driver string
	dsn    string
	plain  func(t *testing.T) *sql.DB
	// rows returns a query producing n rows of one width-byte column.
	rows  func(n, width int) string
	sleep string
}

func backends() []backend {
	return []backend{
		{
			driver: MySQL, dsn: mysqlDSN, plain: plainMySQL, sleep: "SELECT SLEEP(30)",
			rows: func(n, w int) string { return fmt.Sprintf("SELECT seq, REPEAT('x', %d) FROM seq_1_to_%d", w, n) },
		},
		{
			driver: Postgres, dsn: pgDSN, plain: plainPG, sleep: "SELECT pg_sleep(30)",
			rows: func(n, w int) string {
				return fmt.Sprintf("SELECT g, repeat('x', %d) FROM generate_series(1, %d) g", w, n)
			},
		},
	}
}

func plainMySQL(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(mysqlDSN)
	if err != nil {
		t.Fatal(err)
	}
	return plainDB(t, "MariaDB", mustConnector(t, cfg))
}

func mustConnector(t *testing.T, cfg *mysql.Config) *sql.DB {
	t.Helper()
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sql.OpenDB(c)
}

func plainPG(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	return plainDB(t, "PostgreSQL", stdlib.OpenDB(*cfg))
}

func plainDB(t *testing.T, name string, db *sql.DB) *sql.DB {
	t.Helper()
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("%s is not reachable on 127.0.0.1 (the machine and CI must run it): %v", name, err)
	}
	return db
}

func dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func options(driver string) Options {
	// The machine's root and postgres users are superusers: the tests of the
	// other defences accept them as a trusted admin would.
	return Options{Driver: driver, Dial: dial, StatementTimeout: 5 * time.Second, AllowPowerfulUser: true}
}

func openGuard(t *testing.T, dsn string, o Options) *DB {
	t.Helper()
	db, err := Open(dsn, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func keyed(key string) func() hash.Hash {
	return func() hash.Hash { return hmac.New(sha256.New, []byte(key)) }
}

var testKey = keyed("manager-only-key")

func randomName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + "_" + hex.EncodeToString(b)
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// victim creates a table of three rows that is dropped after the test.
func victim(t *testing.T, db *sql.DB, prefix string) string {
	t.Helper()
	name := randomName(t, prefix)
	mustExec(t, db, "CREATE TABLE "+name+" (id INT PRIMARY KEY, name VARCHAR(64))")
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name) })
	mustExec(t, db, "INSERT INTO "+name+" (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c')")
	return name
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("counting %s: %v", table, err)
	}
	return n
}

func tableExists(t *testing.T, db *sql.DB, table string) bool {
	t.Helper()
	var n int
	q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = '" + table + "'"
	if err := db.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// assertSafe checks that neither the error's text nor its description
// carries any of the secrets.
func assertSafe(t *testing.T, err error, secrets ...string) {
	t.Helper()
	reason, msg := Describe(err)
	for _, s := range secrets {
		for _, text := range []string{err.Error(), reason, msg, fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(text, s) {
				t.Fatalf("%q leaks %q", text, s)
			}
		}
	}
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", reason)
	}
	if got, msg := Describe(err); got != reason {
		t.Fatalf("reason %s (%s), want %s", got, msg, reason)
	}
}

// heapPeak samples the Go heap every 2ms while f runs and returns how far
// it rose above where it started.
func heapPeak(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return 0
	}
	return peak - base
}

type deniedError struct{}

func (deniedError) Error() string { return "address not allowed by policy" }
func (deniedError) Denied() bool  { return true }

// denyAll refuses the way a net.Dialer whose Control refuses does: wrapped
// in an *net.OpError whose text names the address.
func denyAll(_ context.Context, network, addr string) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: network, Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5432}, Err: deniedError{}}
}

var errOther = errors.New("some other dial failure")

// wantRefusedBeforeSent checks that the statement check refuses q.
func wantRefusedBeforeSent(t *testing.T, g *DB, q string) {
	t.Helper()
	_, err := g.Fingerprint(context.Background(), q, testKey)
	wantReason(t, err, ReasonQueryNotAllowed)
	if !strings.HasPrefix(err.Error(), "query refused before it was sent: ") {
		t.Fatalf("%q: refused by %q, not by the statement check", q, err)
	}
}
