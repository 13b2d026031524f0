package rebootpolicy

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// probeServer answers GET /p/<i> for the probes under measurement; it
// records when each request arrived and fails paths on demand.
//
// It shares the machine's two cores with the manager it measures, and a
// stall of the server shows in the drift as much as one of the manager, so
// it does as little as an HTTP/1.1 server can: one goroutine per
// connection reading requests (probes are GETs without a body) with a
// fixed buffer, the arrival taken when the request line is read and kept
// as an integer (nothing for the garbage collector to scan), and one of
// three fixed answers written back on the kept-alive connection. A
// net/http server spent about as much CPU per request as the manager
// probing it.
type probeServer struct {
	base    time.Time
	probes  []probeArrivals
	failing []atomic.Bool
	// conns counts the connections the probes opened.
	conns atomic.Int64

	mu sync.Mutex
	l  net.Listener
	cs map[net.Conn]struct{}
	wg sync.WaitGroup
}

type probeArrivals struct {
	mu sync.Mutex
	// at are arrival times, as nanoseconds since base.
	at []int64
}

var (
	answerOK          = []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	answerUnavailable = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
	answerNotFound    = []byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
)

func newProbeServer(n int) *probeServer {
	return &probeServer{base: time.Now(), probes: make([]probeArrivals, n), failing: make([]atomic.Bool, n), cs: map[net.Conn]struct{}{}}
}

// serve accepts connections on l until close.
func (s *probeServer) serve(l net.Listener) {
	s.mu.Lock()
	s.l = l
	s.mu.Unlock()
	s.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.mu.Lock()
			s.cs[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() { s.serveConn(c) })
		}
	})
}

// close stops accepting, closes every connection and waits for them.
func (s *probeServer) close() {
	s.mu.Lock()
	if s.l != nil {
		_ = s.l.Close()
	}
	for c := range s.cs {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *probeServer) serveConn(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.cs, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	br := bufio.NewReaderSize(c, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		now := time.Since(s.base).Nanoseconds()
		answer := s.answer(line, now)
		// The headers, up to the empty line.
		for {
			h, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimRight(h, "\r\n")) == 0 {
				break
			}
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// answer records the arrival of the request line "GET /p/<i> HTTP/1.1"
// and says what to answer.
func (s *probeServer) answer(line []byte, now int64) []byte {
	f := bytes.Fields(line)
	if len(f) < 2 || !bytes.HasPrefix(f[1], []byte("/p/")) {
		return answerNotFound
	}
	i, err := strconv.Atoi(string(f[1][3:]))
	if err != nil || i < 0 || i >= len(s.probes) {
		return answerNotFound
	}
	p := &s.probes[i]
	p.mu.Lock()
	p.at = append(p.at, now)
	p.mu.Unlock()
	if s.failing[i].Load() {
		return answerUnavailable
	}
	return answerOK
}

// drifts returns |interval − period| of consecutive probes of every path
// within [from, to].
func (s *probeServer) drifts(from, to time.Time) []time.Duration {
	lo, hi := from.Sub(s.base).Nanoseconds(), to.Sub(s.base).Nanoseconds()
	var out []time.Duration
	for i := range s.probes {
		p := &s.probes[i]
		p.mu.Lock()
		prev := int64(-1)
		for _, t := range p.at {
			if t < lo || t > hi {
				continue
			}
			if prev >= 0 {
				d := time.Duration(t-prev) - period
				if d < 0 {
					d = -d
				}
				out = append(out, d)
			}
			prev = t
		}
		p.mu.Unlock()
	}
	return out
}
