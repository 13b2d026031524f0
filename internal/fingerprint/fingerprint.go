// Package fingerprint computes the keyed fingerprints that RebootPolicy
// status keeps of query results and watched data. A plain hash of a short
// value (a PIN, a flag) can be reversed by trying every candidate; an
// HMAC with a key only the manager holds reveals nothing to someone who
// can read status but not the data.
package fingerprint

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// KeySize is the length of a generated key in bytes.
const KeySize = 32

// prefix marks a keyed fingerprint: "h1.<key id>.<hex hmac>". Fingerprints
// without it (plain SHA-256, before keys existed) never match a key.
const prefix = "h1."

// Key is the secret fingerprints are computed with.
type Key struct {
	id     string
	secret []byte
}

// NewKey wraps secret, which must have at least 16 bytes.
func NewKey(secret []byte) (*Key, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("fingerprint key has %d bytes, want at least 16", len(secret))
	}
	// The id tells fingerprints of different keys apart (so a new key
	// re-records baselines instead of firing); a hash of a random 32-byte
	// key reveals nothing about it.
	sum := sha256.Sum256(append([]byte("runbook fingerprint key id\x00"), secret...))
	return &Key{id: hex.EncodeToString(sum[:4]), secret: append([]byte(nil), secret...)}, nil
}

// Generate returns a new random key secret.
func Generate() ([]byte, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generating fingerprint key: %w", err)
	}
	return b, nil
}

// ID identifies the key in the fingerprints it made.
func (k *Key) ID() string { return k.id }

// New returns a fresh HMAC-SHA256 to write the fingerprinted data into.
func (k *Key) New() hash.Hash { return hmac.New(sha256.New, k.secret) }

// Format turns a finished hash into the fingerprint kept in status.
func (k *Key) Format(h hash.Hash) string {
	return prefix + k.id + "." + hex.EncodeToString(h.Sum(nil))
}

// Sum fingerprints data written by write.
func (k *Key) Sum(write func(h hash.Hash)) string {
	h := k.New()
	write(h)
	return k.Format(h)
}

// Owns reports whether fp was made with this key. A baseline made with
// another key (or by an older manager without keys) is not comparable:
// it is recorded anew rather than taken for a change.
func (k *Key) Owns(fp string) bool {
	return strings.HasPrefix(fp, prefix+k.id+".")
}

// SameKey reports whether fingerprints a and b were made with the same
// key, i.e. whether comparing them says anything about the data.
func SameKey(a, b string) bool {
	ka, oka := keyPart(a)
	kb, okb := keyPart(b)
	return oka && okb && ka == kb
}

func keyPart(fp string) (string, bool) {
	rest, ok := strings.CutPrefix(fp, prefix)
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, ".")
	return id, ok
}

// FormatHex turns a hex HMAC made with k.New into the fingerprint kept in
// status.
func (k *Key) FormatHex(sum string) string { return prefix + k.id + "." + sum }

// FormatHexVersion is FormatHex for data whose encoding changed: the
// version joins the key id, so that a baseline of the old encoding reads
// as made with another key and is recorded anew instead of firing.
func (k *Key) FormatHexVersion(version, sum string) string {
	return prefix + k.id + "-" + version + "." + sum
}
