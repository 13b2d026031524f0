package sqlguard

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const secret = "SECRET-PATH-123"

func TestDSNRefused(t *testing.T) {
	const my, kv, url = "root:pw@tcp(127.0.0.1:3306)/test?", "host=127.0.0.1 user=postgres dbname=test ", "postgres://postgres:pw@127.0.0.1/test?"
	cases := []struct {
		driver, dsn, reason, param string
	}{
		{MySQL, my + "allowAllFiles=true", ReasonDSNNotAllowed, "allowAllFiles"},
		{MySQL, my + "multiStatements=true", ReasonDSNNotAllowed, "multiStatements"},
		{MySQL, my + "compress=true", ReasonDSNNotAllowed, "compress"},
		{MySQL, my + "allowCleartextPasswords=1", ReasonDSNNotAllowed, "allowCleartextPasswords"},
		{MySQL, my + "allowOldPasswords=1", ReasonDSNNotAllowed, "allowOldPasswords"},
		{MySQL, my + "interpolateParams=true", ReasonDSNNotAllowed, "interpolateParams"},
		{MySQL, my + "parseTime=true&sql_mode=%27" + secret + "%27", ReasonDSNNotAllowed, "sql_mode"},
		{MySQL, my + "autocommit=0", ReasonDSNNotAllowed, "autocommit"},
		{MySQL, my + "tls=" + secret, ReasonDSNNotAllowed, "tls"},
		{MySQL, my + "serverPubKey=" + secret, ReasonDSNNotAllowed, "serverPubKey"},
		{MySQL, my + "strict=true", ReasonDSNNotAllowed, "strict"},
		{MySQL, my + "connectionAttributes=a:" + secret, ReasonDSNNotAllowed, "connectionAttributes"},
		{MySQL, my + "maxAllowedPacket=1", ReasonDSNNotAllowed, "maxAllowedPacket"},
		{MySQL, my + "charset=utf8mb4,%20" + secret, ReasonDSNNotAllowed, "charset"},
		{MySQL, my + "%2Ftmp%2F" + secret + "=1", ReasonDSNNotAllowed, ""},
		{MySQL, "root:pw@unix(/tmp/" + secret + ".sock)/test", ReasonDSNNotAllowed, "unix"},
		{MySQL, "root:pw@unix/test", ReasonDSNNotAllowed, "unix"},
		{MySQL, "root:pw@" + secret + "(127.0.0.1:3306)/test", ReasonDSNNotAllowed, "protocol"},
		{MySQL, my + "timeout=" + secret, ReasonInvalidDSN, ""},
		{MySQL, "root:" + secret + "@tcp(127.0.0.1:3306/test", ReasonInvalidDSN, ""},
		{MySQL, my + "loc=" + secret, ReasonInvalidDSN, ""},

		{Postgres, kv + "passfile=/tmp/" + secret, ReasonDSNNotAllowed, "passfile"},
		{Postgres, kv + "servicefile=/tmp/" + secret, ReasonDSNNotAllowed, "servicefile"},
		{Postgres, kv + "service=" + secret, ReasonDSNNotAllowed, "service"},
		{Postgres, kv + "sslkey=/tmp/" + secret, ReasonDSNNotAllowed, "sslkey"},
		{Postgres, kv + "sslcert=/tmp/" + secret, ReasonDSNNotAllowed, "sslcert"},
		{Postgres, kv + "sslrootcert=/tmp/" + secret, ReasonDSNNotAllowed, "sslrootcert"},
		{Postgres, kv + "sslpassword=" + secret, ReasonDSNNotAllowed, "sslpassword"},
		{Postgres, kv + "options='-c search_path=" + secret + "'", ReasonDSNNotAllowed, "options"},
		{Postgres, kv + "application_name=" + secret, ReasonDSNNotAllowed, "application_name"},
		{Postgres, kv + "default_transaction_read_only=off", ReasonDSNNotAllowed, "default_transaction_read_only"},
		{Postgres, kv + "target_session_attrs=read-write", ReasonDSNNotAllowed, "target_session_attrs"},
		{Postgres, kv + "default_query_exec_mode=simple_protocol", ReasonDSNNotAllowed, "default_query_exec_mode"},
		{Postgres, kv + "sslcertmode=allow", ReasonDSNNotAllowed, "sslcertmode"},
		{Postgres, kv + "sslnegotiation=direct", ReasonDSNNotAllowed, "sslnegotiation"},
		{Postgres, kv + "krbsrvname=" + secret, ReasonDSNNotAllowed, "krbsrvname"},
		{Postgres, kv + pgNeutralMarker + "=1", ReasonDSNNotAllowed, pgNeutralMarker},
		{Postgres, kv + "/tmp/" + secret + "=1", ReasonDSNNotAllowed, ""},
		{Postgres, url + "passfile=/tmp/" + secret, ReasonDSNNotAllowed, "passfile"},
		{Postgres, url + "servicefile=/tmp/" + secret, ReasonDSNNotAllowed, "servicefile"},
		{Postgres, url + "service=" + secret, ReasonDSNNotAllowed, "service"},
		{Postgres, url + "sslkey=/tmp/" + secret, ReasonDSNNotAllowed, "sslkey"},
		{Postgres, url + "sslcert=/tmp/" + secret, ReasonDSNNotAllowed, "sslcert"},
		{Postgres, url + "sslrootcert=/tmp/" + secret, ReasonDSNNotAllowed, "sslrootcert"},
		{Postgres, url + "sslpassword=" + secret, ReasonDSNNotAllowed, "sslpassword"},
		{Postgres, url + "options=-c%20search_path%3D" + secret, ReasonDSNNotAllowed, "options"},
		{Postgres, "user=postgres dbname=test password=" + secret, ReasonDSNNotAllowed, "host"},
		{Postgres, "postgres://postgres:" + secret + "@/test", ReasonDSNNotAllowed, "host"},
		{Postgres, "host='' user=postgres password=" + secret, ReasonDSNNotAllowed, "host"},
		{Postgres, "host=/tmp/" + secret + " user=postgres", ReasonDSNNotAllowed, "host"},
		{Postgres, "host=127.0.0.1,/tmp/" + secret + " user=postgres", ReasonDSNNotAllowed, "host"},
		{Postgres, "postgres://postgres@%2Ftmp%2F" + secret + "/test", ReasonDSNNotAllowed, "host"},
		{Postgres, kv + "port=" + secret, ReasonInvalidDSN, ""},
		{Postgres, kv + "password='" + secret, ReasonInvalidDSN, ""},
		{Postgres, "postgres://postgres:%zz" + secret + "@127.0.0.1/test", ReasonInvalidDSN, ""},
		{Postgres, "postgres://postgres:" + secret + "@127.0.0.1:" + secret + "/test", ReasonInvalidDSN, ""},
	}
	for _, c := range cases {
		db, err := Open(c.dsn, options(c.driver))
		if err == nil {
			_ = db.Close()
			t.Errorf("%s %q: accepted", c.driver, c.dsn)
			continue
		}
		var de *DSNError
		if !errors.As(err, &de) || de.Reason != c.reason || de.Param != c.param {
			t.Errorf("%s %q: %#v, want reason %s param %q", c.driver, c.dsn, err, c.reason, c.param)
			continue
		}
		if reason, msg := Describe(err); reason != c.reason || msg != err.Error() {
			t.Errorf("Describe: %s %q", reason, msg)
		}
		assertSafe(t, err, secret, "pw@")
	}
}

// TestDSNRefusedBeforeReadingFiles names FIFOs: opening one for reading
// blocks until a writer comes, so an Open that tried would hang.
func TestDSNRefusedBeforeReadingFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"passfile", "servicefile", "sslrootcert"} {
		done := make(chan error, 1)
		go func() {
			_, err := Open("host=127.0.0.1 user=postgres "+key+"="+fifo, options(Postgres))
			done <- err
		}()
		select {
		case err := <-done:
			wantReason(t, err, ReasonDSNNotAllowed)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Open blocked reading the file", key)
		}
	}
}

func TestDSNAccepted(t *testing.T) {
	for _, c := range []struct{ driver, dsn string }{
		{MySQL, "root:pw@tcp(127.0.0.1:3306)/test?tls=false&timeout=5s&readTimeout=5s&writeTimeout=5s&parseTime=true&loc=UTC&charset=utf8mb4&collation=utf8mb4_general_ci"},
		{MySQL, "root:p/w?x@tcp6([::1]:3306)/test?tls=skip-verify"},
		{MySQL, "root@tcp(db.example:3306)/test?tls=preferred"},
		{Postgres, "host=127.0.0.1 port=5432 user=postgres password=pw dbname=test sslmode=verify-full connect_timeout=5 channel_binding=prefer sslsni=1"},
		{Postgres, "postgres://postgres:pw@127.0.0.1:5432,127.0.0.2/test?sslmode=require&connect_timeout=5"},
		{Postgres, "postgresql://postgres@db.example/test?ssl=true"},
	} {
		db, err := Open(c.dsn, options(c.driver))
		if err != nil {
			t.Errorf("%s %q: %v", c.driver, c.dsn, err)
			continue
		}
		_ = db.Close()
	}
}

func TestOpenNeedsDial(t *testing.T) {
	if _, err := Open(pgDSN, Options{Driver: Postgres}); err == nil {
		t.Fatal("Open without a dial function succeeded")
	}
	if _, err := Open(pgDSN, Options{Driver: "sqlite", Dial: dial}); err == nil {
		t.Fatal("Open with an unknown driver succeeded")
	}
}

func TestPlainWord(t *testing.T) {
	for in, want := range map[string]string{
		"allowAllFiles": "allowAllFiles", "sql_mode": "sql_mode", "a1": "a1",
		"1a": "", "_a": "", "a-b": "", "/tmp/x": "", "": "", strings.Repeat("a", 65): "",
	} {
		if got := plainWord(in); got != want {
			t.Errorf("plainWord(%q) = %q, want %q", in, got, want)
		}
	}
}
