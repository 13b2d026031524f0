package probe

import (
	"context"
	"hash"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// refReader reads referenced objects live and fingerprints the selected
// keys. It is shared by every referenced prober: a ConfigMap that a
// thousand workloads reference is fetched once per change (concurrent
// reads of one version share one GET) and its fingerprint for a key
// selection is kept — a fingerprint, never the data — for later readers
// of the same version.
type refReader struct {
	live client.Reader

	mu      sync.Mutex
	flights map[string]*flight
	fps     *boundedCache
	digests *digestCache
}

// flight is one GET that concurrent readers wait for.
type flight struct {
	done chan struct{}
	data map[string][]byte
	// keys are the per-key digests of data, made once for every reader.
	keys *fingerprint.KeyDigests
	rv   string
	err  error
}

// fingerprintCacheSize bounds the shared fingerprint cache (entries are
// about 200 bytes).
const fingerprintCacheSize = 8192

func newRefReader(live client.Reader) *refReader {
	return &refReader{live: live, flights: map[string]*flight{}, fps: newBoundedCache(fingerprintCacheSize),
		digests: newDigestCache(digestCacheBytes)}
}

// objectState is what a prober knows of one referenced object.
type objectState struct {
	rv        string
	missing   bool
	notUsable bool
	// fps by key selection (reference.id without kind and name).
	fps map[string]string
	// keys are the per-key digests of this version (shared, read-only),
	// to name the keys of the next change.
	keys *fingerprint.KeyDigests
}

// readMetadata reads the metadata of an object that is not watched (a GET
// of metadata only: no data is transferred).
func (r *refReader) readMetadata(ctx context.Context, k refKey) (*metav1.PartialObjectMetadata, error) {
	m := metadataObject(k.kind)
	err := r.live.Get(ctx, types.NamespacedName{Namespace: k.namespace, Name: k.name}, m)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return m, err
}

// fingerprints returns the fingerprints of the selections of k at version
// rv, from the cache or one shared GET. The GET may find a newer version:
// the state then says which.
func (r *refReader) fingerprints(ctx context.Context, key *fingerprint.Key, k refKey, rv string, sels []string) (objectState, error) {
	st := objectState{rv: rv, fps: map[string]string{}, keys: r.digests.get(fpCacheKey(key, k, rv, ""))}
	var missing []string
	for _, sel := range sels {
		if fp, ok := r.fps.get(fpCacheKey(key, k, rv, sel)); ok {
			st.fps[sel] = fp
		} else {
			missing = append(missing, sel)
		}
	}
	if len(missing) == 0 && st.keys != nil {
		return st, nil
	}
	f := r.fetch(ctx, key, k, rv)
	if f.err != nil {
		return st, f.err
	}
	if f.data == nil {
		return objectState{missing: true}, nil
	}
	if f.rv != rv {
		st = objectState{rv: f.rv, fps: map[string]string{}}
		missing = sels
	}
	st.keys = f.keys
	for _, sel := range missing {
		fp := key.Sum(func(h hash.Hash) { writeData(h, f.data, selectionKeys(sel)) })
		st.fps[sel] = fp
		r.fps.put(fpCacheKey(key, k, st.rv, sel), fp)
	}
	return st, nil
}

// fetch GETs k once for every concurrent reader of version rv, and
// digests its keys once. The data lives only as long as the flight.
func (r *refReader) fetch(ctx context.Context, key *fingerprint.Key, k refKey, rv string) *flight {
	id := key.ID() + "/" + string(k.kind) + "/" + k.namespace + "/" + k.name + "@" + rv
	r.mu.Lock()
	if f, ok := r.flights[id]; ok {
		r.mu.Unlock()
		select {
		case <-f.done:
			return f
		case <-ctx.Done():
			return &flight{err: ctx.Err()}
		}
	}
	f := &flight{done: make(chan struct{})}
	r.flights[id] = f
	r.mu.Unlock()
	f.data, f.rv, f.err = r.get(ctx, k)
	if f.data != nil {
		f.keys = key.Digests(f.data, nil)
		r.digests.put(fpCacheKey(key, k, f.rv, ""), f.keys)
	}
	r.mu.Lock()
	delete(r.flights, id)
	r.mu.Unlock()
	close(f.done)
	return f
}

// get reads the object's data; nil data (and no error) when it is gone.
func (r *refReader) get(ctx context.Context, k refKey) (map[string][]byte, string, error) {
	nn := types.NamespacedName{Namespace: k.namespace, Name: k.name}
	if k.kind == autorebootv1alpha1.WatchSecret {
		var s corev1.Secret
		if err := r.live.Get(ctx, nn, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "", nil
			}
			return nil, "", err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		return s.Data, s.ResourceVersion, nil
	}
	var cm corev1.ConfigMap
	if err := r.live.Get(ctx, nn, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", nil
		}
		return nil, "", err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for key, v := range cm.Data {
		data[key] = []byte(v)
	}
	for key, v := range cm.BinaryData {
		data[key] = v
	}
	return data, cm.ResourceVersion, nil
}

// selection is the key part of a reference's id: "*" or "a,b".
func selection(r reference) string {
	if r.allKeys {
		return "*"
	}
	return strings.Join(r.keys, ",")
}

func selectionKeys(sel string) []string {
	if sel == "*" {
		return nil
	}
	return strings.Split(sel, ",")
}

func fpCacheKey(key *fingerprint.Key, k refKey, rv, sel string) string {
	return key.ID() + "\x00" + string(k.kind) + "\x00" + k.namespace + "\x00" + k.name + "\x00" + rv + "\x00" + sel
}

// boundedCache is a map of at most size entries; the oldest insert goes
// first.
type boundedCache struct {
	mu    sync.Mutex
	size  int
	m     map[string]string
	order []string
}

func newBoundedCache(size int) *boundedCache {
	return &boundedCache{size: size, m: map[string]string{}}
}

func (c *boundedCache) get(k string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *boundedCache) put(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		c.m[k] = v
		return
	}
	if len(c.order) >= c.size {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = v
	c.order = append(c.order, k)
}

// digestCacheBytes bounds the memory of the shared per-key digests (key
// names and 16 bytes a key): the digests of an object version are kept
// for the probers that read it later.
const digestCacheBytes = 32 << 20

// digestCache keeps per-key digests of object versions within a byte
// budget; the oldest insert goes first.
type digestCache struct {
	mu     sync.Mutex
	budget int
	used   int
	m      map[string]*fingerprint.KeyDigests
	order  []string
}

func newDigestCache(budget int) *digestCache {
	return &digestCache{budget: budget, m: map[string]*fingerprint.KeyDigests{}}
}

func (c *digestCache) get(k string) *fingerprint.KeyDigests {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *digestCache) put(k string, d *fingerprint.KeyDigests) {
	size := d.Size() + len(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok || size > c.budget {
		return
	}
	for c.used+size > c.budget && len(c.order) > 0 {
		old := c.order[0]
		c.used -= c.m[old].Size() + len(old)
		delete(c.m, old)
		c.order = c.order[1:]
	}
	c.m[k] = d
	c.order = append(c.order, k)
	c.used += size
}
