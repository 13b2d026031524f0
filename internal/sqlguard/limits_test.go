package sqlguard

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

const heapBound = 64 << 20

// hostile runs q through a fresh DB with the default limits, measuring the
// heap, and wants the fixed error promptly.
func hostile(t *testing.T, driver, dsn, q, wantMsg string, lim Limits) {
	t.Helper()
	o := options(driver)
	o.Limits = lim
	o.StatementTimeout = 60 * time.Second
	g := openGuard(t, dsn, o)
	var err error
	start := time.Now()
	peak := heapPeak(func() { _, err = g.Fingerprint(context.Background(), q, testKey) })
	took := time.Since(start)
	t.Logf("%s: %v after %v, heap +%d MiB", driver, err, took.Round(time.Millisecond), peak>>20)
	wantReason(t, err, ReasonResultTooLarge)
	if !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("message %q, want %q", err, wantMsg)
	}
	if peak > heapBound {
		t.Fatalf("heap grew by %d MiB", peak>>20)
	}
	if took > 20*time.Second {
		t.Fatalf("took %v", took)
	}
	// The DB is still usable: the broken connection was replaced.
	if _, err := g.Fingerprint(context.Background(), "SELECT 1", testKey); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
}

func TestHugeRowIsRefusedBeforeItIsBuffered(t *testing.T) {
	// 128 MiB: twice the heap growth allowed, so a guard that buffered the
	// row fails on the heap. PostgreSQL builds the value before it sends a
	// byte; a 600 MB one took it 26.6 s (limit 20 s) in a fresh-clone CI
	// run while other packages ran.
	hostile(t, Postgres, pgDSN, "SELECT repeat('x', 134217728)", "a row exceeds 65536 bytes", Limits{})
	// MariaDB caps a row at max_allowed_packet (16 MiB here); the driver
	// reads at most one such packet, the wire stops it early.
	hostile(t, MySQL, mysqlDSN, "SELECT REPEAT('x', 16000000)", "result exceeds 4194304 bytes", Limits{})
}

// TestHugeRowControl: without sqlguard the driver buffers the whole row.
func TestHugeRowControl(t *testing.T) {
	plain := plainPG(t)
	var n int
	peak := heapPeak(func() {
		var s string
		if err := plain.QueryRowContext(context.Background(), "SELECT repeat('x', 100000000)").Scan(&s); err != nil {
			t.Error(err)
		}
		n = len(s)
	})
	if n != 100000000 || peak < 90<<20 {
		t.Fatalf("control: read %d bytes with heap +%d MiB", n, peak>>20)
	}
}

func TestHugeResultIsCutOffEarly(t *testing.T) {
	// 1 GB each; the row limit is raised so that bytes are what stops them.
	lim := Limits{MaxRows: 100_000_000}
	for _, be := range backends() {
		t.Run(be.driver, func(t *testing.T) {
			hostile(t, be.driver, be.dsn, be.rows(1_000_000, 1000), "result exceeds 4194304 bytes", lim)
		})
	}
}

func TestRowLimits(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.driver, func(t *testing.T) {
			g := openGuard(t, be.dsn, options(be.driver))
			ctx := context.Background()
			if _, err := g.Fingerprint(ctx, be.rows(DefaultMaxRows, 10), testKey); err != nil {
				t.Fatalf("exactly %d rows: %v", DefaultMaxRows, err)
			}
			_, err := g.Fingerprint(ctx, be.rows(20_000, 1), testKey)
			wantReason(t, err, ReasonResultTooLarge)
			if err.Error() != "result too large: result exceeds 10000 rows" {
				t.Fatalf("message %q", err)
			}

			o := options(be.driver)
			o.Limits = Limits{MaxRowBytes: 1000, MaxResultBytes: 5000}
			small := openGuard(t, be.dsn, o)
			_, err = small.Fingerprint(ctx, be.rows(1, 2000), testKey)
			if err == nil || err.Error() != "result too large: a row exceeds 1000 bytes" {
				t.Fatalf("wide row: %v", err)
			}
			_, err = small.Fingerprint(ctx, be.rows(10, 900), testKey)
			if err == nil || err.Error() != "result too large: result exceeds 5000 bytes" {
				t.Fatalf("long result: %v", err)
			}
		})
	}
}

func TestStatementTimeout(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.driver, func(t *testing.T) {
			o := options(be.driver)
			o.StatementTimeout = time.Second
			g := openGuard(t, be.dsn, o)
			start := time.Now()
			_, err := g.fingerprint(context.Background(), be.sleep, testKey)
			took := time.Since(start)
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
			wantReason(t, err, ReasonTimeout)
			if took > o.StatementTimeout+2*time.Second {
				t.Fatalf("took %v", took)
			}
			// The server stopped it itself, before the client gave up.
			if !strings.Contains(err.Error(), "SQLSTATE") {
				t.Fatalf("%q: not the server's timeout", err)
			}
			if n := running(t, be); n != 0 {
				t.Fatalf("%d sleeping queries still run on the server", n)
			}
		})
	}
	// MariaDB's per-statement override is refused before it runs.
	g := openGuard(t, mysqlDSN, options(MySQL))
	_, err := g.Fingerprint(context.Background(), "SET STATEMENT max_statement_time = 0 FOR SELECT SLEEP(30)", testKey)
	wantReason(t, err, ReasonQueryNotAllowed)
}

func running(t *testing.T, be backend) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM pg_stat_activity WHERE query = '" + be.sleep + "' AND state = 'active'"
	if be.driver == MySQL {
		q = "SELECT COUNT(*) FROM information_schema.processlist WHERE info = '" + be.sleep + "'"
	}
	var n int
	if err := be.plain(t).QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A driver that keeps reading a connection it is closing in the background
// (pgx drains it while sending Terminate) must not spend the next query's
// budget: reads of a retired connection fail and count for nothing.
func TestRetiredConnectionReadsCountForNothing(t *testing.T) {
	w := &wire{limit: 10}
	server, client := net.Pipe()
	defer server.Close()
	old := &meteredConn{Conn: client, w: w, generation: w.generation.Load()}
	w.retire()
	w.reset()
	go func() { _, _ = server.Write(make([]byte, 100)) }()
	if _, err := old.Read(make([]byte, 100)); !errors.Is(err, errRetired) {
		t.Fatalf("read of a retired connection: %v", err)
	}
	if w.used.Load() != 0 || w.tripped.Load() {
		t.Fatalf("the retired connection spent the budget: used %d, tripped %v", w.used.Load(), w.tripped.Load())
	}
}
