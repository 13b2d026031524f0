package memcached

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// What memcached can load from a mounted Secret: data it cannot load makes
// it exit at start (every pod crash-loops) or, worse, start with fewer
// users than the Secret lists. Each check names the Secret, the key and at
// most a line number, never a value.

// Limits of memcached's auth file (authfile.c): it keeps the first 8
// entries and drops the rest silently, and reads each line into a 256-byte
// buffer.
const (
	maxAuthEntries   = 8
	maxAuthLineBytes = 250
)

// checkAuthFile checks that memcached reads data as the users it lists:
// one "user:password" per line, at most 8, neither part empty nor holding
// a blank or control character (a client sends "user password" as one
// line split at blanks, so such a password could never authenticate), no
// empty line (memcached refuses the whole file).
func checkAuthFile(data []byte) error {
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(lines) > maxAuthEntries {
		return fmt.Errorf("has %d lines; memcached uses only the first %d", len(lines), maxAuthEntries)
	}
	for i, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\r"))
		user, password, found := bytes.Cut(l, []byte(":"))
		switch {
		case len(l) > maxAuthLineBytes:
			return fmt.Errorf("line %d is longer than %d bytes", i+1, maxAuthLineBytes)
		case !found || len(user) == 0 || len(password) == 0:
			return fmt.Errorf("line %d is not user:password", i+1)
		case !plainToken(user) || !plainToken(password):
			return fmt.Errorf("line %d has a blank or control character, which no client can send", i+1)
		}
	}
	return nil
}

// plainToken: printable, no blank.
func plainToken(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// checkKeyPair checks that the certificate chain and the key are PEM and
// belong together.
func checkKeyPair(certPEM, keyPEM []byte) error {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return fmt.Errorf("are not a PEM certificate chain and its PEM private key")
	}
	return nil
}

// checkCABundle checks that data holds at least one PEM certificate.
func checkCABundle(data []byte) error {
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return fmt.Errorf("holds no PEM certificate")
	}
	return nil
}
