package sqlguard

import (
	"context"
	"crypto/tls"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgMessageOverhead is room for messages other than a data row that grow
// with the row's shape: a row description of PostgreSQL's maximum of 1664
// columns with 63-byte names takes about 136 KiB.
const pgMessageOverhead = 256 << 10

// pgNeutralMarker is a setting only this package writes; seeing it parsed
// proves that the settings added around the tenant's string were read as
// settings.
const pgNeutralMarker = "sqlguard_neutral"

// pgAllowedKeys is everything a tenant needs to reach and log into a
// server, and nothing that reads a file, sets a runtime parameter or
// changes the protocol. target_session_attrs is left out: its check indexes
// the server's reply without looking, so a hostile server can make it panic,
// and default_transaction_read_only=on makes its read-write choices fail
// anyway.
func pgAllowedKeys(except string) []string {
	keys := []string{"host", "port", "user", "password", "dbname", "sslmode", "connect_timeout", "channel_binding", "sslsni"}
	return slices.DeleteFunc(keys, func(k string) bool { return k == except })
}

func pgKeyProblem(key string) string {
	switch key {
	case "passfile", "servicefile", "service", "sslkey", "sslcert", "sslrootcert":
		return "is not allowed: it makes the driver read the manager's files"
	case "sslpassword":
		return "is not allowed: it unlocks a key file of the manager"
	case "target_session_attrs":
		return "is not allowed: its check trusts the server's reply and cannot pass in a read-only session"
	case "default_query_exec_mode":
		return "is not allowed: the simple protocol would run several statements in one query"
	case "sslcertmode", "sslnegotiation", "krbsrvname", "krbspn", "require_auth", "min_protocol_version",
		"max_protocol_version", "statement_cache_capacity", "description_cache_capacity":
		return "is not allowed: it is not needed to run a query"
	}
	return "is not allowed: it would set a server runtime parameter"
}

func parsePG(dsn string, keys []string) (*pgx.ConnConfig, error) {
	return pgx.ParseConfigWithOptions(dsn, pgx.ParseConfigOptions{
		ParseConfigOptions: pgconn.ParseConfigOptions{ConnStringAllowedKeys: keys},
	})
}

// refusedKey takes the refused key's name from the end of the parser's
// message, after the connection string it quotes: the key is %q-quoted
// there, so nothing inside the quoted string can fake the last match.
func refusedKey(err error) (string, bool) {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "", false
	}
	const prefix, suffix = `: connection string key "`, ` is not in ConnStringAllowedKeys`
	msg, ok := strings.CutSuffix(pe.Error(), suffix)
	i := strings.LastIndex(msg, prefix)
	if !ok || i < 0 {
		return "", false
	}
	key, err := strconv.Unquote(msg[i+len(prefix)-1:])
	return key, err == nil
}

func pgDSNError(err error) error {
	if key, ok := refusedKey(err); ok {
		return notAllowed(key, pgKeyProblem(key))
	}
	return invalidDSN(Postgres)
}

// pgHasKey tells whether the tenant's string itself sets key: the parser
// refuses keys before it merges the environment in, so refusing only that
// key answers for the string alone.
func pgHasKey(dsn, key string) bool {
	_, err := parsePG(dsn, pgAllowedKeys(key))
	got, ok := refusedKey(err)
	return ok && got == key
}

func pgConnector(dsn string, o Options, dial DialFunc) (driver.Connector, error) {
	cfg, err := pgConfig(dsn, o, dial)
	if err != nil {
		return nil, err
	}
	return stdlib.GetConnector(*cfg), nil
}

func pgConfig(dsn string, o Options, dial DialFunc) (*pgx.ConnConfig, error) {
	first, err := parsePG(dsn, pgAllowedKeys(""))
	if err != nil {
		return nil, pgDSNError(err)
	}
	if !pgHasKey(dsn, "host") {
		return nil, notAllowed("host", "is required: without it the driver uses a local socket or the manager's PGHOST")
	}
	cfg, err := pgNeutralParse(dsn, first)
	if err != nil {
		return nil, err
	}
	if !pgHasKey(dsn, "password") {
		cfg.Password = "" // else PGPASSWORD would be sent to the tenant's server
	}
	if err := checkPGHosts(cfg, o); err != nil {
		return nil, err
	}
	hardenPG(cfg, o, dial)
	return cfg, nil
}

// pgNeutralParse parses the tenant's string again with settings it may not
// write itself: an empty passfile, so that an explicitly empty password is
// not filled in from the manager's ~/.pgpass, and sslcertmode=disable, so
// that the manager's client certificate files are not read.
func pgNeutralParse(dsn string, first *pgx.ConnConfig) (*pgx.ConnConfig, error) {
	keys := append(pgAllowedKeys(""), "passfile", "sslcertmode", pgNeutralMarker)
	for _, s := range pgNeutralized(dsn) {
		cfg, err := parsePG(s, keys)
		if err == nil && cfg.RuntimeParams[pgNeutralMarker] == "1" && sameTarget(cfg, first) {
			return cfg, nil
		}
	}
	return nil, invalidDSN(Postgres)
}

// pgNeutralized places the added settings where the parser reads them
// without letting the tenant's text override them: before it in the
// keyword/value form (whose pairs are read one by one), after it in a URL
// (whose last occurrence wins). Whether the URL already has a query is left
// to the parser: only the candidate in which the marker shows up is used.
func pgNeutralized(dsn string) []string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		q := "passfile=&sslcertmode=disable&" + pgNeutralMarker + "=1"
		return []string{dsn + "&" + q, dsn + "?" + q}
	}
	return []string{"passfile='' sslcertmode=disable " + pgNeutralMarker + "=1 " + dsn}
}

func sameTarget(a, b *pgx.ConnConfig) bool {
	if a.Database != b.Database || a.User != b.User || len(a.Fallbacks) != len(b.Fallbacks) {
		return false
	}
	if a.Host != b.Host || a.Port != b.Port || (a.TLSConfig == nil) != (b.TLSConfig == nil) {
		return false
	}
	for i, f := range a.Fallbacks {
		g := b.Fallbacks[i]
		if f.Host != g.Host || f.Port != g.Port || (f.TLSConfig == nil) != (g.TLSConfig == nil) {
			return false
		}
	}
	return true
}

func checkPGHosts(cfg *pgx.ConnConfig, o Options) error {
	hosts := []string{cfg.Host}
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if network, _ := pgconn.NetworkAddress(h, cfg.Port); network == "unix" && !o.unixSocketAllowed(h) {
			return notAllowed("host", "is not allowed: the unix socket is not in the allowed list")
		}
	}
	return nil
}

// hardenPG replaces everything the environment, the home directory or the
// driver's defaults put in the configuration that is not the tenant's to
// have.
func hardenPG(cfg *pgx.ConnConfig, o Options, dial DialFunc) {
	cfg.TLSConfig = withoutClientCert(cfg.TLSConfig)
	for _, f := range cfg.Fallbacks {
		f.TLSConfig = withoutClientCert(f.TLSConfig)
	}
	cfg.SSLCertMode = "disable"
	cfg.RuntimeParams = map[string]string{
		"application_name":              "runbook-rebootpolicy",
		"default_transaction_read_only": "on",
		// The statement check reads string literals this way; a role's
		// default of off would make the server read them otherwise.
		"standard_conforming_strings": "on",
		"statement_timeout":           strconv.FormatInt(o.StatementTimeout.Milliseconds(), 10),
	}
	cfg.ValidateConnect, cfg.AfterConnect, cfg.AfterNetConnect = nil, nil, nil
	cfg.OnNotice, cfg.OnNotification, cfg.OAuthTokenProvider = nil, nil, nil
	cfg.KerberosSrvName, cfg.KerberosSpn = "", ""
	cfg.Tracer = nil
	cfg.DialFunc = pgconn.DialFunc(dial)
	// The caller's dial function sees the host name and resolves it under
	// its own policy.
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	cfg.MaxProtocolMessageBodyLen = o.Limits.MaxRowBytes + pgMessageOverhead
	// The extended protocol refuses several statements in one query; this
	// mode also keeps no statement cache.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	cfg.StatementCacheCapacity, cfg.DescriptionCacheCapacity = 0, 0
}

func withoutClientCert(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	c.Certificates, c.GetClientCertificate = nil, nil
	return c
}

// pgSession opens the read-only transaction. Its first statement sets
// the timeout, puts pg_catalog first in the search path (so that an
// allowed function's name finds the built-in, not a tenant's function of
// the same name) and reports the user's powers; as a SELECT it also takes
// the transaction's snapshot, after which PostgreSQL refuses
// SET transaction_read_only = off.
func (d *DB) pgSession(ctx context.Context, conn *sql.Conn) (*sql.Tx, error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("SELECT pg_catalog.set_config('statement_timeout', '%d', true), "+
		"pg_catalog.set_config('search_path', 'pg_catalog, ' || pg_catalog.current_setting('search_path'), true), %s",
		d.timeout.Milliseconds(), pgPowerColumns())
	var timeout, path string
	powers := make([]bool, 1+len(pgPowers))
	dest := []any{&timeout, &path}
	for i := range powers {
		dest = append(dest, &powers[i])
	}
	if err := tx.QueryRowContext(ctx, q).Scan(dest...); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	if !d.allowPowerful {
		if err := pgPowerError(powers); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
	}
	return tx, nil
}
