package probe

import (
	"context"
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
// connections given back while at most two dials run; the dials that are
// then no longer needed still run later, one slot at a time, and leave
// idle connections for the next busy moment.
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
	s := g.enter(addr)
	defer g.leave(addr, s)
	select {
	case s.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.dialing }()
	return g.dial(ctx, network, addr)
}

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
