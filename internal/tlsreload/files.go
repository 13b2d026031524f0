package tlsreload

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// maxFileBytes bounds what the agent reads of a mounted file: a Secret is at
// most 1 MiB.
const maxFileBytes = 1 << 20

// Names of the files in the TLS directory (the controller's projected
// volume).
const (
	CertFile     = "tls.crt"
	KeyFile      = "tls.key"
	ClientCAFile = "client-ca.crt"
	// dataLink is the kubelet's symbolic link to the current version of
	// the volume's files: it swaps it atomically on each update.
	dataLink = "..data"
)

// snapshot is one version of the mounted TLS files.
type snapshot struct {
	// version is the target of ..data ("" when the directory is not a
	// kubelet volume; then the files' digest stands in).
	version string
	pair    *tls.Certificate
	leaf    *x509.Certificate
	// pairErr says why the certificate and key cannot be loaded.
	pairErr error
	// clientCA is the digest of the client CA file (nil without one).
	clientCA []byte
}

// version is the cheap check run on every tick: the target of ..data.
func volumeVersion(dir string) string {
	target, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil {
		return ""
	}
	return target
}

// readSnapshot reads the files of dir. A certificate or key that cannot be
// loaded is recorded in pairErr, never a crash: the Secret's content is
// the tenant's.
func readSnapshot(dir string) (snapshot, error) {
	s := snapshot{version: volumeVersion(dir)}
	certPEM, err := readBounded(filepath.Join(dir, CertFile))
	if err != nil {
		return s, err
	}
	keyPEM, err := readBounded(filepath.Join(dir, KeyFile))
	if err != nil {
		return s, err
	}
	if s.version == "" {
		sum := sha256.Sum256(append(append([]byte{}, certPEM...), keyPEM...))
		s.version = fmt.Sprintf("sha256:%x", sum)
	}
	s.pair, s.leaf, s.pairErr = loadPair(certPEM, keyPEM)
	ca, err := readBounded(filepath.Join(dir, ClientCAFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return s, err
	default:
		sum := sha256.Sum256(ca)
		s.clientCA = sum[:]
	}
	return s, nil
}

// loadPair checks what memcached's refresh_certs will check, before it
// does: refresh_certs loads the chain and then the key into memcached's
// live TLS context, so files it cannot load never reach it; nothing is sent
// unless the pair loads here.
func loadPair(certPEM, keyPEM []byte) (*tls.Certificate, *x509.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, errors.New("tls.crt and tls.key are not a PEM certificate chain and its private key")
	}
	leaf, err := Leaf(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.crt %w", err)
	}
	return &pair, leaf, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", filepath.Base(path), maxFileBytes)
	}
	return b, nil
}

// credentials are one user of memcached's auth file.
type credentials struct{ user, password string }

// readCredentials reads the first user of memcached's auth file
// ("user:password" per line).
func readCredentials(path string) (*credentials, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	user, password, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\r")), []byte(":"))
	if !ok || len(user) == 0 || len(password) == 0 {
		return nil, errors.New("the auth file's first line is not user:password")
	}
	return &credentials{user: string(user), password: string(password)}, nil
}
