// Package tlsreload decides when memcached's certificate can be reloaded in
// place and does it: the memcached TLS agent (cmd/memcached-tls-agent) runs
// it beside memcached, and the Memcached controller uses the same rule to
// decide which Secret changes replace the pods.
//
// The rule: a new certificate and key for the same issuer (a renewal) are
// loaded into the running memcached with its refresh_certs command; a new
// issuer or a new client CA (a change of trust) replaces the pods. memcached
// adds a reloaded client CA to the CAs it trusts without dropping the old
// one, so only a new process stops trusting a CA; a new issuer changes what
// every client must trust, which a rollout makes visible one pod at a time.
package tlsreload

import (
	"bytes"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
)

// ErrNoCertificate: the data holds no PEM certificate that parses.
var ErrNoCertificate = errors.New("holds no PEM certificate")

// Leaf is the first certificate of a PEM chain: the one memcached serves.
func Leaf(chainPEM []byte) (*x509.Certificate, error) {
	rest := chainPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, ErrNoCertificate
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, ErrNoCertificate
		}
		return c, nil
	}
}

// IssuerIdentity identifies who signed c: its issuer's name and, when
// present, the authority key identifier (a CA that kept its name but got a
// new key is a new issuer). Equal identities mean a renewal.
func IssuerIdentity(c *x509.Certificate) []byte {
	var b bytes.Buffer
	for _, part := range [][]byte{c.RawIssuer, c.AuthorityKeyId} {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(part)))
		b.Write(part)
	}
	return b.Bytes()
}

// SameIssuer: a and b were signed by the same issuer.
func SameIssuer(a, b *x509.Certificate) bool {
	return bytes.Equal(IssuerIdentity(a), IssuerIdentity(b))
}

// SerialHex is the serial number as clients print it (lower-case hex).
func SerialHex(c *x509.Certificate) string {
	return c.SerialNumber.Text(16)
}
