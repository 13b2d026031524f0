package sqlguard

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"hash"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// DB runs a tenant's query, one at a time, on at most one connection.
type DB struct {
	db      *sql.DB
	driver  string
	limits  Limits
	timeout time.Duration
	wire    *wire
	// allowPowerful skips the check of the user's powers.
	allowPowerful bool

	mu               sync.Mutex // one query at a time, so the wire counts one query
	broken           bool       // a driver panicked; the pool may be wedged
	mysqlTimeoutStmt int        // which timeout statement the server knows, -1 until found
}

// Open checks the DSN and prepares a DB; it connects only when a query
// runs. A refused DSN is a *DSNError.
func Open(dsn string, o Options) (*DB, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &wire{limit: o.Limits.wireLimit()}
	dial := w.dialer(o.Dial, o.IsDenied)
	var c driver.Connector
	if o.Driver == MySQL {
		c, err = mysqlConnector(dsn, o, dial)
	} else {
		c, err = pgConnector(dsn, o, dial)
	}
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	// Every query gets a new session: nothing a query leaves in one (a
	// named or advisory lock, a session variable, a role) reaches the
	// next, and the user's powers are checked again each time.
	db.SetMaxIdleConns(0)
	return &DB{db: db, driver: o.Driver, limits: o.Limits, timeout: o.StatementTimeout, wire: w, mysqlTimeoutStmt: -1,
		allowPowerful: o.AllowPowerfulUser}, nil
}

// Close closes the connection.
func (d *DB) Close() error { return d.db.Close() }

// Fingerprint runs query in a read-only transaction and returns the hex of
// newHash over the column names and every value of every row, in order.
// A query that is not a plain SELECT of the allow-lists is refused before
// anything is sent. Errors are *Error; their text is safe to show. After
// one whose message is "driver failed" the DB must be closed.
func (d *DB) Fingerprint(ctx context.Context, query string, newHash func() hash.Hash) (string, error) {
	if newHash == nil {
		return "", errors.New("sqlguard: newHash is required")
	}
	text, err := checkStatement(d.driver, query)
	if err != nil {
		reason, message := classify(err)
		return "", &Error{Reason: reason, Message: message}
	}
	return d.fingerprint(ctx, text, newHash)
}

// fingerprint runs text, already checked, with the server-side defences:
// the new session, the user's powers, the read-only transaction, the
// timeouts and the limits. Tests call it directly to prove that those
// hold on their own.
func (d *DB) fingerprint(ctx context.Context, text string, newHash func() hash.Hash) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken {
		return "", d.safeError(errDriverPanic)
	}
	d.wire.reset()
	ctx, cancel := context.WithTimeout(ctx, d.timeout+clientGrace)
	defer cancel()
	sum, err := d.run(ctx, text, newHash())
	if err != nil {
		return "", d.safeError(err)
	}
	return hex.EncodeToString(sum), nil
}

func (d *DB) run(ctx context.Context, query string, h hash.Hash) (sum []byte, err error) {
	defer recoverPanic(&err)
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, &connectError{err}
	}
	sum, err = d.inSession(ctx, conn, query, h)
	if err != nil {
		// Whatever the failure left in the session or on the wire, the
		// next query starts on a new connection, and what the driver
		// still reads from this one in the background counts for nothing.
		d.wire.retire()
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
	return sum, err
}

func (d *DB) inSession(ctx context.Context, conn *sql.Conn, query string, h hash.Hash) (sum []byte, err error) {
	defer recoverPanic(&err)
	var tx *sql.Tx
	if d.driver == MySQL {
		tx, err = d.mysqlSession(ctx, conn)
	} else {
		tx, err = d.pgSession(ctx, conn)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	if d.driver == MySQL {
		if err := explainGate(ctx, tx, query); err != nil {
			return nil, err
		}
	}
	return d.hash(ctx, tx, query, h)
}

// recoverPanic turns a driver's panic, which a hostile server may be able
// to provoke, into an error instead of a dead manager.
func recoverPanic(err *error) {
	if recover() != nil {
		*err = errDriverPanic
	}
}

func (d *DB) hash(ctx context.Context, tx *sql.Tx, query string, h hash.Hash) (sum []byte, err error) {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer func() {
		if isLimitError(err) {
			d.wire.trip() // so that Close does not drain the rest
		}
		_ = rows.Close()
	}()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	enc := newEncoder(h, d.limits)
	if err := enc.columns(cols); err != nil {
		return nil, err
	}
	cells := make([]cell, len(cols))
	dest := make([]any, len(cols))
	for i := range cells {
		dest[i] = &cells[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if err := enc.row(cells); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return enc.sum(), nil
}

func (d *DB) safeError(err error) *Error {
	if errors.Is(err, errDriverPanic) {
		d.broken = true
	}
	if !isLimitError(err) {
		if denied := d.wire.deniedErr(); denied != nil {
			// The caller's dial function wrote this text for this purpose.
			return &Error{Reason: ReasonAddressNotAllowed, Message: denied.Error()}
		}
		err = d.sizeError(err)
	}
	reason, message := classify(err)
	return &Error{Reason: reason, Message: message}
}

// sizeError names the limit behind a failure that the drivers report as a
// broken connection.
func (d *DB) sizeError(err error) error {
	var big *pgproto3.ExceededMaxBodyLenErr
	switch {
	case errors.As(err, &big):
		return rowTooLarge(d.limits.MaxRowBytes)
	case d.wire.tripped.Load():
		return resultTooLarge(d.limits.MaxResultBytes)
	}
	return err
}
