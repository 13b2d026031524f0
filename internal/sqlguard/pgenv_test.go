package sqlguard

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/stdlib"
)

const (
	envPassword  = "SECRET-env-password"
	filePassword = "SECRET-passfile-password"
)

// managerEnvironment gives the test process what a careless manager might
// have: PG* variables, a ~/.pgpass that matches everything and a client
// certificate in ~/.postgresql.
func managerEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	pass := filepath.Join(home, ".pgpass")
	if err := os.WriteFile(pass, []byte("*:*:*:*:"+filePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSFILE", pass)
	t.Setenv("PGPASSWORD", envPassword)
	t.Setenv("PGOPTIONS", "-c default_transaction_read_only=off")
	t.Setenv("PGAPPNAME", "SECRET-app")
	t.Setenv("PGTARGETSESSIONATTRS", "read-write")
	t.Setenv("PGHOST", "127.0.0.1")
	writeClientCert(t, filepath.Join(home, ".postgresql"))
}

func writeClientCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "manager"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"postgresql.crt": {Type: "CERTIFICATE", Bytes: der},
		"postgresql.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPostgresConfigKeepsManagerEnvironmentOut(t *testing.T) {
	managerEnvironment(t)
	// The control: the plain parser hands the tenant all of it.
	plain, err := pgx.ParseConfig("host=127.0.0.1 user=postgres dbname=test password=")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Password != filePassword || len(plain.TLSConfig.Certificates) != 1 || plain.RuntimeParams["options"] == "" {
		t.Fatalf("control: plain config has password %q, %d certificates, params %v",
			plain.Password, len(plain.TLSConfig.Certificates), plain.RuntimeParams)
	}
	for dsn, want := range map[string]string{
		"host=127.0.0.1 user=postgres dbname=test":                                "",
		"host=127.0.0.1 user=postgres dbname=test password=":                      "",
		"host=127.0.0.1 user=postgres dbname=test password=''":                    "",
		"host=127.0.0.1 user=postgres dbname=test password=tenant":                "tenant",
		"postgres://postgres@127.0.0.1/test":                                      "",
		"postgres://postgres:@127.0.0.1/test":                                     "",
		"postgres://postgres@127.0.0.1/test?password=":                            "",
		"postgres://postgres@127.0.0.1/test?sslmode=require&password=":            "",
		"postgres://postgres@127.0.0.1":                                           "",
		"postgres://postgres:tenant%40pw@127.0.0.1:5432/test?sslmode=prefer":      "tenant@pw",
		"postgresql://postgres@127.0.0.1,127.0.0.2/test?password=tenant&ssl=true": "tenant",
	} {
		cfg, err := pgConfig(dsn, mustDefaults(t, options(Postgres)), dial)
		if err != nil {
			t.Errorf("%q: %v", dsn, err)
			continue
		}
		if cfg.Password != want {
			t.Errorf("%q: password %q, want %q", dsn, cfg.Password, want)
		}
		assertHardened(t, dsn, cfg)
	}
	if _, err := pgConfig("user=postgres dbname=test", mustDefaults(t, options(Postgres)), dial); err == nil {
		t.Error("a DSN without host took PGHOST")
	}
}

func mustDefaults(t *testing.T, o Options) Options {
	t.Helper()
	o, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func assertHardened(t *testing.T, dsn string, cfg *pgx.ConnConfig) {
	t.Helper()
	want := map[string]string{"application_name": "runbook-rebootpolicy", "default_transaction_read_only": "on", "standard_conforming_strings": "on", "statement_timeout": "5000"}
	if !maps.Equal(cfg.RuntimeParams, want) {
		t.Errorf("%q: runtime params %v", dsn, cfg.RuntimeParams)
	}
	if c := cfg.TLSConfig; c != nil && (len(c.Certificates) > 0 || c.GetClientCertificate != nil) {
		t.Errorf("%q: primary TLS config has a client certificate", dsn)
	}
	for _, f := range cfg.Fallbacks {
		if c := f.TLSConfig; c != nil && (len(c.Certificates) > 0 || c.GetClientCertificate != nil) {
			t.Errorf("%q: fallback TLS config has a client certificate", dsn)
		}
	}
	if cfg.ValidateConnect != nil || cfg.SSLCertMode != "disable" || cfg.DefaultQueryExecMode != pgx.QueryExecModeDescribeExec {
		t.Errorf("%q: validate %v, certmode %q, mode %v", dsn, cfg.ValidateConnect != nil, cfg.SSLCertMode, cfg.DefaultQueryExecMode)
	}
}

// fakePostgres asks every client for a cleartext password and reports it.
func fakePostgres(t *testing.T) (port int, passwords <-chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	got := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go askPassword(c, got)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, got
}

func askPassword(c net.Conn, got chan<- string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if be.Flush() != nil || be.SetAuthType(pgproto3.AuthTypeCleartextPassword) != nil {
		return
	}
	if msg, err := be.Receive(); err == nil {
		if pm, ok := msg.(*pgproto3.PasswordMessage); ok {
			got <- pm.Password
		}
	}
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
	_ = be.Flush()
}

func TestRoguePostgresServerGetsNoManagerPassword(t *testing.T) {
	managerEnvironment(t)
	port, passwords := fakePostgres(t)
	for _, dsn := range []string{
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=admin dbname=prod sslmode=disable",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=admin dbname=prod sslmode=disable password=",
	} {
		// The control: the plain driver sends the manager's password.
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		_ = stdlib.OpenDB(*cfg).PingContext(context.Background())
		if sent := receive(t, passwords); sent != envPassword && sent != filePassword {
			t.Fatalf("control: plain driver sent %q", sent)
		}

		g := openGuard(t, dsn, options(Postgres))
		_, err = g.Fingerprint(context.Background(), "SELECT 1", testKey)
		wantReason(t, err, ReasonAuthenticationFailed)
		if sent := receive(t, passwords); sent != "" {
			t.Fatalf("sqlguard sent the password %q", sent)
		}
	}
}

func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("the fake server got no password message")
		return ""
	}
}
