package sqlguard

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

const (
	mariadbSocket  = "/run/mysqld/mysqld.sock"
	postgresSocket = "/var/run/postgresql"
)

func TestUnixSocketsNeedAnExactAllowedPath(t *testing.T) {
	for _, p := range []string{mariadbSocket, filepath.Join(postgresSocket, ".s.PGSQL.5432")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the database socket %s is missing (the machine and CI must run both databases): %v", p, err)
		}
	}
	for _, c := range []struct {
		driver, dsn, allowed string
	}{
		{MySQL, "root@unix(" + mariadbSocket + ")/test", mariadbSocket},
		{Postgres, "host=" + postgresSocket + " user=postgres dbname=test", postgresSocket},
	} {
		o := options(c.driver)
		for _, wrong := range [][]string{nil, {c.allowed + "/"}, {filepath.Dir(c.allowed)}} {
			o.AllowUnixSockets = wrong
			_, err := Open(c.dsn, o)
			wantReason(t, err, ReasonDSNNotAllowed)
		}
		o.AllowUnixSockets = []string{"/elsewhere", c.allowed}
		g := openGuard(t, c.dsn, o)
		if _, err := g.Fingerprint(context.Background(), "SELECT 1", testKey); err != nil {
			t.Fatalf("%s over an allowed socket: %v", c.driver, err)
		}
	}
}

func TestDeniedDialIsAddressNotAllowed(t *testing.T) {
	for _, be := range backends() {
		o := options(be.driver)
		o.Dial = denyAll
		g := openGuard(t, be.dsn, o)
		_, err := g.Fingerprint(context.Background(), "SELECT 1", testKey)
		wantReason(t, err, ReasonAddressNotAllowed)
		if err.Error() != (deniedError{}).Error() {
			t.Fatalf("%s: message %q, want the refusal's own text", be.driver, err)
		}
		assertSafe(t, err, "10.1.2.3", "127.0.0.1")

		// A caller's own test, and a dial failure that is not a refusal.
		o.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errOther }
		o.IsDenied = func(err error) bool { return errors.Is(err, errOther) }
		_, err = openGuard(t, be.dsn, o).Fingerprint(context.Background(), "SELECT 1", testKey)
		wantReason(t, err, ReasonAddressNotAllowed)
		o.IsDenied = func(error) bool { return false }
		_, err = openGuard(t, be.dsn, o).Fingerprint(context.Background(), "SELECT 1", testKey)
		wantReason(t, err, ReasonConnectFailed)
		assertSafe(t, err, errOther.Error(), "127.0.0.1")
	}
}

// TestMySQLLocalInfile: with allowAllFiles the driver uploads the manager's
// own files; sqlguard refuses the parameter, and without it the statement
// fails and nothing of the file leaves.
func TestMySQLLocalInfile(t *testing.T) {
	plain := plainMySQL(t)
	marker := randomName(t, "marker-content")
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loot := randomName(t, "sg_loot")
	mustExec(t, plain, "CREATE TABLE "+loot+" (line VARCHAR(255))")
	t.Cleanup(func() { _, _ = plain.ExecContext(context.Background(), "DROP TABLE "+loot) })
	attack := "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE " + loot

	cfg, err := mysql.ParseDSN(mysqlDSN + "?allowAllFiles=true")
	if err != nil {
		t.Fatal(err)
	}
	leaky := mustConnector(t, cfg)
	defer leaky.Close()
	mustExec(t, leaky, attack)
	var got string
	if err := plain.QueryRowContext(context.Background(), "SELECT line FROM "+loot).Scan(&got); err != nil || got != marker {
		t.Fatalf("control: loot holds %q (%v), want the marker", got, err)
	}
	mustExec(t, plain, "DELETE FROM "+loot)

	_, err = Open(mysqlDSN+"?allowAllFiles=true", options(MySQL))
	var de *DSNError
	if !errors.As(err, &de) || de.Param != "allowAllFiles" {
		t.Fatalf("allowAllFiles: %v", err)
	}
	g := openGuard(t, mysqlDSN, options(MySQL))
	for _, q := range []string{attack, "SELECT 1 FROM (SELECT 1) AS x; " + attack} {
		_, err = g.Fingerprint(context.Background(), q, testKey)
		if err == nil {
			t.Fatalf("%s: no error", q)
		}
		assertSafe(t, err, marker, file)
	}
	if n := count(t, plain, loot); n != 0 {
		t.Fatalf("loot has %d rows", n)
	}
}

func TestMySQLConfigIsRebuilt(t *testing.T) {
	if _, err := mysqlConnector(mysqlDSN+"?tls=preferred&charset=utf8mb4&parseTime=true", mustDefaults(t, options(MySQL)), dial); err != nil {
		t.Fatal(err)
	}
	parsed, err := parseMySQLDSN(mysqlDSN + "?tls=preferred&parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rebuildMySQL(parsed, "utf8mb4", dial)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AllowAllFiles || cfg.MultiStatements || cfg.InterpolateParams || cfg.AllowCleartextPasswords ||
		cfg.AllowOldPasswords || len(cfg.Params) > 0 || cfg.DialFunc == nil || !cfg.ParseTime {
		t.Fatalf("rebuilt config: %+v", cfg)
	}
	if s := cfg.FormatDSN(); strings.Contains(s, "compress") || !strings.Contains(s, "charset=utf8mb4") {
		t.Fatalf("rebuilt config formats as %s", s)
	}
}
