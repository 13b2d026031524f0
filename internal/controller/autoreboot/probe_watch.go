package autoreboot

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// watchProber reads a ConfigMap or Secret live (get on the one object: no
// cluster-wide cache of Secrets) and fingerprints its data.
type watchProber struct {
	reader    client.Reader
	namespace string
	spec      autorebootv1alpha1.WatchTrigger
}

func newWatchProber(reader client.Reader, namespace string, spec autorebootv1alpha1.WatchTrigger) *watchProber {
	return &watchProber{reader: reader, namespace: namespace, spec: spec}
}

func (p *watchProber) kind() string { return typeWatch }
func (p *watchProber) close()       {}

func (p *watchProber) probe(ctx context.Context) observation {
	key := types.NamespacedName{Namespace: p.namespace, Name: p.spec.Name}
	data := map[string][]byte{}
	var err error
	switch p.spec.Kind {
	case autorebootv1alpha1.WatchSecret:
		var s corev1.Secret
		if err = p.reader.Get(ctx, key, &s); err == nil {
			for k, v := range s.Data {
				data[k] = v
			}
		}
	default:
		var cm corev1.ConfigMap
		if err = p.reader.Get(ctx, key, &cm); err == nil {
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				data[k] = v
			}
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonWatchedNotFound, message: fmt.Sprintf("%s %s not found", p.spec.Kind, p.spec.Name)}
		}
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonProbeError, message: fmt.Sprintf("reading %s %s: %v", p.spec.Kind, p.spec.Name, err)}
	}
	return observation{result: autorebootv1alpha1.ResultSuccess, fingerprint: dataFingerprint(data, p.spec.Keys)}
}

// dataFingerprint hashes the selected keys (all when keys is empty); a
// missing key hashes differently from an empty value.
func dataFingerprint(data map[string][]byte, keys []string) string {
	if len(keys) == 0 {
		for k := range data {
			keys = append(keys, k)
		}
	} else {
		keys = append([]string(nil), keys...)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		v, ok := data[k]
		var hdr [17]byte
		binary.BigEndian.PutUint64(hdr[0:], uint64(len(k)))
		if ok {
			hdr[8] = 1
		}
		binary.BigEndian.PutUint64(hdr[9:], uint64(len(v)))
		h.Write(hdr[:])
		h.Write([]byte(k))
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))
}
