package rebootpolicy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// Connection pool of httpGet probes. A probe is one request at a time on a
// kept-alive connection, sent and read in the worker's own goroutine
// (http_exchange.go). net/http's Transport would run two goroutines per
// connection and hand every request and answer between them and the
// caller; at thousands of probes a second those hand-offs, the per-request
// contexts and goroutines around them were most of the manager's CPU, and
// a busy moment turned into thousands of connections (docs/rebootpolicy.md,
// Cost). A connection here is a socket and a read buffer, nothing else.

const (
	// maxConnsPerHost bounds the connections one namespace's probes keep
	// to one target, busy and idle alike. Probes of a namespace share them
	// by keep-alive: thousands of probes at a one-second period need a
	// handful of connections, not one each. It is above the default
	// --probe-max-per-namespace (100): at the defaults no probe ever waits
	// for a connection; past it a probe waits within its own timeout.
	maxConnsPerHost = 128
	// idleConnTimeout closes a connection no probe used for this long.
	idleConnTimeout = 90 * time.Second
	// readBufferSize is a connection's read buffer: a probe's answer is a
	// status line, a few headers and a body that is thrown away.
	readBufferSize = 4 << 10
	// maxDialsPerHost bounds the connections being opened to one target
	// at once; other probes wait for one of those or for a busy one to be
	// given back, whichever comes first. Without it a moment in which the
	// target (or the manager) answered slowly made every probe of that
	// moment dial: 10,000 probes on two busy cores opened 19,000
	// connections while settling, and the dials themselves (a SYN queue
	// that overflows retries after a second) made more probes late.
	maxDialsPerHost = 2
)

// errPoolTimeout: no connection became free before the probe's deadline.
var errPoolTimeout = &poolTimeoutError{}

type poolTimeoutError struct{}

func (*poolTimeoutError) Error() string   { return "no connection free before the deadline" }
func (*poolTimeoutError) Timeout() bool   { return true }
func (*poolTimeoutError) Temporary() bool { return true }

var _ net.Error = errPoolTimeout

// connKey is where a connection goes: what is dialled, and whether (with
// which server name) TLS runs on it.
type connKey struct {
	addr       string
	tls        bool
	serverName string
}

// httpPool keeps one namespace's connections, by target. One pool per
// namespace: a connection the network policy allowed for one namespace's
// probe is never handed to another's whose policy would refuse it.
type httpPool struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxConns    int
	idleTimeout time.Duration

	mu     sync.Mutex
	hosts  map[connKey]*hostConns
	closed bool
}

type hostConns struct {
	// idle holds the connections nobody uses, least recently used first:
	// the last one is taken, so surplus ones age out.
	idle []*probeConn
	// open counts idle and busy connections, and those being dialled;
	// dialing counts the latter.
	open, dialing int
	// waiters are probes waiting at the bound; freed is closed (and
	// replaced) when a connection is given back or closed while any wait.
	waiters int
	freed   chan struct{}
}

func newHTTPPool(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *httpPool {
	return &httpPool{dial: dial, maxConns: maxConnsPerHost, idleTimeout: idleConnTimeout, hosts: map[connKey]*hostConns{}}
}

// probeConn is one kept-alive connection.
type probeConn struct {
	key  connKey
	conn net.Conn
	// lim bounds what the next read of an answer may take from conn.
	lim *limitedConn
	br  *bufio.Reader
	// reused: it served an earlier request (the server may have closed it
	// since, which a request finds out only by trying).
	reused    bool
	idleSince time.Time
}

// limitedConn reads at most n more bytes of conn.
type limitedConn struct {
	conn net.Conn
	n    int64
}

var errAnswerTooLarge = errors.New("answer too large")

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.conn.Read(p)
	l.n -= int64(n)
	return n, err
}

func (p *httpPool) host(key connKey) *hostConns {
	hc := p.hosts[key]
	if hc == nil {
		hc = &hostConns{}
		p.hosts[key] = hc
	}
	return hc
}

// get returns an idle connection to key, or a new one while fewer than
// maxConns are open, or waits for one until deadline.
func (p *httpPool) get(ctx context.Context, key connKey, deadline time.Time) (*probeConn, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		p.mu.Lock()
		hc := p.host(key)
		expired := hc.expire(now, p.idleTimeout)
		pc := hc.takeIdle()
		dial := pc == nil && hc.open < p.maxConns && hc.dialing < maxDialsPerHost
		if dial {
			hc.open++
			hc.dialing++
		}
		var freed chan struct{}
		if pc == nil && !dial {
			hc.waiters++
			if hc.freed == nil {
				hc.freed = make(chan struct{})
			}
			freed = hc.freed
		}
		p.mu.Unlock()
		p.closeConns(expired)
		switch {
		case pc != nil:
			return pc, nil
		case dial:
			return p.open(ctx, key, deadline)
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = ctx.Err()
		case <-timer.C:
			err = errPoolTimeout
		}
		p.mu.Lock()
		hc.waiters--
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// open dials key (its slot is counted already) and gives the slot back if
// that fails.
func (p *httpPool) open(ctx context.Context, key connKey, deadline time.Time) (*probeConn, error) {
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := p.dial(dctx, "tcp", key.addr)
	if err == nil && key.tls {
		//nolint:gosec // like kubelet HTTPS probes: no CA to verify against
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: key.serverName})
		if err = tc.HandshakeContext(dctx); err != nil {
			_ = conn.Close()
		}
		conn = tc
	}
	p.dialed(key)
	if err != nil {
		p.release(key)
		return nil, err
	}
	lim := &limitedConn{conn: conn}
	return &probeConn{key: key, conn: conn, lim: lim, br: bufio.NewReaderSize(lim, readBufferSize)}, nil
}

// dialed: a dial of key ended; another may start.
func (p *httpPool) dialed(key connKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hc := p.host(key)
	hc.dialing--
	hc.signal()
}

// put gives back a connection whose last answer was read to its end.
func (p *httpPool) put(pc *probeConn) {
	now := time.Now()
	p.mu.Lock()
	hc := p.host(pc.key)
	if p.closed || len(hc.idle) >= p.maxConns {
		p.mu.Unlock()
		p.closeConn(pc)
		return
	}
	pc.reused, pc.idleSince = true, now
	hc.idle = append(hc.idle, pc)
	expired := hc.expire(now, p.idleTimeout)
	hc.signal()
	p.mu.Unlock()
	p.closeConns(expired)
}

// closeConn closes a connection taken from the pool (or opened by it).
func (p *httpPool) closeConn(pc *probeConn) {
	_ = pc.conn.Close()
	p.release(pc.key)
}

func (p *httpPool) closeConns(pcs []*probeConn) {
	for _, pc := range pcs {
		p.closeConn(pc)
	}
}

// release frees the slot of a connection that closed or never opened.
func (p *httpPool) release(key connKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hc := p.host(key)
	hc.open--
	hc.signal()
	if hc.open == 0 && hc.waiters == 0 && hc.dialing == 0 {
		delete(p.hosts, key)
	}
}

// closeAll closes the idle connections; busy ones close when given back.
func (p *httpPool) closeAll() {
	p.mu.Lock()
	p.closed = true
	var all []*probeConn
	for _, hc := range p.hosts {
		all = append(all, hc.idle...)
		hc.idle = nil
	}
	p.mu.Unlock()
	p.closeConns(all)
}

// takeIdle pops the most recently used idle connection.
func (hc *hostConns) takeIdle() *probeConn {
	n := len(hc.idle)
	if n == 0 {
		return nil
	}
	pc := hc.idle[n-1]
	hc.idle[n-1] = nil
	hc.idle = hc.idle[:n-1]
	return pc
}

// expire removes the connections idle for longer than timeout (the
// oldest come first) and returns them to be closed.
func (hc *hostConns) expire(now time.Time, timeout time.Duration) []*probeConn {
	n := 0
	for n < len(hc.idle) && now.Sub(hc.idle[n].idleSince) > timeout {
		n++
	}
	if n == 0 {
		return nil
	}
	out := append([]*probeConn(nil), hc.idle[:n]...)
	hc.idle = append(hc.idle[:0], hc.idle[n:]...)
	return out
}

// signal wakes the probes waiting for a connection, if any.
func (hc *hostConns) signal() {
	if hc.waiters > 0 && hc.freed != nil {
		close(hc.freed)
		hc.freed = nil
	}
}
