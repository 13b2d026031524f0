package rebootpolicy

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// One request and its answer on a probeConn, in the caller's goroutine,
// bounded by the connection's deadlines instead of a context.

const (
	// maxResponseHeaderBytes bounds the status line and headers of an
	// answer: a hostile server must not make the manager buffer them.
	maxResponseHeaderBytes = 16 << 10
	// maxBodyDrain is how much of a body is read (and thrown away) so the
	// connection can serve the next probe; a longer body closes it.
	maxBodyDrain = 10 << 10
	// maxBodyWire bounds the bytes read for that drain (chunk framing
	// included).
	maxBodyWire = 64 << 10
	// max1xxAnswers is how many informational answers may precede the
	// real one, like net/http's client.
	max1xxAnswers = 5
)

// errEarlyClose: the server closed a kept-alive connection before
// answering anything. It may have closed it while it was idle, so the
// request is sent again, once, on a new connection.
var errEarlyClose = errors.New("connection closed before an answer")

// awaitAnswer waits for the first byte of the answer to the request just
// written, until the connection's deadline.
func (pc *probeConn) awaitAnswer() error {
	pc.lim.n = maxResponseHeaderBytes
	if _, err := pc.br.Peek(1); err != nil {
		if pc.reused && !isTimeout(err) {
			return errEarlyClose
		}
		return err
	}
	return nil
}

// readAnswer reads the answer to req whose first byte has arrived: its
// status, and whether the connection may serve another request.
func (pc *probeConn) readAnswer(req *http.Request) (status int, location string, reusable bool, err error) {
	var resp *http.Response
	for range max1xxAnswers + 1 {
		pc.lim.n = maxResponseHeaderBytes
		resp, err = http.ReadResponse(pc.br, req)
		if err != nil {
			return 0, "", false, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	if resp.StatusCode < 200 {
		return 0, "", false, errors.New("too many informational answers")
	}
	// Never keep or show what the server said: the body is read into
	// nothing, a bounded amount, only so the connection can be reused.
	pc.lim.n = maxBodyWire
	n, err := io.CopyN(io.Discard, resp.Body, maxBodyDrain+1)
	if isTimeout(err) {
		// Like the kubelet: a body that does not come is a failed probe.
		return 0, "", false, err
	}
	ended := errors.Is(err, io.EOF) && n <= maxBodyDrain
	if ended {
		// At its end, closing reads nothing more.
		_ = resp.Body.Close()
	}
	// A longer body, one cut short or one whose framing exceeds
	// maxBodyWire leaves the status as it is and closes the connection.
	return resp.StatusCode, resp.Header.Get("Location"), ended && !resp.Close && pc.br.Buffered() == 0 &&
		resp.StatusCode != http.StatusSwitchingProtocols, nil
}

// setDeadline bounds every read and write on the connection.
func (pc *probeConn) setDeadline(t time.Time) {
	_ = pc.conn.SetDeadline(t)
}
