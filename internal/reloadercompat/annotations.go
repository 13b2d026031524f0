// Package reloadercompat honours Stakater Reloader's workload annotations
// (docs/reloader-compat.md). It decides which ConfigMaps and Secrets each
// annotated workload depends on the way Reloader does, and expresses that
// as one RebootPolicy per workload with a referenced trigger listing them:
// fingerprints, governance and restarts are the RebootPolicy controller's.
package reloadercompat

import (
	"strconv"
	"strings"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Reloader's annotations, as its documentation names them.
const (
	AnnotationAuto          = "reloader.stakater.com/auto"
	AnnotationConfigMapAuto = "configmap.reloader.stakater.com/auto"
	AnnotationSecretAuto    = "secret.reloader.stakater.com/auto"
	AnnotationConfigMapList = "configmap.reloader.stakater.com/reload"
	AnnotationSecretList    = "secret.reloader.stakater.com/reload"
	AnnotationSearch        = "reloader.stakater.com/search"
	AnnotationMatch         = "reloader.stakater.com/match"
	AnnotationIgnore        = "reloader.stakater.com/ignore"
	// The exclusion lists name referenced objects auto mode leaves out.
	AnnotationConfigMapExclude = "configmaps.exclude.reloader.stakater.com/reload"
	AnnotationSecretExclude    = "secrets.exclude.reloader.stakater.com/reload"
)

// maxListEntries bounds the entries read from one named or exclusion list
// (an annotation value can be 256 KiB).
const maxListEntries = 64

// kindRules is what a workload's annotations ask for one kind of object.
type kindRules struct {
	// auto: every referenced object of the kind.
	auto bool
	// search: referenced objects of the kind that carry the match annotation.
	search bool
	// named: the reload list's entries, referenced or not. Reloader reads
	// each as a regular expression anchored at both ends.
	named []string
	// exclude: names never tracked.
	exclude map[string]bool
}

func (k kindRules) any() bool { return k.auto || k.search || len(k.named) > 0 }

// rules is what a workload's annotations ask for.
type rules struct {
	configMaps, secrets kindRules
}

func (r rules) any() bool { return r.configMaps.any() || r.secrets.any() }

func (r rules) of(kind autorebootv1alpha1.WatchKind) kindRules {
	if kind == autorebootv1alpha1.WatchSecret {
		return r.secrets
	}
	return r.configMaps
}

// kindKeys are the annotation names that concern one kind.
type kindKeys struct{ list, typedAuto, exclude string }

var (
	configMapKeys = kindKeys{AnnotationConfigMapList, AnnotationConfigMapAuto, AnnotationConfigMapExclude}
	secretKeys    = kindKeys{AnnotationSecretList, AnnotationSecretAuto, AnnotationSecretExclude}
)

// readRules reads a workload's annotations as Reloader does: per kind,
// the workload's own annotations, or the pod template's when the workload
// carries none of that kind's list, auto, typed auto or search
// annotations. auto takes precedence over search; a value true for
// Go's strconv.ParseBool (true, 1, t, T, TRUE, True) enables auto.
func readRules(workload, template map[string]string) rules {
	return rules{
		configMaps: readKind(workload, template, configMapKeys),
		secrets:    readKind(workload, template, secretKeys),
	}
}

func readKind(workload, template map[string]string, k kindKeys) kindRules {
	src := workload
	if !hasAny(workload, k.list, AnnotationAuto, k.typedAuto, AnnotationSearch) {
		src = template
	}
	auto, _ := strconv.ParseBool(src[AnnotationAuto])
	typed, _ := strconv.ParseBool(src[k.typedAuto])
	r := kindRules{auto: auto || typed, search: src[AnnotationSearch] == "true"}
	r.named = splitList(src[k.list])
	// Exclusions are read from the workload itself only, like Reloader.
	if excl := splitList(workload[k.exclude]); len(excl) > 0 {
		r.exclude = make(map[string]bool, len(excl))
		for _, n := range excl {
			r.exclude[n] = true
		}
	}
	return r
}

func hasAny(m map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// splitList splits a comma-separated list into its trimmed entries, at
// most maxListEntries, each at most 253 characters (longer ones cannot
// name an object and are dropped).
func splitList(v string) []string {
	if v == "" {
		return nil
	}
	var out []string
	for i, e := range strings.Split(v, ",") {
		if i >= maxListEntries {
			break
		}
		if e = strings.TrimSpace(e); e != "" && len(e) <= 253 {
			out = append(out, e)
		}
	}
	return out
}

// isObjectName: a DNS subdomain, what ConfigMap and Secret names are.
func isObjectName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && ((c != '-' && c != '.') || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
