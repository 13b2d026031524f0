package sqlguard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

const dataSecret = "s3cr3t-VALUE-42"

func TestErrorsCarryNoData(t *testing.T) {
	cases := []struct {
		be      backend
		setup   string // %s is a table
		query   string
		reason  string
		message string
	}{
		{backends()[1], "", "SELECT CAST('" + dataSecret + "' AS int)", ReasonQueryFailed, "query failed: SQLSTATE 22P02"},
		{backends()[1], "INSERT INTO %s VALUES (1, '" + dataSecret + "')", "SELECT CAST(name AS int) FROM %s", ReasonQueryFailed, "query failed: SQLSTATE 22P02"},
		{backends()[0], "", "SELECT EXTRACTVALUE('<a/>', '] " + dataSecret + "')", ReasonQueryFailed, "query failed: MySQL error 1105 (SQLSTATE HY000)"},
	}
	for _, c := range cases {
		plain := c.be.plain(t)
		table := randomName(t, "sg_err")
		mustExec(t, plain, "CREATE TABLE "+table+" (id INT, name VARCHAR(64))")
		t.Cleanup(func() { _, _ = plain.ExecContext(context.Background(), "DROP TABLE "+table) })
		if c.setup != "" {
			mustExec(t, plain, strings.ReplaceAll(c.setup, "%s", table))
		}
		q := strings.ReplaceAll(c.query, "%s", table)
		// The control: the driver's own message carries the value.
		if _, err := plain.ExecContext(context.Background(), q); err == nil || !strings.Contains(err.Error(), dataSecret) {
			t.Fatalf("control %q: %v", q, err)
		}
		g := openGuard(t, c.be.dsn, options(c.be.driver))
		_, err := g.Fingerprint(context.Background(), q, testKey)
		if reason, msg := Describe(err); reason != c.reason || msg != c.message || err.Error() != msg {
			t.Errorf("%q: %s %q (%q), want %s %q", q, reason, msg, err, c.reason, c.message)
		}
		assertSafe(t, err, dataSecret)
	}
}

func TestAuthenticationErrorsCarryNoPassword(t *testing.T) {
	const pw = "S3cretPassw0rd"
	for _, c := range []struct{ driver, dsn string }{
		{MySQL, "root:" + pw + "@tcp(127.0.0.1:3306)/test"},
		{Postgres, "host=127.0.0.1 user=nosuchuser_" + pw + " password=" + pw + " dbname=test sslmode=disable"},
	} {
		_, err := openGuard(t, c.dsn, options(c.driver)).Fingerprint(context.Background(), "SELECT 1", testKey)
		wantReason(t, err, ReasonAuthenticationFailed)
		assertSafe(t, err, pw, "nosuchuser", "root")
	}
}

func TestDescribeRawErrors(t *testing.T) {
	secretErr := errors.New(dataSecret)
	cases := []struct {
		err             error
		reason, message string
	}{
		{nil, "", ""},
		{&pgconn.PgError{Code: "22P02", Message: dataSecret, Detail: dataSecret}, ReasonQueryFailed, "query failed: SQLSTATE 22P02"},
		{&pgconn.PgError{Code: "28P01", Message: dataSecret}, ReasonAuthenticationFailed, "authentication failed (SQLSTATE 28P01)"},
		{&pgconn.PgError{Code: "25006", Message: dataSecret}, ReasonQueryNotAllowed, "read-only transaction refused a write (SQLSTATE 25006)"},
		{&pgconn.PgError{Code: "57014", Message: dataSecret}, ReasonTimeout, "timed out (SQLSTATE 57014)"},
		{&pgconn.PgError{Code: "3D000", Message: dataSecret}, ReasonQueryFailed, "query failed: SQLSTATE 3D000"},
		{&connectError{&pgconn.PgError{Code: "3D000"}}, ReasonConnectFailed, "connection failed (SQLSTATE 3D000)"},
		{&pgconn.PgError{Code: dataSecret[:5]}, ReasonQueryFailed, "query failed: SQLSTATE ?????"},
		{&mysql.MySQLError{Number: 1292, SQLState: [5]byte{'2', '2', '0', '0', '7'}, Message: dataSecret}, ReasonQueryFailed, "query failed: MySQL error 1292 (SQLSTATE 22007)"},
		{&mysql.MySQLError{Number: 1045, SQLState: [5]byte{'2', '8', '0', '0', '0'}, Message: dataSecret}, ReasonAuthenticationFailed, "authentication failed (MySQL error 1045 (SQLSTATE 28000))"},
		{&mysql.MySQLError{Number: 1792, Message: dataSecret}, ReasonQueryNotAllowed, "read-only transaction refused a write (MySQL error 1792)"},
		{&mysql.MySQLError{Number: 1969, Message: dataSecret}, ReasonTimeout, "timed out (MySQL error 1969)"},
		{fmt.Errorf("%s: %w", dataSecret, context.DeadlineExceeded), ReasonTimeout, "timed out"},
		{fmt.Errorf("%s: %w", dataSecret, context.Canceled), ReasonTimeout, "canceled"},
		{fmt.Errorf("%s: %w", dataSecret, mysql.ErrCleartextPassword), ReasonAuthenticationFailed, "authentication failed: the server asked for a method that is not allowed"},
		{fmt.Errorf("%s: %w", dataSecret, mysql.ErrInvalidConn), ReasonConnectFailed, "connection lost"},
		{&connectError{secretErr}, ReasonConnectFailed, "connection failed"},
		{secretErr, ReasonQueryFailed, "query failed"},
		{resultTooLarge(10), ReasonResultTooLarge, "result too large: result exceeds 10 bytes"},
		{fmt.Errorf("%s: %w", dataSecret, &Error{Reason: ReasonTimeout, Message: "timed out"}), ReasonTimeout, "timed out"},
		{fmt.Errorf("%s: %w", dataSecret, notAllowed("passfile", "is not allowed")), ReasonDSNNotAllowed, "DSN parameter passfile is not allowed"},
	}
	for _, c := range cases {
		if reason, msg := Describe(c.err); reason != c.reason || msg != c.message {
			t.Errorf("Describe(%v) = %s %q, want %s %q", c.err, reason, msg, c.reason, c.message)
		}
	}
}
