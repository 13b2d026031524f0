package sqlguard

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"
)

// Driver names accepted in Options.Driver.
const (
	MySQL    = "mysql"
	Postgres = "postgres"
)

// Defaults used for any Limits field or StatementTimeout left at zero.
const (
	DefaultMaxRows          = 10_000
	DefaultMaxRowBytes      = 64 << 10
	DefaultMaxResultBytes   = 4 << 20
	DefaultStatementTimeout = 10 * time.Second
)

// clientGrace lets the server's statement timeout fire first, so that the
// server stops the query itself and says so, before the client gives up.
const clientGrace = time.Second

// DialFunc makes every connection, so it is where the address policy lives.
// It gets host names unresolved (PostgreSQL's own lookup is bypassed) so
// that it can check the addresses it resolves them to, and "unix" only for
// sockets in AllowUnixSockets.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options says how to reach the tenant's database. Dial is required: it is
// where the caller decides which addresses a tenant may reach.
type Options struct {
	Driver string // MySQL or Postgres
	Dial   DialFunc
	// IsDenied reports whether an error from Dial is a refusal of the
	// address; nil means errors.As(err, interface{ Denied() bool }).
	IsDenied func(error) bool
	// AllowUnixSockets lists the only unix sockets a DSN may name, exactly
	// as written in it: the socket file for MySQL, the socket directory
	// (the host) for PostgreSQL.
	AllowUnixSockets []string
	Limits           Limits
	StatementTimeout time.Duration
	// AllowPowerfulUser accepts a DSN whose user may act outside the
	// database's own data (a superuser, FILE, SUPER, write privileges, …);
	// by default such a connection is refused before the query runs.
	AllowPowerfulUser bool
}

// Limits bound one result. Sizes count what the fingerprint hashes: every
// column name and value plus 9 bytes of framing each, and 1 byte per row.
type Limits struct {
	MaxRows        int
	MaxRowBytes    int
	MaxResultBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxRows <= 0 {
		l.MaxRows = DefaultMaxRows
	}
	if l.MaxRowBytes <= 0 {
		l.MaxRowBytes = DefaultMaxRowBytes
	}
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = DefaultMaxResultBytes
	}
	return l
}

// wireLimit is what one query may read from the network. Framing and binary
// encodings can make the wire larger than what is counted, hence the factor,
// and the handshake and our own statements need the fixed part.
func (l Limits) wireLimit() int64 {
	return 2*int64(l.MaxResultBytes) + 1<<20
}

func (o Options) withDefaults() (Options, error) {
	if o.Dial == nil {
		return o, errors.New("sqlguard: Options.Dial is required")
	}
	if o.Driver != MySQL && o.Driver != Postgres {
		return o, errors.New("sqlguard: Options.Driver must be mysql or postgres")
	}
	if o.IsDenied == nil {
		o.IsDenied = hasDenied
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	// Both servers read a timeout of 0 as "none".
	o.StatementTimeout = max(o.StatementTimeout, time.Millisecond)
	o.Limits = o.Limits.withDefaults()
	return o, nil
}

func hasDenied(err error) bool {
	var d interface{ Denied() bool }
	return errors.As(err, &d) && d.Denied()
}

func (o Options) unixSocketAllowed(path string) bool {
	return slices.Contains(o.AllowUnixSockets, path)
}
