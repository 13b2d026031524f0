package reloadercompat

import (
	"context"
	"regexp"
	"sort"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// objectMeta is what the resolution reads of a ConfigMap or Secret: whether
// it exists and Reloader's two annotations on it. Never data.
type objectMeta struct {
	exists        bool
	ignore, match bool
}

// metadataSource reads objectMeta of one namespace's objects.
type metadataSource interface {
	// meta of one object.
	meta(ctx context.Context, kind autorebootv1alpha1.WatchKind, namespace, name string) (objectMeta, error)
	// configMapNames lists the namespace's ConfigMaps (for the reload
	// list's regular expressions).
	configMapNames(ctx context.Context, namespace string) ([]string, error)
}

// resolution is the set of objects a workload depends on, Reloader's way.
type resolution struct {
	objects []autorebootv1alpha1.ReferencedObject
	// unsupported: Secret reload-list entries that are not names (a
	// pattern would need a list of the namespace's Secrets).
	unsupported []string
	// truncated: more objects than a policy may list; the rest are left out.
	truncated int
	// secrets: whether any Secret was considered (their annotations are
	// not watched, so they are read again later).
	secrets bool
}

// resolver decides, per workload, what Reloader would restart it for.
type resolver struct {
	source metadataSource
}

// resolve applies r to the objects the template references (refs) and
// the reload lists. Reloader's order, per object: an ignored object never
// counts; a name in the workload's exclusion list never counts; then a
// reload-list match, a match annotation in search mode, or auto mode for
// a referenced object counts.
func (rv resolver) resolve(ctx context.Context, namespace string, r rules, refs []autorebootv1alpha1.ReferencedObject) (resolution, error) {
	var res resolution
	set := map[autorebootv1alpha1.ReferencedObject]bool{}
	for _, ref := range refs {
		kr := r.of(ref.Kind)
		if !kr.auto && !kr.search && len(kr.named) == 0 {
			continue
		}
		res.secrets = res.secrets || ref.Kind == autorebootv1alpha1.WatchSecret
		m, err := rv.source.meta(ctx, ref.Kind, namespace, ref.Name)
		if err != nil {
			return res, err
		}
		if m.ignore || kr.exclude[ref.Name] {
			continue
		}
		if kr.auto || (kr.search && m.match) || namedMatch(kr.named, ref.Name) {
			set[ref] = true
		}
	}
	if err := rv.namedConfigMaps(ctx, namespace, r.configMaps, set); err != nil {
		return res, err
	}
	unsupported, err := rv.namedSecrets(ctx, namespace, r.secrets, set)
	if err != nil {
		return res, err
	}
	res.unsupported = unsupported
	res.secrets = res.secrets || len(r.secrets.named) > 0
	res.objects = sortedObjects(set)
	if len(res.objects) > maxObjects {
		res.truncated = len(res.objects) - maxObjects
		res.objects = res.objects[:maxObjects]
	}
	return res, nil
}

// maxObjects is the most objects a RebootPolicy's referenced trigger lists
// (the CRD's bound).
const maxObjects = 128

// namedConfigMaps adds the namespace's ConfigMaps the reload list's
// expressions match (Go's regexp, like Reloader's; an invalid expression
// matches nothing, as there).
func (rv resolver) namedConfigMaps(ctx context.Context, namespace string, kr kindRules, set map[autorebootv1alpha1.ReferencedObject]bool) error {
	if len(kr.named) == 0 {
		return nil
	}
	names, err := rv.source.configMapNames(ctx, namespace)
	if err != nil {
		return err
	}
	exprs := compileAll(kr.named)
	for _, n := range names {
		if kr.exclude[n] || !anyMatch(exprs, n) {
			continue
		}
		m, err := rv.source.meta(ctx, autorebootv1alpha1.WatchConfigMap, namespace, n)
		if err != nil {
			return err
		}
		if m.exists && !m.ignore {
			set[autorebootv1alpha1.ReferencedObject{Kind: autorebootv1alpha1.WatchConfigMap, Name: n}] = true
		}
	}
	return nil
}

// namedSecrets adds the Secrets the reload list names. Secrets are not
// listed (the manager keeps no list of a namespace's Secrets), so only
// entries that are names count; the others are returned.
func (rv resolver) namedSecrets(ctx context.Context, namespace string, kr kindRules, set map[autorebootv1alpha1.ReferencedObject]bool) ([]string, error) {
	var unsupported []string
	for _, e := range kr.named {
		if !isObjectName(e) {
			unsupported = append(unsupported, e)
			continue
		}
		if kr.exclude[e] {
			continue
		}
		m, err := rv.source.meta(ctx, autorebootv1alpha1.WatchSecret, namespace, e)
		if err != nil {
			return nil, err
		}
		// A missing Secret is looked at again later: Reloader does not
		// restart for a creation either.
		if m.exists && !m.ignore {
			set[autorebootv1alpha1.ReferencedObject{Kind: autorebootv1alpha1.WatchSecret, Name: e}] = true
		}
	}
	return unsupported, nil
}

func namedMatch(entries []string, name string) bool {
	return anyMatch(compileAll(entries), name)
}

func compileAll(entries []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(entries))
	for _, e := range entries {
		if re, err := regexp.Compile("^" + e + "$"); err == nil {
			out = append(out, re)
		}
	}
	return out
}

func anyMatch(exprs []*regexp.Regexp, name string) bool {
	for _, re := range exprs {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func sortedObjects(set map[autorebootv1alpha1.ReferencedObject]bool) []autorebootv1alpha1.ReferencedObject {
	out := make([]autorebootv1alpha1.ReferencedObject, 0, len(set))
	for o := range set {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
