package sqlguard

import (
	"context"
	"encoding/hex"
	"hash"
	"testing"
)

func TestFingerprintRealDatabases(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.driver, func(t *testing.T) {
			plain := be.plain(t)
			table := victim(t, plain, "sg_fp")
			g := openGuard(t, be.dsn, options(be.driver))
			ctx := context.Background()
			fp := func(q string, newHash func() hash.Hash) string {
				t.Helper()
				s, err := g.Fingerprint(ctx, q, newHash)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				return s
			}
			q := "SELECT id, name FROM " + table + " ORDER BY id"
			first := fp(q, testKey)
			if again := fp(q, testKey); again != first {
				t.Fatalf("same data, different fingerprints %s %s", first, again)
			}
			if other := fp(q, keyed("another key")); other == first {
				t.Fatal("a different key gave the same fingerprint")
			}
			mustExec(t, plain, "UPDATE "+table+" SET name = 'changed' WHERE id = 2")
			if changed := fp(q, testKey); changed == first {
				t.Fatal("changed data, same fingerprint")
			}
			null, empty := fp("SELECT NULL AS v", testKey), fp("SELECT '' AS v", testKey)
			if null == empty {
				t.Fatal("NULL and the empty string have the same fingerprint")
			}
			if want := expected(t, []string{"v"}, cell{null: true}); null != want {
				t.Fatalf("NULL: %s, want %s", null, want)
			}
			if want := expected(t, []string{"v"}, cell{b: []byte{}}); empty != want {
				t.Fatalf("empty string: %s, want %s", empty, want)
			}
		})
	}
}

// expected is the fingerprint of one row with the given columns.
func expected(t *testing.T, cols []string, row ...cell) string {
	t.Helper()
	e := newEncoder(testKey(), Limits{}.withDefaults())
	if err := e.columns(cols); err != nil {
		t.Fatal(err)
	}
	if err := e.row(row); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(e.sum())
}
