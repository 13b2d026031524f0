package memcached

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// AnnotationSecretHash on the pod template is a keyed fingerprint of the
// data of the TLS and auth Secrets the pods mount that the running
// memcached cannot load in place: a change replaces the instances one at a
// time. A certificate renewal under the same issuer does not change it
// (the pods' TLS agent loads it, tls_renewal.go). It is keyed (HMAC with the
// manager's fingerprint key) so that someone who may read pods but not
// Secrets cannot test guesses of a password against it.
const AnnotationSecretHash = "cache.runbook.dev/secret-hash"

// secretUse is one Secret the spec names: the data keys it must have, and
// whether its data is mounted (and so fingerprinted for rollouts).
type secretUse struct {
	name    string
	keys    []string
	mounted bool
	// check, when set, says whether memcached can load the data (the keys
	// are present); its error names what is wrong, never a value.
	check func(data map[string][]byte) error
	// rollsOn, when set, is what of the data replaces the pods when it
	// changes, instead of the keys' values (tls_renewal.go: a renewal is
	// loaded in place, only a new issuer rolls).
	rollsOn func(data map[string][]byte) []byte
	// observe, when set, sees the data of a usable Secret (nothing is
	// kept of it but what the status shows).
	observe func(data map[string][]byte)
}

// secretUses lists the Secrets of s and spec in a fixed order.
func secretUses(s settings, spec *cachev1alpha1.MemcachedSpec) []secretUse {
	var uses []secretUse
	if t := s.TLS; t != nil {
		uses = append(uses, tlsServerUse(t))
		if ca := t.ClientCA; ca != nil {
			key := ca.Key
			uses = append(uses, secretUse{name: ca.Name, keys: []string{key}, mounted: true,
				check: func(d map[string][]byte) error { return keyError(key, checkCABundle(d[key])) }})
		}
	}
	if a := s.Auth; a != nil {
		uses = append(uses, secretUse{name: a.SecretName, keys: []string{cachev1alpha1.AuthFileKey}, mounted: true,
			check: func(d map[string][]byte) error {
				return keyError(cachev1alpha1.AuthFileKey, checkAuthFile(d[cachev1alpha1.AuthFileKey]))
			}})
	}
	for _, p := range spec.ImagePullSecrets {
		uses = append(uses, secretUse{name: p.Name})
	}
	return append(uses, envSecretUses(&spec.PodOverrides)...)
}

// secretNotUsableError is a Secret the controller may not or cannot use; it
// becomes Degraded/SecretNotUsable and nothing is applied.
type secretNotUsableError struct{ msg string }

func (e *secretNotUsableError) Error() string { return e.msg }

// fingerprintKeyError: the key of the Secret fingerprints is unavailable.
type fingerprintKeyError struct{ err error }

func (e *fingerprintKeyError) Error() string {
	return "the fingerprint key for Secret rollouts is unavailable: " + e.err.Error()
}

// checkSecrets reads every Secret the spec names, live from the apiserver
// (never from a cache: the manager may only get Secrets, one by one),
// checks that each may be used and has its keys, and returns the keyed
// fingerprint of the mounted ones' data ("" when none is mounted). No
// Secret value goes anywhere else; messages name Secrets and keys only.
func (r *Reconciler) checkSecrets(ctx context.Context, namespace string, uses []secretUse) (string, error) {
	if len(uses) == 0 {
		return "", nil
	}
	var mounted []*corev1.Secret
	var mountedUses []secretUse
	for _, u := range uses {
		sec, err := r.readUsableSecret(ctx, namespace, u)
		if err != nil {
			return "", err
		}
		if u.observe != nil {
			u.observe(sec.Data)
		}
		if u.mounted {
			mounted, mountedUses = append(mounted, sec), append(mountedUses, u)
		}
	}
	if len(mounted) == 0 {
		return "", nil
	}
	key, err := r.Keys.Key(ctx)
	if err != nil {
		return "", &fingerprintKeyError{err}
	}
	h := key.New()
	fingerprintSecrets(h, mountedUses, mounted)
	return key.Format(h), nil
}

// readUsableSecret reads one Secret and checks it carries the opt-in label
// and the keys u needs. A missing Secret and an unlabelled one get the same
// message, so a Memcached cannot probe which Secrets exist.
func (r *Reconciler) readUsableSecret(ctx context.Context, namespace string, u secretUse) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: u.name}, sec)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading Secret %s failed (%s)", u.name, status.APIErrorReason(err))
	case err != nil || sec.Labels[cachev1alpha1.UsableLabel] != "true":
		return nil, &secretNotUsableError{status.SecretNotUsableMessage(u.name, cachev1alpha1.UsableLabel, "Memcacheds")}
	}
	var missing []string
	for _, k := range u.keys {
		if len(sec.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, &secretNotUsableError{fmt.Sprintf("Secret %s has no data under %s", u.name, strings.Join(missing, ", "))}
	}
	if u.check != nil {
		if err := u.check(sec.Data); err != nil {
			return nil, &secretNotUsableError{fmt.Sprintf("Secret %s: %v, so memcached could not use it", u.name, err)}
		}
	}
	return sec, nil
}

// keyError prefixes a data check's error with the key(s) it checked.
func keyError(keys string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %w", keys, err)
}

// fingerprintSecrets writes the mounted data to h unambiguously: the
// Secret's name, then each needed key and its value, all length-prefixed.
// Only the keys the pods mount count, so a change elsewhere in the Secret
// (or of its labels) rolls nothing.
func fingerprintSecrets(h hash.Hash, uses []secretUse, secrets []*corev1.Secret) {
	field := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	field([]byte("memcached secret data v1"))
	for i, u := range uses {
		field([]byte(u.name))
		if u.rollsOn != nil {
			field([]byte("rolls on"))
			field(u.rollsOn(secrets[i].Data))
			continue
		}
		keys := slices.Clone(u.keys)
		slices.Sort(keys)
		for _, k := range keys {
			field([]byte(k))
			field(secrets[i].Data[k])
		}
	}
}

// asSecretProblem sorts an error of checkSecrets into the observation.
func asSecretProblem(err error, obs *observation) {
	var notUsable *secretNotUsableError
	var keyErr *fingerprintKeyError
	switch {
	case errors.As(err, &notUsable):
		obs.secretNotUsable = notUsable.msg
	case errors.As(err, &keyErr):
		obs.keyErr = keyErr
	case err != nil:
		obs.applyErr = err
	}
}
