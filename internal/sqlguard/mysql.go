package sqlguard

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// mysqlParamProblem says why a DSN parameter is refused, or "" if it is
// allowed. Anything the driver does not know becomes a system variable set
// at connect time, so the allow-list is what keeps those out.
func mysqlParamProblem(key string) string {
	switch key {
	case "tls", "timeout", "readTimeout", "writeTimeout", "charset", "collation", "parseTime", "loc":
		return ""
	case "allowAllFiles":
		return "is not allowed: it lets the server read the manager's files"
	case "multiStatements":
		return "is not allowed: it runs several statements in one query"
	case "compress":
		return "is not allowed: compressed results would defeat the size limits"
	case "allowCleartextPasswords", "allowOldPasswords":
		return "is not allowed: it weakens authentication"
	case "interpolateParams":
		return "is not allowed: it changes how statements are sent"
	case "serverPubKey":
		return "is not allowed: it names a key registered in the manager"
	case "allowFallbackToPlaintext", "allowNativePasswords", "checkConnLiveness", "clientFoundRows",
		"columnsWithAlias", "connectionAttributes", "maxAllowedPacket", "rejectReadOnly", "strict", "timeTruncate":
		return "is not allowed: it is not needed to run a query"
	}
	return "is not allowed: it would set a server system variable"
}

// mysqlParams returns the DSN's raw parameters, split exactly as the driver
// splits them (after the last '/', after the first '?', on '&', pairs with
// an '=' only), so that the allow-list sees what the driver will act on.
func mysqlParams(dsn string) map[string]string {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return nil
	}
	_, query, ok := strings.Cut(dsn[slash+1:], "?")
	if !ok {
		return nil
	}
	params := make(map[string]string)
	for pair := range strings.SplitSeq(query, "&") {
		if k, v, found := strings.Cut(pair, "="); found {
			params[k] = v
		}
	}
	return params
}

func mysqlConnector(dsn string, o Options, dial DialFunc) (driver.Connector, error) {
	params := mysqlParams(dsn)
	for k := range params {
		if p := mysqlParamProblem(k); p != "" {
			return nil, notAllowed(k, p)
		}
	}
	if v, ok := params["tls"]; ok && !builtinTLS(v) {
		return nil, notAllowed("tls", tlsProblem)
	}
	parsed, err := parseMySQLDSN(dsn)
	if err != nil {
		return nil, err
	}
	if err := checkMySQL(parsed, o); err != nil {
		return nil, err
	}
	cfg, err := rebuildMySQL(parsed, params["charset"], dial)
	if err != nil {
		return nil, err
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, invalidDSN(MySQL)
	}
	return c, nil
}

// parseMySQLDSN never passes the parser's error on: it quotes values.
func parseMySQLDSN(dsn string) (cfg *mysql.Config, err error) {
	defer func() {
		// The driver panics on some parameters (strict); a tenant's string
		// must not take the manager down.
		if recover() != nil {
			cfg, err = nil, invalidDSN(MySQL)
		}
	}()
	cfg, err = mysql.ParseDSN(dsn)
	if err != nil {
		return nil, invalidDSN(MySQL)
	}
	return cfg, nil
}

// checkMySQL re-checks the parsed result, in case the driver reads a
// parameter differently from mysqlParams.
func checkMySQL(c *mysql.Config, o Options) error {
	for _, f := range []struct {
		on  bool
		key string
	}{
		{c.AllowAllFiles, "allowAllFiles"},
		{c.MultiStatements, "multiStatements"},
		{c.InterpolateParams, "interpolateParams"},
		{c.AllowCleartextPasswords, "allowCleartextPasswords"},
		{c.AllowOldPasswords, "allowOldPasswords"},
	} {
		if f.on {
			return notAllowed(f.key, mysqlParamProblem(f.key))
		}
	}
	if len(c.Params) > 0 {
		return &DSNError{Reason: ReasonDSNNotAllowed, Detail: "sets a server system variable, which is not allowed"}
	}
	if c.TLSConfig != "" && !builtinTLS(c.TLSConfig) {
		return notAllowed("tls", tlsProblem)
	}
	switch c.Net {
	case "tcp", "tcp6":
	case "unix":
		if !o.unixSocketAllowed(c.Addr) {
			return notAllowed("unix", "is not allowed: the socket is not in the allowed list")
		}
	default:
		return notAllowed("protocol", "is not allowed: only tcp, tcp6 and allowed unix sockets are")
	}
	return nil
}

const tlsProblem = "is not allowed with this value: only true, false, skip-verify and preferred are"

// builtinTLS accepts the driver's own TLS modes; any other value names a
// configuration registered in the manager's process.
func builtinTLS(v string) bool {
	switch strings.ToLower(v) {
	case "1", "0", "true", "false", "skip-verify", "preferred":
		return true
	}
	return false
}

// rebuildMySQL copies the allowed fields into a fresh configuration, so that
// whatever else the parser may have set is left behind.
func rebuildMySQL(p *mysql.Config, charset string, dial DialFunc) (*mysql.Config, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd = p.User, p.Passwd
	c.Net, c.Addr, c.DBName = p.Net, p.Addr, p.DBName
	c.TLSConfig = p.TLSConfig
	c.Timeout, c.ReadTimeout, c.WriteTimeout = p.Timeout, p.ReadTimeout, p.WriteTimeout
	c.ParseTime, c.Loc = p.ParseTime, p.Loc
	c.Logger = &mysql.NopLogger{} // the driver logs server-chosen text
	c.DialFunc = dial
	if !plainName(charset) || !plainName(p.Collation) {
		return nil, notAllowed("charset", "is not allowed: charset and collation must be single names")
	}
	c.Collation = p.Collation // sent as an id in the handshake
	if charset != "" {
		if err := c.Apply(mysql.Charset(charset, p.Collation)); err != nil {
			return nil, invalidDSN(MySQL)
		}
	}
	return c, nil
}

// plainName keeps the driver's SET NAMES statement free of anything but a
// name.
func plainName(s string) bool {
	for _, r := range s {
		if !isLetter(r) && !isDigit(r) && r != '_' {
			return false
		}
	}
	return true
}

// mysqlSession prepares the connection for one query and opens its
// read-only transaction. The session is made read-only first because DDL
// commits implicitly: it would leave a read-only transaction and run
// outside it, but it is refused in a read-only session.
func (d *DB) mysqlSession(ctx context.Context, conn *sql.Conn) (*sql.Tx, error) {
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION READ ONLY"); err != nil {
		return nil, err
	}
	if err := d.mysqlTimeout(ctx, conn); err != nil {
		return nil, err
	}
	if !d.allowPowerful {
		if err := d.checkMySQLPowers(ctx, conn); err != nil {
			return nil, err
		}
	}
	return conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
}

// mysqlTimeout sets MariaDB's max_statement_time (seconds) or, where that
// is unknown, MySQL's max_execution_time (milliseconds).
func (d *DB) mysqlTimeout(ctx context.Context, conn *sql.Conn) error {
	stmts := []string{
		fmt.Sprintf("SET SESSION max_statement_time=%.3f", d.timeout.Seconds()),
		fmt.Sprintf("SET SESSION max_execution_time=%d", d.timeout.Milliseconds()),
	}
	if d.mysqlTimeoutStmt >= 0 {
		_, err := conn.ExecContext(ctx, stmts[d.mysqlTimeoutStmt])
		return err
	}
	var err error
	for i, s := range stmts {
		if _, err = conn.ExecContext(ctx, s); !isMySQLError(err, 1193) {
			if err == nil {
				d.mysqlTimeoutStmt = i
			}
			return err
		}
	}
	return err
}

// explainGate has the server's grammar classify the statement: EXPLAIN
// FORMAT=JSON accepts only SELECT-like statements and DML, and the read-only
// transaction then refuses the DML. The format matters: a plain EXPLAIN also
// means DESCRIBE <table> [<column>], so "TRUNCATE t" or "SHUTDOWN" would
// pass it in a database that has a table named like the keyword.
func explainGate(ctx context.Context, tx *sql.Tx, query string) error {
	rows, err := tx.QueryContext(ctx, "EXPLAIN FORMAT=JSON "+query)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1064 {
			return &notAQueryError{err: me}
		}
		return err
	}
	return rows.Close()
}

func isMySQLError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}
