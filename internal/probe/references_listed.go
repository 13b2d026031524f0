package probe

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// listedReferences are the references of a trigger that names its objects
// (spec.objects): every key of each counts, the way Reloader compares a
// whole object, and a listed object that does not exist is reported.
func listedReferences(objs []autorebootv1alpha1.ReferencedObject) []reference {
	byObj := make(map[refKey]reference, len(objs))
	for _, o := range objs {
		byObj[refKey{kind: o.Kind, name: o.Name}] = reference{kind: o.Kind, name: o.Name, allKeys: true}
	}
	out := make([]reference, 0, len(byObj))
	for _, r := range byObj {
		out = append(out, r)
	}
	sortReferences(out)
	return out
}

func sortReferences(refs []reference) {
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].kind != refs[j].kind {
			return refs[i].kind < refs[j].kind
		}
		return refs[i].name < refs[j].name
	})
}

// TemplateObjects names the ConfigMaps and Secrets a pod template
// references in the places a referenced trigger counts (see
// templateReferences), sorted by kind and name.
func TemplateObjects(spec *corev1.PodSpec) []autorebootv1alpha1.ReferencedObject {
	refs := templateReferences(spec)
	out := make([]autorebootv1alpha1.ReferencedObject, 0, len(refs))
	for _, r := range refs {
		out = append(out, autorebootv1alpha1.ReferencedObject{Kind: r.kind, Name: r.name})
	}
	return out
}
