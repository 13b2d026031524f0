package tlsreload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// talkTimeout bounds one conversation with memcached.
const talkTimeout = 10 * time.Second

// server is the memcached of this pod, reached on the pod's loopback: the
// peer is this pod's memcached by construction, so its certificate's names
// are not checked, only recorded.
type server struct {
	addr string
	// clientCert is presented when memcached requires one (mutual TLS):
	// the server's own certificate, as the exporter does.
	clientCert *tls.Certificate
}

// dial opens a TLS connection and returns it with the leaf certificate
// memcached served. The leaf is returned even when the handshake fails
// after the server's certificate arrived (a refused client certificate).
func (s server) dial(ctx context.Context) (*tls.Conn, *x509.Certificate, error) {
	var served *x509.Certificate
	cfg := &tls.Config{
		// The peer is 127.0.0.1 in this pod's network namespace.
		InsecureSkipVerify: true, //nolint:gosec // see the comment above
		MinVersion:         tls.VersionTLS12,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				served, _ = x509.ParseCertificate(raw[0])
			}
			return nil
		},
	}
	if s.clientCert != nil {
		cert := *s.clientCert
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: talkTimeout}, Config: cfg}
	ctx, cancel := context.WithTimeout(ctx, talkTimeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, served, err
	}
	conn := c.(*tls.Conn)
	_ = conn.SetDeadline(time.Now().Add(talkTimeout))
	return conn, served, nil
}

// servedLeaf is the certificate memcached serves now.
func (s server) servedLeaf(ctx context.Context) (*x509.Certificate, error) {
	conn, served, err := s.dial(ctx)
	if conn != nil {
		_ = conn.Close()
	}
	if served != nil {
		return served, nil
	}
	if err == nil {
		err = errors.New("memcached served no certificate")
	}
	return nil, err
}

// refresh authenticates when creds is set and sends refresh_certs: memcached
// reads its certificate, key and client CA files again and uses them for new
// connections; connections already open keep theirs.
func (s server) refresh(ctx context.Context, creds *credentials) error {
	conn, _, err := s.dial(ctx)
	if err != nil {
		return fmt.Errorf("connecting to memcached: %w", err)
	}
	defer func() { _ = conn.Close() }()
	r := bufio.NewReader(conn)
	if creds != nil {
		data := creds.user + " " + creds.password
		if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(data), data); err != nil {
			return err
		}
		if line, err := readLine(r); err != nil || line != "STORED" {
			return fmt.Errorf("memcached refused the credentials of the auth file (%s)", describeReply(line, err))
		}
	}
	if _, err := conn.Write([]byte("refresh_certs\r\n")); err != nil {
		return err
	}
	line, err := readLine(r)
	if err != nil || line != "OK" {
		return fmt.Errorf("refresh_certs: %s", describeReply(line, err))
	}
	_, _ = conn.Write([]byte("quit\r\n"))
	return nil
}

// readLine reads one reply line, bounded so that a confused peer cannot
// make the agent buffer much.
func readLine(r *bufio.Reader) (string, error) {
	var b bytes.Buffer
	for b.Len() < 1024 {
		c, err := r.ReadByte()
		if err != nil {
			return b.String(), err
		}
		if c == '\n' {
			return strings.TrimSuffix(b.String(), "\r"), nil
		}
		b.WriteByte(c)
	}
	return b.String(), errors.New("reply line too long")
}

func describeReply(line string, err error) string {
	if err != nil {
		return fmt.Sprintf("error %v after %q", err, line)
	}
	return fmt.Sprintf("memcached answered %q", line)
}
