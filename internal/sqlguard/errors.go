package sqlguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reasons are stable words for a status condition; each error of this
// package has exactly one.
const (
	ReasonDSNNotAllowed        = "DSNNotAllowed"
	ReasonInvalidDSN           = "InvalidDSN"
	ReasonAddressNotAllowed    = "AddressNotAllowed"
	ReasonConnectFailed        = "ConnectFailed"
	ReasonAuthenticationFailed = "AuthenticationFailed"
	ReasonQueryNotAllowed      = "QueryNotAllowed"
	ReasonQueryFailed          = "QueryFailed"
	ReasonResultTooLarge       = "ResultTooLarge"
	ReasonTimeout              = "Timeout"
)

// DSNError refuses a DSN. It may name a parameter but never carries a value:
// DSNs hold passwords, and a misplaced one can land anywhere in the string.
type DSNError struct {
	Reason string // ReasonDSNNotAllowed or ReasonInvalidDSN
	// Param is "" when the string was refused as a whole or when the
	// parameter's name is not a plain word (then the name itself might be a
	// mistyped secret).
	Param  string
	Detail string // a fixed phrase of this package
}

func (e *DSNError) Error() string {
	if e.Param == "" {
		return "DSN " + e.Detail
	}
	return "DSN parameter " + e.Param + " " + e.Detail
}

func notAllowed(param, detail string) *DSNError {
	return &DSNError{Reason: ReasonDSNNotAllowed, Param: plainWord(param), Detail: detail}
}

func invalidDSN(driverName string) *DSNError {
	return &DSNError{Reason: ReasonInvalidDSN, Detail: "could not be parsed by the " + driverName + " driver"}
}

// plainWord lets a parameter name through only if it looks like one; a
// tenant-written key is otherwise arbitrary text.
func plainWord(s string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	if r := rune(s[0]); !isLetter(r) || !plainName(s) {
		return ""
	}
	return s
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
func isDigit(r rune) bool  { return r >= '0' && r <= '9' }

// Error is what Open and Fingerprint return for anything but a refused DSN.
// Its text is already safe for a status, an event or a log; the driver's
// error is deliberately not kept, so nothing can print it later.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Describe turns any error from this package, or a raw driver error, into a
// reason and a message that carry no data.
func Describe(err error) (reason, message string) {
	if err == nil {
		return "", ""
	}
	var de *DSNError
	if errors.As(err, &de) {
		return de.Reason, de.Error()
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, e.Message
	}
	return classify(err)
}

// limitError is a bound of Limits being crossed.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func tooManyRows(n int) error     { return &limitError{fmt.Sprintf("result exceeds %d rows", n)} }
func rowTooLarge(n int) error     { return &limitError{fmt.Sprintf("a row exceeds %d bytes", n)} }
func resultTooLarge(n int) error  { return &limitError{fmt.Sprintf("result exceeds %d bytes", n)} }
func isLimitError(err error) bool { var le *limitError; return errors.As(err, &le) }

// connectError marks an error met while getting a connection, so that a
// server error there reads as a connection failure.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// notAQueryError is MySQL's EXPLAIN refusing the statement.
type notAQueryError struct{ err *mysql.MySQLError }

func (e *notAQueryError) Error() string { return e.err.Error() }

var errDriverPanic = errors.New("driver panicked")

func classify(err error) (reason, message string) {
	var le *limitError
	var nq *notAQueryError
	var se *statementError
	var pw *powerError
	switch {
	case errors.As(err, &se):
		return ReasonQueryNotAllowed, se.Error()
	case errors.As(err, &pw):
		return ReasonDSNTooPowerful, pw.Error()
	case errors.As(err, &le):
		return ReasonResultTooLarge, "result too large: " + le.msg
	case errors.As(err, &nq):
		return ReasonQueryNotAllowed, "query refused: EXPLAIN rejected it (" + mysqlCode(nq.err) + "); only SELECT, WITH and VALUES queries can run"
	case errors.Is(err, errDriverPanic):
		return ReasonQueryFailed, "driver failed"
	case errors.Is(err, context.Canceled):
		return ReasonTimeout, "canceled"
	case isTimeout(err):
		return ReasonTimeout, "timed out"
	}
	connecting := isConnecting(err)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgReason(pe, connecting)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return mysqlReason(me, connecting)
	}
	return classifyTransport(err, connecting)
}

func isConnecting(err error) bool {
	var ce *connectError
	var pce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.As(err, &pce)
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func classifyTransport(err error, connecting bool) (reason, message string) {
	switch {
	case errors.Is(err, mysql.ErrCleartextPassword), errors.Is(err, mysql.ErrOldPassword),
		errors.Is(err, mysql.ErrNativePassword), errors.Is(err, mysql.ErrUnknownPlugin):
		return ReasonAuthenticationFailed, "authentication failed: the server asked for a method that is not allowed"
	case errors.Is(err, mysql.ErrNoTLS):
		return ReasonConnectFailed, "connection failed: the server does not offer TLS"
	case isTLSError(err):
		return ReasonConnectFailed, "connection failed: TLS handshake or certificate refused"
	case connecting:
		return ReasonConnectFailed, "connection failed"
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return ReasonConnectFailed, "connection lost"
	}
	return ReasonQueryFailed, "query failed"
}

func isTLSError(err error) bool {
	var (
		rh  tls.RecordHeaderError
		ve  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		inv x509.CertificateInvalidError
		al  tls.AlertError
	)
	return errors.As(err, &rh) || errors.As(err, &ve) || errors.As(err, &ua) ||
		errors.As(err, &he) || errors.As(err, &inv) || errors.As(err, &al)
}

func pgReason(pe *pgconn.PgError, connecting bool) (reason, message string) {
	code := "SQLSTATE " + sqlState(pe.Code)
	switch {
	case strings.HasPrefix(pe.Code, "28"):
		return ReasonAuthenticationFailed, "authentication failed (" + code + ")"
	case pe.Code == "25006":
		return ReasonQueryNotAllowed, "read-only transaction refused a write (" + code + ")"
	case pe.Code == "57014":
		return ReasonTimeout, "timed out (" + code + ")"
	case connecting || strings.HasPrefix(pe.Code, "08"):
		return ReasonConnectFailed, "connection failed (" + code + ")"
	}
	return ReasonQueryFailed, "query failed: " + code
}

func mysqlReason(me *mysql.MySQLError, connecting bool) (reason, message string) {
	code := mysqlCode(me)
	state := string(me.SQLState[:])
	switch {
	case me.Number == 1044 || me.Number == 1045 || me.Number == 1698 || strings.HasPrefix(state, "28"):
		return ReasonAuthenticationFailed, "authentication failed (" + code + ")"
	case me.Number == 1792 || state == "25006":
		return ReasonQueryNotAllowed, "read-only transaction refused a write (" + code + ")"
	case me.Number == 1969 || me.Number == 3024:
		return ReasonTimeout, "timed out (" + code + ")"
	case connecting:
		return ReasonConnectFailed, "connection failed (" + code + ")"
	}
	return ReasonQueryFailed, "query failed: " + code
}

func mysqlCode(me *mysql.MySQLError) string {
	code := fmt.Sprintf("MySQL error %d", me.Number)
	if s := string(me.SQLState[:]); validSQLState(s) {
		code += " (SQLSTATE " + s + ")"
	}
	return code
}

// sqlState passes on a code only in its documented shape: a hostile server
// chooses these bytes too.
func sqlState(s string) string {
	if validSQLState(s) {
		return s
	}
	return "?????"
}

func validSQLState(s string) bool {
	if len(s) != 5 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}
