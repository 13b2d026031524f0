package reloadercompat

import (
	"context"
	"reflect"
	"testing"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

type fakeSource map[autorebootv1alpha1.ReferencedObject]objectMeta

func (f fakeSource) meta(_ context.Context, kind autorebootv1alpha1.WatchKind, _, name string) (objectMeta, error) {
	return f[autorebootv1alpha1.ReferencedObject{Kind: kind, Name: name}], nil
}

func (f fakeSource) configMapNames(context.Context, string) ([]string, error) {
	var out []string
	for o := range f {
		if o.Kind == autorebootv1alpha1.WatchConfigMap {
			out = append(out, o.Name)
		}
	}
	return out, nil
}

func cm(n string) autorebootv1alpha1.ReferencedObject {
	return autorebootv1alpha1.ReferencedObject{Kind: autorebootv1alpha1.WatchConfigMap, Name: n}
}

func sec(n string) autorebootv1alpha1.ReferencedObject {
	return autorebootv1alpha1.ReferencedObject{Kind: autorebootv1alpha1.WatchSecret, Name: n}
}

func TestResolveFollowsReloadersRules(t *testing.T) {
	src := fakeSource{
		cm("a"): {exists: true}, cm("b"): {exists: true, match: true}, cm("ig"): {exists: true, ignore: true},
		cm("app-1"): {exists: true}, cm("app-2"): {exists: true}, cm("other"): {exists: true},
		sec("s"): {exists: true}, sec("s-ig"): {exists: true, ignore: true},
	}
	refs := []autorebootv1alpha1.ReferencedObject{cm("a"), cm("b"), cm("ig"), sec("s"), sec("s-ig")}
	tests := []struct {
		name               string
		workload, template map[string]string
		want               []autorebootv1alpha1.ReferencedObject
		unsupported        []string
	}{
		{"auto", map[string]string{AnnotationAuto: "true"}, nil, []autorebootv1alpha1.ReferencedObject{cm("a"), cm("b"), sec("s")}, nil},
		{"auto True (ParseBool)", map[string]string{AnnotationAuto: "True"}, nil, []autorebootv1alpha1.ReferencedObject{cm("a"), cm("b"), sec("s")}, nil},
		{"auto yes is not true", map[string]string{AnnotationAuto: "yes"}, nil, []autorebootv1alpha1.ReferencedObject{}, nil},
		{"configmap auto", map[string]string{AnnotationConfigMapAuto: "true"}, nil, []autorebootv1alpha1.ReferencedObject{cm("a"), cm("b")}, nil},
		{"secret auto", map[string]string{AnnotationSecretAuto: "true"}, nil, []autorebootv1alpha1.ReferencedObject{sec("s")}, nil},
		{"search", map[string]string{AnnotationSearch: "true"}, nil, []autorebootv1alpha1.ReferencedObject{cm("b")}, nil},
		{"template only when the workload has none", nil, map[string]string{AnnotationAuto: "true"}, []autorebootv1alpha1.ReferencedObject{cm("a"), cm("b"), sec("s")}, nil},
		{"workload wins over template", map[string]string{AnnotationConfigMapAuto: "false"}, map[string]string{AnnotationConfigMapAuto: "true"}, []autorebootv1alpha1.ReferencedObject{}, nil},
		{"exclude list", map[string]string{AnnotationAuto: "true", AnnotationConfigMapExclude: "a"}, nil, []autorebootv1alpha1.ReferencedObject{cm("b"), sec("s")}, nil},
		{"named regex over the namespace's ConfigMaps", map[string]string{AnnotationConfigMapList: "app-.*, ig"}, nil, []autorebootv1alpha1.ReferencedObject{cm("app-1"), cm("app-2")}, nil},
		{"named Secret, pattern refused", map[string]string{AnnotationSecretList: "s, s-.*, missing"}, nil, []autorebootv1alpha1.ReferencedObject{sec("s")}, []string{"s-.*"}},
		{"invalid expression matches nothing", map[string]string{AnnotationConfigMapList: "a(, other"}, nil, []autorebootv1alpha1.ReferencedObject{cm("other")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := resolver{source: src}.resolve(context.Background(), "ns", readRules(tc.workload, tc.template), refs)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.objects, tc.want) {
				t.Errorf("objects = %v, want %v", res.objects, tc.want)
			}
			if !reflect.DeepEqual(res.unsupported, tc.unsupported) {
				t.Errorf("unsupported = %v, want %v", res.unsupported, tc.unsupported)
			}
		})
	}
}

func TestReloadListIsBounded(t *testing.T) {
	v := ""
	for i := range 200 {
		if i > 0 {
			v += ","
		}
		v += "x"
	}
	if n := len(splitList(v)); n != maxListEntries {
		t.Fatalf("%d entries kept, want %d", n, maxListEntries)
	}
}

func TestPolicyNameFitsAnObjectName(t *testing.T) {
	long := ""
	for range 250 {
		long += "a"
	}
	for _, n := range []string{"web", long} {
		if got := policyName(autorebootv1alpha1.KindDeployment, n); len(got) > 253 || got == "" {
			t.Fatalf("policyName(%d chars) = %q (%d)", len(n), got, len(got))
		}
	}
	if policyName(autorebootv1alpha1.KindDeployment, long+"b") == policyName(autorebootv1alpha1.KindDeployment, long+"c") {
		t.Fatal("two long names share a policy name")
	}
}
