package fingerprint

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretKey is the data key of the key Secret.
const SecretKey = "key"

// DefaultSecretName is the key Secret's name in the manager's namespace.
const DefaultSecretName = "runbook-fingerprint-key"

// Source hands out the manager's fingerprint key. It is read from (or,
// the first time, created as) a Secret in the manager's own namespace, so
// every replica and every restart uses the same key. Without a namespace
// (a manager run outside the cluster with no --operator-namespace) the key
// lives in memory only: baselines are then re-recorded after a restart.
type Source struct {
	reader    client.Reader
	writer    client.Writer
	namespace string
	name      string
	log       logr.Logger

	mu  sync.Mutex
	key *Key
	// failing: the last load failed and was logged (logged once, not once
	// per probe of every policy).
	failing bool
}

// NewSource builds a Source. reader should read live from the apiserver:
// the manager never caches Secrets.
func NewSource(reader client.Reader, writer client.Writer, namespace, name string, log logr.Logger) *Source {
	if name == "" {
		name = DefaultSecretName
	}
	return &Source{reader: reader, writer: writer, namespace: namespace, name: name, log: log}
}

// clients are a controller manager's.
type clients interface {
	GetAPIReader() client.Reader
	GetClient() client.Client
}

// NewManagerSource is the Source of a controller on mgr: it reads the key
// Secret through mgr's apiserver reader (the manager never caches Secrets)
// and logs under log's "fingerprint-key".
func NewManagerSource(mgr clients, namespace, name string, log logr.Logger) *Source {
	return NewSource(mgr.GetAPIReader(), mgr.GetClient(), namespace, name, log.WithName("fingerprint-key"))
}

// StaticSource always returns key (tests).
func StaticSource(key *Key) *Source { return &Source{key: key} }

// Key returns the key, loading or creating it on first use. A failure is
// returned (and retried on the next call), never cached.
func (s *Source) Key(ctx context.Context) (*Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	secret, err := s.load(ctx)
	var k *Key
	if err == nil {
		k, err = NewKey(secret)
	}
	if err != nil {
		if !s.failing {
			s.log.Error(err, "fingerprint key unavailable: sql and watch policies report FingerprintKeyUnavailable until it can be read")
			s.failing = true
		}
		return nil, err
	}
	if s.failing {
		s.log.Info("fingerprint key available again")
	}
	s.key, s.failing = k, false
	return k, nil
}

func (s *Source) load(ctx context.Context) ([]byte, error) {
	if s.namespace == "" {
		s.log.Info("no operator namespace: the fingerprint key lives in memory, so sql and watch baselines are re-recorded (changes made meanwhile missed) after each manager restart; set --operator-namespace")
		return Generate()
	}
	nn := types.NamespacedName{Namespace: s.namespace, Name: s.name}
	for attempt := 0; attempt < 2; attempt++ {
		var sec corev1.Secret
		err := s.reader.Get(ctx, nn, &sec)
		if err == nil {
			if b := sec.Data[SecretKey]; len(b) > 0 {
				return b, nil
			}
			return nil, fmt.Errorf("secret %s has no data key %q", nn, SecretKey)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading fingerprint key secret %s: %w", nn, err)
		}
		created, err := s.create(ctx, nn)
		if err == nil {
			return created, nil
		}
		// Another replica created it first: read theirs.
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	return nil, errors.New("fingerprint key secret was created and vanished")
}

func (s *Source) create(ctx context.Context, nn types.NamespacedName) ([]byte, error) {
	b, err := Generate()
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "runbook", "app.kubernetes.io/component": "fingerprint-key"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretKey: b},
	}
	if err := s.writer.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		return nil, fmt.Errorf("creating fingerprint key secret %s: %w", nn, err)
	}
	s.log.Info("created the fingerprint key secret", "secret", nn.String())
	return b, nil
}
