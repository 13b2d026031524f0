package memcached

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// logShipper is a sidecar as users write one: a plain env, one from a
// Secret, a port, a mount of an extra volume and its own identity.
func logShipper() cachev1alpha1.ExtraContainer {
	return cachev1alpha1.ExtraContainer{
		Name: "shipper", Image: "example.com/shipper:1", Args: []string{"--in=/logs"},
		Env: []cachev1alpha1.ContainerEnvVar{{Name: "LEVEL", Value: "info"},
			{Name: "TOKEN", SecretKeyRef: &cachev1alpha1.SecretKeyRef{Name: "shipper-token", Key: "token"}}},
		Ports:        []cachev1alpha1.ContainerPort{{Name: "http", ContainerPort: 2020}},
		VolumeMounts: []cachev1alpha1.ContainerVolumeMount{{Name: "logs", MountPath: "/logs", ReadOnly: true}},
		SecurityContext: &cachev1alpha1.ExtraContainerSecurity{
			ContainerSecurity: cachev1alpha1.ContainerSecurity{RunAsUser: ptr.To[int64](2000)},
			AddCapabilities:   []corev1.Capability{capNetBindService}},
	}
}

func overriddenSpec() cachev1alpha1.MemcachedSpec {
	return cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
		ExtraVolumes: []cachev1alpha1.ExtraVolume{{Name: "logs", MountPath: "/logs", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}},
		PodSecurityContext: &cachev1alpha1.PodSecurity{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000),
			FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000}, HostUsers: ptr.To(false),
			SeccompProfile:  &cachev1alpha1.Profile{Type: cachev1alpha1.ProfileLocalhost, LocalhostProfile: ptr.To("profiles/memcached.json")},
			AppArmorProfile: &cachev1alpha1.Profile{Type: cachev1alpha1.ProfileRuntimeDefault}},
		ContainerSecurityContext: &cachev1alpha1.ContainerSecurity{RunAsUser: ptr.To[int64](1001)},
		InitContainers:           []cachev1alpha1.ExtraContainer{{Name: "warm", Image: "example.com/warm:1"}},
		Sidecars:                 []cachev1alpha1.ExtraContainer{logShipper()},
	}}
}

func TestSidecarsAndInitContainersAreRendered(t *testing.T) {
	_, d := buildDeployment(t, overriddenSpec())
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) != 2 || pod.InitContainers[0].Name != "warm" || pod.InitContainers[1].Name != "shipper" {
		t.Fatalf("init containers = %+v, want warm then shipper", pod.InitContainers)
	}
	if pod.InitContainers[0].RestartPolicy != nil {
		t.Errorf("an init container has restartPolicy %v, want none", *pod.InitContainers[0].RestartPolicy)
	}
	shipper := pod.InitContainers[1]
	if shipper.RestartPolicy == nil || *shipper.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the sidecar is not a native sidecar: restartPolicy %v", shipper.RestartPolicy)
	}
	if len(shipper.Env) != 2 || shipper.Env[1].ValueFrom.SecretKeyRef.Name != "shipper-token" || shipper.Env[1].ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("env = %+v", shipper.Env)
	}
	if len(shipper.VolumeMounts) != 1 || shipper.VolumeMounts[0].Name != "logs" || !shipper.VolumeMounts[0].ReadOnly {
		t.Errorf("mounts = %+v", shipper.VolumeMounts)
	}
	if len(shipper.Ports) != 1 || shipper.Ports[0].HostPort != 0 || shipper.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports = %+v", shipper.Ports)
	}
	sc := shipper.SecurityContext
	if *sc.AllowPrivilegeEscalation || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.RunAsUser != 2000 ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != capNetBindService {
		t.Errorf("sidecar security context = %+v", sc)
	}
	psc := pod.SecurityContext
	if *psc.RunAsUser != 1000 || *psc.RunAsGroup != 1000 || *psc.FSGroup != 3000 || psc.SupplementalGroups[0] != 4000 || !*psc.RunAsNonRoot ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || *psc.SeccompProfile.LocalhostProfile != "profiles/memcached.json" ||
		psc.AppArmorProfile.Type != corev1.AppArmorProfileTypeRuntimeDefault {
		t.Errorf("pod security context = %+v", psc)
	}
	if pod.HostUsers == nil || *pod.HostUsers {
		t.Errorf("hostUsers = %v, want false", pod.HostUsers)
	}
	mc := pod.Containers[0].SecurityContext
	if *mc.RunAsUser != 1001 || !*mc.ReadOnlyRootFilesystem || *mc.AllowPrivilegeEscalation {
		t.Errorf("memcached security context = %+v", mc)
	}
}

func TestWritableRootFilesystemOnlyWhenAsked(t *testing.T) {
	spec := overriddenSpec()
	spec.Sidecars[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
	_, d := buildDeployment(t, spec)
	if *d.Spec.Template.Spec.InitContainers[1].SecurityContext.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem false is not rendered")
	}
	if !*d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem {
		t.Error("memcached's root filesystem is writable")
	}
}

func TestNoExtraContainersRenderNone(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{})
	if n := len(d.Spec.Template.Spec.InitContainers); n != 0 {
		t.Errorf("init containers = %d, want 0", n)
	}
	if d.Spec.Template.Spec.HostUsers != nil {
		t.Error("hostUsers set without an override")
	}
}

func TestOverridesChangeTheConfigHash(t *testing.T) {
	_, plain := buildDeployment(t, cachev1alpha1.MemcachedSpec{})
	_, over := buildDeployment(t, overriddenSpec())
	if plain.Spec.Template.Annotations[AnnotationConfigHash] == over.Spec.Template.Annotations[AnnotationConfigHash] {
		t.Error("adding sidecars and security overrides does not change the config hash, so pods would not roll")
	}
}

// restrictedProblems is what the Pod Security restricted level (latest
// version) refuses in spec.
func restrictedProblems(t *testing.T, meta *metav1.ObjectMeta, spec *corev1.PodSpec) string {
	t.Helper()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := policy.AggregateCheckResults(eval.EvaluatePod(api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}, meta, spec))
	if res.Allowed {
		return ""
	}
	return res.ForbiddenReason() + ": " + res.ForbiddenDetail()
}

func TestRenderedPodsPassPodSecurityRestricted(t *testing.T) {
	withEverything := overriddenSpec()
	withEverything.TLS = &cachev1alpha1.TLSSpec{SecretName: "tls", ClientCA: &cachev1alpha1.SecretKeySelector{Name: "ca", Key: "ca.crt"}}
	withEverything.Exporter = &cachev1alpha1.ExporterSpec{Enabled: true}
	writable := overriddenSpec()
	writable.Sidecars[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
	for name, spec := range map[string]cachev1alpha1.MemcachedSpec{
		"defaults":           {},
		"every override":     overriddenSpec(),
		"TLS and exporter":   withEverything,
		"writable root":      writable,
		"auth":               {Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}},
		"bare sidecar":       {PodOverrides: cachev1alpha1.PodOverrides{Sidecars: []cachev1alpha1.ExtraContainer{{Name: "s", Image: "x"}}}},
		"RuntimeDefault pod": {PodOverrides: cachev1alpha1.PodOverrides{PodSecurityContext: &cachev1alpha1.PodSecurity{SeccompProfile: &cachev1alpha1.Profile{Type: cachev1alpha1.ProfileRuntimeDefault}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, d := buildDeployment(t, spec)
			if p := restrictedProblems(t, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec); p != "" {
				t.Errorf("restricted refuses the rendered pod: %s", p)
			}
		})
	}
}

// The evaluator does catch what the CRD keeps out, so the test above
// proves something.
func TestRestrictedEvaluatorCatchesPrivilege(t *testing.T) {
	_, d := buildDeployment(t, overriddenSpec())
	d.Spec.Template.Spec.InitContainers[1].SecurityContext.Privileged = ptr.To(true)
	if restrictedProblems(t, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec) == "" {
		t.Error("a privileged sidecar passes the evaluator")
	}
}

func TestHostileOverridesAreRefused(t *testing.T) {
	hostile := func(mutate func(o *cachev1alpha1.PodOverrides)) cachev1alpha1.MemcachedSpec {
		spec := overriddenSpec()
		mutate(&spec.PodOverrides)
		return spec
	}
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		want string
	}{
		{"root pod", hostile(func(o *cachev1alpha1.PodOverrides) { o.PodSecurityContext.RunAsUser = ptr.To[int64](0) }), "runAsUser must not be root"},
		{"root memcached", hostile(func(o *cachev1alpha1.PodOverrides) { o.ContainerSecurityContext.RunAsUser = ptr.To[int64](0) }), "runAsUser must not be root"},
		{"root sidecar", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].SecurityContext.RunAsUser = ptr.To[int64](0) }), "runAsUser must not be root"},
		{"host users", hostile(func(o *cachev1alpha1.PodOverrides) { o.PodSecurityContext.HostUsers = ptr.To(true) }), "hostUsers may only be false"},
		{"unconfined seccomp", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.PodSecurityContext.SeccompProfile = &cachev1alpha1.Profile{Type: "Unconfined"}
		}), "neither RuntimeDefault nor Localhost"},
		{"unconfined AppArmor in a sidecar", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.Sidecars[0].SecurityContext.AppArmorProfile = &cachev1alpha1.Profile{Type: "Unconfined"}
		}), "neither RuntimeDefault nor Localhost"},
		{"escaping localhost profile", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.PodSecurityContext.SeccompProfile.LocalhostProfile = ptr.To("../../etc/x")
		}), "relative and without '..'"},
		{"SYS_ADMIN", hostile(func(o *cachev1alpha1.PodOverrides) {
			o.Sidecars[0].SecurityContext.AddCapabilities = []corev1.Capability{"SYS_ADMIN"}
		}),
			"only NET_BIND_SERVICE"},
		{"a sidecar named memcached", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].Name = containerMemcached }), "name is taken"},
		{"an init container named exporter", hostile(func(o *cachev1alpha1.PodOverrides) { o.InitContainers[0].Name = containerExporter }), "name is taken"},
		{"a sidecar and an init container of one name", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].Name = "warm" }), "name is taken"},
		{"mounting the TLS volume", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].VolumeMounts[0].Name = tlsVolumeName }), "not an extraVolume"},
		{"mounting over /etc/memcached", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].VolumeMounts[0].MountPath = "/etc/memcached/tls" }),
			"not /etc/memcached or below"},
		{"memcached's port", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].Ports[0].ContainerPort = 11211 }), "11211 and 9150"},
		{"value and secretKeyRef", hostile(func(o *cachev1alpha1.PodOverrides) { o.Sidecars[0].Env[1].Value = "x" }), "both value and secretKeyRef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveSettings(&tt.spec)
			var invalid *invalidSpecError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want an invalid spec containing %q", err, tt.want)
			}
		})
	}
}

func TestEnvSecretsMustBeUsable(t *testing.T) {
	spec := overriddenSpec()
	spec.InitContainers[0].Env = []cachev1alpha1.ContainerEnvVar{{Name: "A", SecretKeyRef: &cachev1alpha1.SecretKeyRef{Name: "shipper-token", Key: "other"}}}
	s, err := resolveSettings(&spec)
	if err != nil {
		t.Fatal(err)
	}
	uses := secretUses(s, &spec)
	if len(uses) != 1 || uses[0].name != "shipper-token" || uses[0].mounted || strings.Join(uses[0].keys, ",") != "other,token" {
		t.Fatalf("secret uses = %+v, want one unmounted use of shipper-token with keys other and token", uses)
	}
}

func TestEnvSecretsAreBounded(t *testing.T) {
	spec := cachev1alpha1.MemcachedSpec{}
	x := cachev1alpha1.ExtraContainer{Name: "s", Image: "x"}
	for i := range maxEnvSecrets + 1 {
		n := string(rune('a' + i))
		x.Env = append(x.Env, cachev1alpha1.ContainerEnvVar{Name: n, SecretKeyRef: &cachev1alpha1.SecretKeyRef{Name: n, Key: "k"}})
	}
	spec.Sidecars = []cachev1alpha1.ExtraContainer{x}
	if _, err := resolveSettings(&spec); err == nil || !strings.Contains(err.Error(), "at most 8") {
		t.Fatalf("error = %v, want the Secret bound", err)
	}
}
