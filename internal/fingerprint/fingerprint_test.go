package fingerprint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func mustKey(t *testing.T, secret string) *Key {
	t.Helper()
	k, err := NewKey([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func write(s string) func(hash.Hash) { return func(h hash.Hash) { h.Write([]byte(s)) } }

func TestKeyedFingerprintRevealsNothingWithoutTheKey(t *testing.T) {
	k := mustKey(t, "0123456789abcdef0123456789abcdef")
	fp := k.Sum(write("1234"))
	// A brute force over every 4-digit PIN with the plain hash the manager
	// used to keep in status would find it; with the key it finds nothing.
	for pin := 0; pin < 10000; pin++ {
		cand := []byte(strings.Repeat("0", 4-len(itoa(pin))) + itoa(pin))
		plain := sha256.Sum256(cand)
		if strings.Contains(fp, hex.EncodeToString(plain[:])) {
			t.Fatalf("fingerprint contains the plain hash of %s", cand)
		}
	}
	if fp != k.Sum(write("1234")) {
		t.Fatal("same data, same key: different fingerprints")
	}
	if fp == k.Sum(write("1235")) {
		t.Fatal("changed data, same fingerprint")
	}
	other := mustKey(t, "fedcba9876543210fedcba9876543210")
	if other.Sum(write("1234")) == fp {
		t.Fatal("another key gave the same fingerprint")
	}
	if !k.Owns(fp) || other.Owns(fp) {
		t.Fatal("Owns does not tell keys apart")
	}
	if k.Owns(hex.EncodeToString(make([]byte, 32))) {
		t.Fatal("an unkeyed (old) fingerprint is owned by the key")
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestNewKeyRefusesShortSecrets(t *testing.T) {
	if _, err := NewKey([]byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

func testClient(objs ...client.Object) client.WithWatch {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func TestSourceCreatesTheSecretOnceAndReusesIt(t *testing.T) {
	ctx := context.Background()
	c := testClient()
	a, err := NewSource(c, c, "runbook-system", "", logr.Discard()).Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "runbook-system", Name: DefaultSecretName}, &sec); err != nil {
		t.Fatalf("key secret not created: %v", err)
	}
	if len(sec.Data[SecretKey]) != KeySize {
		t.Fatalf("key has %d bytes", len(sec.Data[SecretKey]))
	}
	// A second manager (a restart, a standby) gets the same key.
	b, err := NewSource(c, c, "runbook-system", "", logr.Discard()).Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() != b.ID() {
		t.Fatal("a restarted manager got another key")
	}
}

func TestSourceReadsTheOtherReplicasKeyAfterACreateRace(t *testing.T) {
	ctx := context.Background()
	theirs := []byte("their-key-their-key-their-key-32")
	var c client.WithWatch
	base := testClient()
	c = interceptor.NewClient(base, interceptor.Funcs{Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		// The other replica wins the race.
		won := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}, Data: map[string][]byte{SecretKey: theirs}}
		if err := cl.Create(ctx, won); err != nil {
			return err
		}
		return apierrors.NewAlreadyExists(corev1.Resource("secrets"), obj.GetName())
	}})
	k, err := NewSource(c, c, "ns", "k", logr.Discard()).Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewKey(theirs)
	if k.ID() != want.ID() {
		t.Fatal("did not adopt the key the other replica created")
	}
}

func TestSourceWithoutNamespaceUsesAnEphemeralKey(t *testing.T) {
	k, err := NewSource(nil, nil, "", "", logr.Discard()).Key(context.Background())
	if err != nil || k == nil {
		t.Fatalf("no ephemeral key: %v", err)
	}
}

func TestSourceRetriesAfterAFailure(t *testing.T) {
	ctx := context.Background()
	fail := true
	c := interceptor.NewClient(testClient(), interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if fail {
			return apierrors.NewServiceUnavailable("down")
		}
		return cl.Get(ctx, key, obj, opts...)
	}})
	s := NewSource(c, c, "ns", "k", logr.Discard())
	if _, err := s.Key(ctx); err == nil {
		t.Fatal("no error while the apiserver is down")
	}
	fail = false
	if _, err := s.Key(ctx); err != nil {
		t.Fatalf("not retried: %v", err)
	}
}

func TestSameKey(t *testing.T) {
	a := mustKey(t, "0123456789abcdef0123456789abcdef")
	b := mustKey(t, "fedcba9876543210fedcba9876543210")
	fa1, fa2, fb := a.Sum(write("x")), a.Sum(write("y")), b.Sum(write("x"))
	old := hex.EncodeToString(make([]byte, 32))
	for _, tc := range []struct {
		x, y string
		want bool
	}{{fa1, fa2, true}, {fa1, fb, false}, {fa1, old, false}, {old, old, false}, {"", fa1, false}} {
		if got := SameKey(tc.x, tc.y); got != tc.want {
			t.Errorf("SameKey(%q, %q) = %v", tc.x, tc.y, got)
		}
	}
}

func TestVersionedFingerprintIsAnotherKey(t *testing.T) {
	k := mustKey(t, "0123456789abcdef0123456789abcdef")
	sum := hex.EncodeToString(make([]byte, 32))
	old, v2 := k.FormatHex(sum), k.FormatHexVersion("q2", sum)
	if SameKey(old, v2) {
		t.Fatal("a fingerprint of the new encoding compares with one of the old")
	}
	if !SameKey(v2, k.FormatHexVersion("q2", hex.EncodeToString(make([]byte, 31)))) {
		t.Fatal("two fingerprints of the same version and key do not compare")
	}
}
