package probe

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// reference is one ConfigMap or Secret a pod template references, with the
// keys whose change matters to the pods.
type reference struct {
	kind autorebootv1alpha1.WatchKind
	name string
	// allKeys: every key counts (envFrom, a volume without items).
	allKeys bool
	// keys (sorted, unique) count when allKeys is false.
	keys []string
	// optional: every use of the object is optional, so its absence is
	// normal (and its creation a change).
	optional bool
}

// id is the reference's identity as it enters the references hash and
// the fingerprint: kind, name and the keys that count.
func (r reference) id() string {
	sel := "*"
	if !r.allKeys {
		sel = strings.Join(r.keys, ",")
	}
	return string(r.kind) + "/" + r.name + "/" + sel
}

// refKey names an object of a namespace a reference points to.
type refKey struct {
	kind      autorebootv1alpha1.WatchKind
	namespace string
	name      string
}

// referenceSet collects the uses of objects while a template is walked.
type referenceSet struct {
	byObj map[refKey]*reference
}

func (s *referenceSet) add(kind autorebootv1alpha1.WatchKind, name string, keys []string, optional *bool) {
	if name == "" {
		return
	}
	k := refKey{kind: kind, name: name}
	r := s.byObj[k]
	if r == nil {
		r = &reference{kind: kind, name: name, optional: true}
		s.byObj[k] = r
	}
	// Required once is required.
	r.optional = r.optional && optional != nil && *optional
	if keys == nil {
		r.allKeys = true
		return
	}
	r.keys = append(r.keys, keys...)
}

// templateReferences lists the ConfigMaps and Secrets spec references in
// the places whose data reaches the pods: env[].valueFrom (that key),
// envFrom (every key), configMap/secret volumes and projected volume
// sources (the listed items, or every key), of init and regular
// containers. Image pull Secrets and volume plugins' credentials are left
// out: the pods do not read their data. The result is sorted by kind and
// name, keys unique and sorted.
func templateReferences(spec *corev1.PodSpec) []reference {
	s := &referenceSet{byObj: map[refKey]*reference{}}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			containerReferences(s, &list[i])
		}
	}
	for i := range spec.Volumes {
		volumeReferences(s, &spec.Volumes[i].VolumeSource)
	}
	out := make([]reference, 0, len(s.byObj))
	for _, r := range s.byObj {
		if r.allKeys {
			r.keys = nil
		} else {
			sort.Strings(r.keys)
			r.keys = slices.Compact(r.keys)
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].name < out[j].name
	})
	return out
}

func containerReferences(s *referenceSet, c *corev1.Container) {
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			s.add(autorebootv1alpha1.WatchConfigMap, r.Name, []string{r.Key}, r.Optional)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			s.add(autorebootv1alpha1.WatchSecret, r.Name, []string{r.Key}, r.Optional)
		}
	}
	for _, e := range c.EnvFrom {
		if r := e.ConfigMapRef; r != nil {
			s.add(autorebootv1alpha1.WatchConfigMap, r.Name, nil, r.Optional)
		}
		if r := e.SecretRef; r != nil {
			s.add(autorebootv1alpha1.WatchSecret, r.Name, nil, r.Optional)
		}
	}
}

func volumeReferences(s *referenceSet, v *corev1.VolumeSource) {
	if cm := v.ConfigMap; cm != nil {
		s.add(autorebootv1alpha1.WatchConfigMap, cm.Name, itemKeys(cm.Items), cm.Optional)
	}
	if sec := v.Secret; sec != nil {
		s.add(autorebootv1alpha1.WatchSecret, sec.SecretName, itemKeys(sec.Items), sec.Optional)
	}
	if v.Projected == nil {
		return
	}
	for _, src := range v.Projected.Sources {
		if cm := src.ConfigMap; cm != nil {
			s.add(autorebootv1alpha1.WatchConfigMap, cm.Name, itemKeys(cm.Items), cm.Optional)
		}
		if sec := src.Secret; sec != nil {
			s.add(autorebootv1alpha1.WatchSecret, sec.Name, itemKeys(sec.Items), sec.Optional)
		}
	}
}

// itemKeys: nil (every key) without items, else the listed keys.
func itemKeys(items []corev1.KeyToPath) []string {
	if len(items) == 0 {
		return nil
	}
	keys := make([]string, 0, len(items))
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	return keys
}

// filterReferences applies the trigger's kinds and exclusions.
func filterReferences(refs []reference, t autorebootv1alpha1.ReferencedTrigger) []reference {
	out := refs[:0:0]
	for _, r := range refs {
		if len(t.Kinds) > 0 && !slices.Contains(t.Kinds, r.kind) {
			continue
		}
		if excluded(r, t.Exclude) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func excluded(r reference, ex []autorebootv1alpha1.ReferenceExclusion) bool {
	for _, e := range ex {
		if e.Name == r.name && (e.Kind == "" || e.Kind == r.kind) {
			return true
		}
	}
	return false
}

// referencesHash identifies a set of references (names are no secret:
// the template shows them); a different set starts a new baseline.
func referencesHash(refs []reference) string {
	h := sha256.New()
	for _, r := range refs {
		h.Write([]byte(r.id()))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
