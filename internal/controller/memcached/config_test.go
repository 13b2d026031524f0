package memcached

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func memoryLimit(q string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
}

func TestResolveSettings(t *testing.T) {
	tests := []struct {
		name    string
		spec    cachev1alpha1.MemcachedSpec
		check   func(t *testing.T, s settings)
		wantErr string
	}{
		{
			name: "empty spec gets every default",
			spec: cachev1alpha1.MemcachedSpec{},
			check: func(t *testing.T, s settings) {
				want := settings{
					Kind: cachev1alpha1.WorkloadDeployment, Size: 1, Image: cachev1alpha1.DefaultImage, MemoryMiB: 64, MaxConnections: 1024, Threads: 4,
					MaxItemSizeKiB: 1024, PDBEnabled: false, PDBMaxUnavail: intstr.FromInt32(1),
				}
				if !equalSettings(s, want) {
					t.Errorf("got %+v, want %+v", s, want)
				}
			},
		},
		{
			name:  "size 0 is kept (parked)",
			spec:  cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](0)},
			check: func(t *testing.T, s settings) { expectEq(t, "size", s.Size, 0) },
		},
		{
			name: "memory derived from a large limit keeps 10% headroom",
			spec: cachev1alpha1.MemcachedSpec{Resources: memoryLimit("1Gi")},
			check: func(t *testing.T, s settings) {
				expectEq(t, "memoryMiB", s.MemoryMiB, 1024-102)
			},
		},
		{
			name: "memory derived from a small limit keeps 16 MiB headroom",
			spec: cachev1alpha1.MemcachedSpec{Resources: memoryLimit("64Mi")},
			check: func(t *testing.T, s settings) {
				expectEq(t, "memoryMiB", s.MemoryMiB, 48)
			},
		},
		{
			name: "explicit memory wins over the limit",
			spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](200), Resources: memoryLimit("256Mi")},
			check: func(t *testing.T, s settings) {
				expectEq(t, "memoryMiB", s.MemoryMiB, 200)
			},
		},
		{
			name:    "explicit memory equal to the limit leaves no headroom",
			spec:    cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](256), Resources: memoryLimit("256Mi")},
			wantErr: "memoryMiB 256 leaves 0 MiB of the 256 MiB memory limit",
		},
		{
			name:    "explicit memory inside the headroom",
			spec:    cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](232), Resources: memoryLimit("256Mi")},
			wantErr: "which needs 25 MiB (10% of the limit, at least 16 MiB): set memoryMiB to at most 231",
		},
		{
			name: "explicit memory at the edge of the headroom",
			spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](231), Resources: memoryLimit("256Mi")},
			check: func(t *testing.T, s settings) {
				expectEq(t, "memoryMiB", s.MemoryMiB, 231)
				expectEq(t, "default limit", s.DefaultMemoryLimit == nil, true)
			},
		},
		{
			name: "no limit: the default limit leaves the default memory its headroom",
			spec: cachev1alpha1.MemcachedSpec{},
			check: func(t *testing.T, s settings) {
				expectEq(t, "memoryMiB", s.MemoryMiB, 64)
				expectEq(t, "default limit", s.DefaultMemoryLimit.String(), "80Mi")
			},
		},
		{
			name: "no limit: the default limit follows memoryMiB",
			spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](1024)},
			check: func(t *testing.T, s settings) {
				expectEq(t, "default limit", s.DefaultMemoryLimit.String(), "1137Mi")
			},
		},
		{
			name: "no limit: a larger memory request is the limit",
			spec: cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](64), Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("300Mi")}}},
			check: func(t *testing.T, s settings) {
				expectEq(t, "default limit", s.DefaultMemoryLimit.String(), "300Mi")
			},
		},
		{
			name:    "explicit memory above the limit",
			spec:    cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](300), Resources: memoryLimit("256Mi")},
			wantErr: "exceeds the memory limit of 256 MiB",
		},
		{
			name:    "limit below the minimum",
			spec:    cachev1alpha1.MemcachedSpec{Resources: memoryLimit("20Mi")},
			wantErr: "below the minimum of 32Mi",
		},
		{
			name:    "item size above half the memory",
			spec:    cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](8), MaxItemSizeKiB: 8192},
			wantErr: "more than half of the item memory",
		},
		{
			name:    "item size above half of the derived memory",
			spec:    cachev1alpha1.MemcachedSpec{Resources: memoryLimit("40Mi"), MaxItemSizeKiB: 16 * 1024},
			wantErr: "more than half of the item memory (24 MiB)",
		},
		{name: "extraArgs -m", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-m", "10"}}, wantErr: `"-m"`},
		{name: "extraArgs -m64", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-m64"}}, wantErr: `"-m64"`},
		{name: "extraArgs --threads=8", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"--threads=8"}}, wantErr: "--threads=8"},
		{name: "extraArgs --port", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"--port", "1"}}, wantErr: "--port"},
		{name: "extraArgs -vv", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-vv"}}, wantErr: "-vv"},
		{name: "extraArgs -u root", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-u", "root"}}, wantErr: "-u"},
		{name: "extraArgs -d", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-d"}}, wantErr: "-d"},
		{
			name: "unmanaged extraArgs pass",
			spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-o", "modern", "-B", "ascii", "--lock-memory", "-M"}},
			check: func(t *testing.T, s settings) {
				if !slices.Equal(s.ExtraArgs, []string{"-o", "modern", "-B", "ascii", "--lock-memory", "-M"}) {
					t.Errorf("extraArgs = %v", s.ExtraArgs)
				}
			},
		},
		{name: "extraArgs -Mm1048576", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-Mm1048576"}}, wantErr: "set spec.memoryMiB"},
		{name: "extraArgs -Z", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-Z"}}, wantErr: "set spec.tls"},
		{name: "extraArgs -B binary with auth", spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-B", "binary"},
			Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}}, wantErr: "speaks only ascii"},
		{name: "auth with the exporter", spec: cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "users"},
			Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}, wantErr: "exporter cannot authenticate"},
		{name: "podLabels cannot take the selector", spec: cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
			PodLabels: map[string]string{"app.kubernetes.io/instance": "other"}}}, wantErr: "selects its pods by it"},
		{name: "podLabels syntax", spec: cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
			PodLabels: map[string]string{"team": "not a value"}}}, wantErr: "not a valid label value"},
		{name: "podAnnotations cannot set the hashes", spec: cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
			PodAnnotations: map[string]string{AnnotationSecretHash: "x"}}}, wantErr: "the controller sets cache.runbook.dev/"},
		{name: "extra volume over the controller's files", spec: cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
			ExtraVolumes: []cachev1alpha1.ExtraVolume{{Name: "x", MountPath: "/etc/memcached/tls", EmptyDir: &cachev1alpha1.EmptyDirVolume{}}}}},
			wantErr: "mount at /etc/memcached"},
		{name: "network policy selector", spec: cachev1alpha1.MemcachedSpec{NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true,
			Clients: []cachev1alpha1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: "Near"}}}}}}}, wantErr: "networkPolicy.clients[0] has an invalid selector"},
		{name: "network policy without clients", spec: cachev1alpha1.MemcachedSpec{NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true}},
			wantErr: "at least one entry in clients"},
		{
			name: "TLS and auth defaults",
			spec: cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert", ClientCA: &cachev1alpha1.SecretKeySelector{Name: "ca"}},
				Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}},
			check: func(t *testing.T, s settings) {
				expectEq(t, "min version", s.TLS.MinVersion, cachev1alpha1.TLSVersion12)
				expectEq(t, "client CA key", s.TLS.ClientCA.Key, "ca.crt")
				expectEq(t, "auth secret", s.Auth.SecretName, "users")
			},
		},
		{
			name: "network policy scrapers default to namespaces labelled metrics=enabled",
			spec: cachev1alpha1.MemcachedSpec{NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true,
				Clients: []cachev1alpha1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}},
			check: func(t *testing.T, s settings) {
				expectEq(t, "scrapers", len(s.NetworkPolicy.Scrapers), 1)
				expectEq(t, "scraper namespaces", s.NetworkPolicy.Scrapers[0].NamespaceSelector.MatchLabels["metrics"], "enabled")
			},
		},
		{name: "verbosity 4", spec: cachev1alpha1.MemcachedSpec{Verbosity: 4}, wantErr: "verbosity 4"},
		{name: "size 101", spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](101)}, wantErr: "size 101"},
		{
			name:  "PDB on by default above one instance",
			spec:  cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
			check: func(t *testing.T, s settings) { expectEq(t, "pdb", s.PDBEnabled, true) },
		},
		{
			name: "PDB explicitly off",
			spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3),
				PodDisruptionBudget: &cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)}},
			check: func(t *testing.T, s settings) { expectEq(t, "pdb", s.PDBEnabled, false) },
		},
		{
			name: "PDB explicitly on for one instance with a percentage",
			spec: cachev1alpha1.MemcachedSpec{PodDisruptionBudget: &cachev1alpha1.PodDisruptionBudgetSpec{
				Enabled: ptr.To(true), MaxUnavailable: ptr.To(intstr.FromString("50%"))}},
			check: func(t *testing.T, s settings) {
				expectEq(t, "pdb", s.PDBEnabled, true)
				expectEq(t, "maxUnavailable", s.PDBMaxUnavail.String(), "50%")
			},
		},
		{
			name: "exporter gets the default image",
			spec: cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}},
			check: func(t *testing.T, s settings) {
				expectEq(t, "exporter", s.Exporter, true)
				expectEq(t, "exporterImage", s.ExporterImage, cachev1alpha1.DefaultExporterImage)
			},
		},
		{
			name:  "disabled exporter adds nothing",
			spec:  cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: false, Image: "x"}},
			check: func(t *testing.T, s settings) { expectEq(t, "exporter", s.Exporter, false) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := resolveSettings(&tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			tt.check(t, s)
		})
	}
}

func equalSettings(a, b settings) bool {
	return a.Kind == b.Kind && a.Size == b.Size && a.Image == b.Image && a.MemoryMiB == b.MemoryMiB && a.MaxConnections == b.MaxConnections &&
		a.Threads == b.Threads && a.MaxItemSizeKiB == b.MaxItemSizeKiB && a.Verbosity == b.Verbosity &&
		slices.Equal(a.ExtraArgs, b.ExtraArgs) && a.PDBEnabled == b.PDBEnabled && a.PDBMaxUnavail == b.PDBMaxUnavail &&
		a.Exporter == b.Exporter && a.ExporterImage == b.ExporterImage
}

func expectEq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestMemcachedArgs(t *testing.T) {
	base := settings{MemoryMiB: 256, MaxConnections: 2048, Threads: 8, MaxItemSizeKiB: 2048}
	tests := []struct {
		name   string
		modify func(*settings)
		want   []string
	}{
		{"quiet", func(*settings) {}, []string{"-p", "11211", "-U", "0", "-m", "256", "-c", "2048", "-t", "8", "-I", "2048k"}},
		{"verbosity 1", func(s *settings) { s.Verbosity = 1 }, []string{"-p", "11211", "-U", "0", "-m", "256", "-c", "2048", "-t", "8", "-I", "2048k", "-v"}},
		{"verbosity 3", func(s *settings) { s.Verbosity = 3 }, []string{"-p", "11211", "-U", "0", "-m", "256", "-c", "2048", "-t", "8", "-I", "2048k", "-vvv"}},
		{"extra args last", func(s *settings) { s.Verbosity = 2; s.ExtraArgs = []string{"-o", "modern"} },
			[]string{"-p", "11211", "-U", "0", "-m", "256", "-c", "2048", "-t", "8", "-I", "2048k", "-vv", "-o", "modern"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.modify(&s)
			if got := memcachedArgs(s); !slices.Equal(got, tt.want) {
				t.Errorf("memcachedArgs = %v\nwant            %v", got, tt.want)
			}
		})
	}
}

func TestConfigHash(t *testing.T) {
	base, err := resolveSettings(&cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)})
	if err != nil {
		t.Fatal(err)
	}
	h := configHash(base, nil)
	if len(h) != 16 {
		t.Fatalf("hash %q is not 16 hex characters", h)
	}
	if again := configHash(base, nil); again != h {
		t.Fatalf("hash is not stable: %s then %s", h, again)
	}
	tests := []struct {
		name    string
		modify  func(*settings)
		changes bool
	}{
		{"size does not roll pods", func(s *settings) { s.Size = 7 }, false},
		{"PDB does not roll pods", func(s *settings) { s.PDBEnabled = !s.PDBEnabled }, false},
		{"memory", func(s *settings) { s.MemoryMiB++ }, true},
		{"connections", func(s *settings) { s.MaxConnections++ }, true},
		{"threads", func(s *settings) { s.Threads++ }, true},
		{"item size", func(s *settings) { s.MaxItemSizeKiB++ }, true},
		{"verbosity", func(s *settings) { s.Verbosity = 2 }, true},
		{"extra args", func(s *settings) { s.ExtraArgs = []string{"-B", "ascii"} }, true},
		{"image", func(s *settings) { s.Image = "memcached:1.6.39" }, true},
		{"exporter", func(s *settings) { s.Exporter = true; s.ExporterImage = "e" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.modify(&s)
			if got := configHash(s, nil) != h; got != tt.changes {
				t.Errorf("hash changed = %v, want %v", got, tt.changes)
			}
		})
	}
}
