package memcached

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

func TestCheckAuthFile(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
	}{
		{name: "one user", data: "app:pw"},
		{name: "trailing newline", data: "app:pw\n"},
		{name: "CRLF", data: "a:1\r\nb:2\r\n"},
		{name: "colon in the password", data: "app:p:w\n"},
		{name: "eight users", data: strings.Repeat("u:p\n", 8)},
		{name: "nine users are cut to eight by memcached", data: strings.Repeat("u:p\n", 9), wantErr: "only the first 8"},
		{name: "empty line", data: "a:1\n\nb:2\n", wantErr: "line 2 is not user:password"},
		{name: "no colon", data: "app\n", wantErr: "line 1 is not user:password"},
		{name: "empty password", data: "app:\n", wantErr: "line 1 is not user:password"},
		{name: "empty user", data: ":pw\n", wantErr: "line 1 is not user:password"},
		{name: "blank in the password", data: "app:correct horse\n", wantErr: "line 1 has a blank"},
		{name: "tab in the user", data: "a\tpp:pw\n", wantErr: "line 1 has a blank"},
		{name: "too long", data: "app:" + strings.Repeat("x", 300), wantErr: "longer than 250"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkAuthFile([]byte(tt.data))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// A Secret memcached could not load is refused before anything is applied,
// and the message names the Secret and the key, never the data.
func TestUnloadableSecretDataIsNotUsable(t *testing.T) {
	ca := newTestCA(t, "CA")
	good := tlsSecret(t, "cert", ca)
	otherCert, _ := newTestCA(t, "other").issue(t, testServerName, x509.ExtKeyUsageServerAuth)
	tests := []struct {
		name    string
		spec    cachev1alpha1.MemcachedSpec
		secret  *corev1.Secret
		wantErr string
	}{
		{name: "a password with a blank", spec: cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}},
			secret: authSecret("users", "app:hunter two\n"), wantErr: "Secret users: authfile line 1 has a blank"},
		{name: "a key that is not the certificate's", spec: cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}},
			secret:  usableSecret("cert", corev1.SecretTypeTLS, map[string][]byte{corev1.TLSCertKey: otherCert, corev1.TLSPrivateKeyKey: good.Data[corev1.TLSPrivateKeyKey]}),
			wantErr: "Secret cert: tls.crt and tls.key are not a PEM certificate chain and its PEM private key"},
		{name: "a client CA that is no certificate", spec: cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert",
			ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cert", Key: corev1.TLSPrivateKeyKey}}},
			secret: good, wantErr: "Secret cert: tls.key holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reconciler{APIReader: fakeAPIServer(t, tt.secret), Keys: fingerprint.StaticSource(testKey(t))}
			_, obs := r.prepare(context.Background(), realMemcached(tt.spec))
			if !strings.HasPrefix(obs.secretNotUsable, tt.wantErr) || obs.mayApply() {
				t.Fatalf("secretNotUsable = %q (may apply: %v), want it to start with %q", obs.secretNotUsable, obs.mayApply(), tt.wantErr)
			}
			for k, v := range tt.secret.Data {
				if len(v) > 4 && strings.Contains(obs.secretNotUsable, string(v)) {
					t.Errorf("the message carries the data of %s", k)
				}
			}
			if strings.Contains(obs.secretNotUsable, "hunter") {
				t.Error("the message carries the password")
			}
		})
	}
}
