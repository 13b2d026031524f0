package sqlguard

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// wire is shared by every connection of one DB. It counts what they read
// since the current query started, because the drivers buffer on their own:
// a row or a result they are reading, or discarding when rows are closed
// early, never reaches the per-row accounting until it is complete.
type wire struct {
	limit   int64
	used    atomic.Int64
	tripped atomic.Bool
	// generation retires connections: one dialled before the last retire
	// reads nothing more. A driver may still read from a connection it is
	// closing in the background (pgx drains it while it sends Terminate);
	// those reads must neither count against the next query's budget nor
	// trip it.
	generation atomic.Uint64

	mu     sync.Mutex
	denied error // the caller's refusal of an address during this query
}

var (
	errWireLimit = errors.New("sqlguard: read limit reached")
	errRetired   = errors.New("sqlguard: connection retired after an error")
)

// reset starts a new query's budget; DB serialises queries, so there is one
// query at a time to count for.
func (w *wire) reset() {
	w.used.Store(0)
	w.tripped.Store(false)
	w.mu.Lock()
	w.denied = nil
	w.mu.Unlock()
}

// retire makes every connection dialled so far read nothing more; the
// next query dials a new one.
func (w *wire) retire() { w.generation.Add(1) }

// trip makes every further read fail, so that closing rows early does not
// make the driver drain the rest of a hostile result.
func (w *wire) trip() { w.tripped.Store(true) }

func (w *wire) deniedErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.denied
}

func (w *wire) dialer(next DialFunc, isDenied func(error) bool) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			if isDenied(err) {
				w.mu.Lock()
				w.denied = innermostDenied(err, isDenied)
				w.mu.Unlock()
			}
			return nil, err
		}
		return &meteredConn{Conn: c, w: w, generation: w.generation.Load()}, nil
	}
}

type meteredConn struct {
	net.Conn
	w          *wire
	generation uint64
}

func (c *meteredConn) Read(p []byte) (int, error) {
	if c.generation != c.w.generation.Load() {
		return 0, errRetired
	}
	if c.w.tripped.Load() {
		return 0, errWireLimit
	}
	// Never ask the kernel for more than the budget allows, so the limit
	// holds to the byte whatever buffer size the driver passes.
	if room := c.w.limit - c.w.used.Load() + 1; room < int64(len(p)) {
		p = p[:max(room, 1)]
	}
	n, err := c.Conn.Read(p)
	if c.w.used.Add(int64(n)) > c.w.limit {
		c.w.trip()
		return 0, errWireLimit
	}
	return n, err
}

// innermostDenied digs to the refusal itself: wrappers such as *net.OpError
// add the address to the text, and only the refusal's own text is fixed.
func innermostDenied(err error, isDenied func(error) bool) error {
	for {
		next := errors.Unwrap(err)
		if next == nil || !isDenied(next) {
			return err
		}
		err = next
	}
}
