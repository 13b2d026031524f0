package probe

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

const (
	cmKind  = autorebootv1alpha1.WatchConfigMap
	secKind = autorebootv1alpha1.WatchSecret
)

func cmKeyEnv(name, key string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: "E", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: optional}}}
}

func secKeyEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}}
}

func items(keys ...string) []corev1.KeyToPath {
	out := make([]corev1.KeyToPath, 0, len(keys))
	for _, k := range keys {
		out = append(out, corev1.KeyToPath{Key: k, Path: k})
	}
	return out
}

func TestTemplateReferences(t *testing.T) {
	ref := func(kind autorebootv1alpha1.WatchKind, name string, optional bool, keys ...string) reference {
		return reference{kind: kind, name: name, allKeys: keys == nil, keys: keys, optional: optional}
	}
	cases := []struct {
		name string
		spec corev1.PodSpec
		want []reference
	}{
		{"nothing referenced", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Env: []corev1.EnvVar{{Name: "X", Value: "1"}}}}}, []reference{}},
		{"env valueFrom: only that key",
			corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{cmKeyEnv("cm", "k", nil)}}}},
			[]reference{ref(cmKind, "cm", false, "k")}},
		{"two env keys of one ConfigMap, one Secret key",
			corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{cmKeyEnv("cm", "b", nil), cmKeyEnv("cm", "a", nil), cmKeyEnv("cm", "a", nil), secKeyEnv("s", "pw")}}}},
			[]reference{ref(cmKind, "cm", false, "a", "b"), ref(secKind, "s", false, "pw")}},
		{"envFrom: every key, optional",
			corev1.PodSpec{Containers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Optional: ptr.To(true)}},
				{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
			}}}},
			[]reference{ref(cmKind, "cm", true), ref(secKind, "s", false)}},
		{"an env key and envFrom of the same ConfigMap: every key",
			corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{cmKeyEnv("cm", "k", nil)}, EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}},
			[]reference{ref(cmKind, "cm", false)}},
		{"init containers count",
			corev1.PodSpec{InitContainers: []corev1.Container{{Env: []corev1.EnvVar{secKeyEnv("init-secret", "token")}}}},
			[]reference{ref(secKind, "init-secret", false, "token")}},
		{"optional only when every use is optional",
			corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{cmKeyEnv("cm", "a", ptr.To(true)), cmKeyEnv("cm", "b", ptr.To(false))}}}},
			[]reference{ref(cmKind, "cm", false, "a", "b")}},
		{"an optional key",
			corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{cmKeyEnv("cm", "a", ptr.To(true))}}}},
			[]reference{ref(cmKind, "cm", true, "a")}},
		{"volumes without items: every key; with items: those keys",
			corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "whole"}}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "part"}, Items: items("x.conf")}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: items("tls.key", "tls.crt"), Optional: ptr.To(true)}}},
			}},
			[]reference{ref(cmKind, "part", false, "x.conf"), ref(cmKind, "whole", false), ref(secKind, "tls", true, "tls.crt", "tls.key")}},
		{"projected sources",
			corev1.PodSpec{Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "pcm"}, Items: items("a")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "psec"}, Optional: ptr.To(true)}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{DownwardAPI: &corev1.DownwardAPIProjection{}},
			}}}}}},
			[]reference{ref(cmKind, "pcm", false, "a"), ref(secKind, "psec", true)}},
		{"a volume with items and an env key of the same Secret: the union",
			corev1.PodSpec{
				Containers: []corev1.Container{{Env: []corev1.EnvVar{secKeyEnv("s", "user")}}},
				Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", Items: items("pw")}}}},
			},
			[]reference{ref(secKind, "s", false, "pw", "user")}},
		{"image pull Secrets and volume plugin credentials are no data of the pods",
			corev1.PodSpec{
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
				Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{
					Monitors: []string{"m"}, SecretRef: &corev1.LocalObjectReference{Name: "ceph"}}}}},
			},
			[]reference{}},
		{"a reference without a name is ignored",
			corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{cmKeyEnv("", "k", nil)}}}},
			[]reference{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := templateReferences(&tc.spec)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("references =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestFilterReferences(t *testing.T) {
	refs := []reference{
		{kind: cmKind, name: "app", allKeys: true},
		{kind: cmKind, name: "reloaded-by-itself", allKeys: true},
		{kind: secKind, name: "app", allKeys: true},
	}
	cases := []struct {
		name    string
		trigger autorebootv1alpha1.ReferencedTrigger
		want    []string
	}{
		{"all", autorebootv1alpha1.ReferencedTrigger{}, []string{"ConfigMap/app/*", "ConfigMap/reloaded-by-itself/*", "Secret/app/*"}},
		{"ConfigMaps only", autorebootv1alpha1.ReferencedTrigger{Kinds: []autorebootv1alpha1.WatchKind{cmKind}}, []string{"ConfigMap/app/*", "ConfigMap/reloaded-by-itself/*"}},
		{"exclude by name and kind", autorebootv1alpha1.ReferencedTrigger{Exclude: []autorebootv1alpha1.ReferenceExclusion{{Kind: cmKind, Name: "reloaded-by-itself"}}},
			[]string{"ConfigMap/app/*", "Secret/app/*"}},
		{"exclude a name of both kinds", autorebootv1alpha1.ReferencedTrigger{Exclude: []autorebootv1alpha1.ReferenceExclusion{{Name: "app"}}},
			[]string{"ConfigMap/reloaded-by-itself/*"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range filterReferences(refs, tc.trigger) {
				got = append(got, r.id())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("filtered = %v, want %v", got, tc.want)
			}
		})
	}
	if referencesHash(refs[:1]) == referencesHash(refs[:2]) {
		t.Fatal("two reference sets with the same hash")
	}
}
