package probe

import (
	"context"
	"errors"
	"net"
	"sync"
)

// maxDialsPerHost bounds the connections being dialled to one target at
// once by one namespace's probes.
const maxDialsPerHost = 2

// dialGate holds dials to an address beyond maxDialsPerHost until one of
// those ends. net/http dials whenever a request finds no idle connection,
// and the request takes whichever comes first, its dial or a connection
// given back. In a moment when a target (or the manager) answered slowly,
// every probe of that moment would dial at once, and the dials themselves
// (a SYN queue that overflows retries after a second) would make more
// probes late. Behind the gate the probes of such a moment take the
// connections given back while at most two dials run.
//
// net/http does not call off a dial whose request took another
// connection: the dial runs on and leaves one more idle connection, so
// every busy moment would add connections that the next quiet one keeps
// for the idle timeout, each a dial, a handshake and buffers on both
// sides. A dial that waited for its slot is therefore dropped once the
// request that started it has ended (httpAttempt).
type dialGate struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	addrs map[string]*gateSlots
}

type gateSlots struct {
	dialing chan struct{}
	// users are the dials holding or waiting for a slot of this address.
	users int
}

func newDialGate(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *dialGate {
	return &dialGate{dial: dial, addrs: map[string]*gateSlots{}}
}

// DialContext dials addr once a slot is free. net/http's dial context is
// not the request's (a dial outlives its request), so ctx bounds the wait
// and the dial together.
func (g *dialGate) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var requestEnded <-chan struct{}
	req, _ := ctx.Value(probeRequestKey{}).(context.Context)
	if req != nil {
		requestEnded = req.Done()
	}
	s := g.enter(addr)
	defer g.leave(addr, s)
	select {
	case s.dialing <- struct{}{}:
	case <-requestEnded:
		return nil, errDialNotNeeded
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.dialing }()
	if req != nil && req.Err() != nil {
		return nil, errDialNotNeeded
	}
	return g.dial(ctx, network, addr)
}

// errDialNotNeeded ends a dial whose request is over; nothing waits for
// its error, since net/http delivers a dial's result only to a request
// still waiting for a connection.
var errDialNotNeeded = errors.New("dial not needed: its request has ended")

// probeRequestKey finds the context of the request that started a dial
// among the values of the context net/http dials with, which keeps the
// request's values but not its end.
type probeRequestKey struct{}

func (g *dialGate) enter(addr string) *gateSlots {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.addrs[addr]
	if s == nil {
		s = &gateSlots{dialing: make(chan struct{}, maxDialsPerHost)}
		g.addrs[addr] = s
	}
	s.users++
	return s
}

func (g *dialGate) leave(addr string, s *gateSlots) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.users--; s.users == 0 {
		delete(g.addrs, addr)
	}
}
