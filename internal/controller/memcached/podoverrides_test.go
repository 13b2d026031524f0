package memcached

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func containerNamed(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s in %+v", name, pod.Containers)
	return corev1.Container{}
}

func TestPodOverridesAreRendered(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{PodOverrides: cachev1alpha1.PodOverrides{
		ImagePullSecrets:              []cachev1alpha1.LocalSecretReference{{Name: "registry"}},
		PodLabels:                     map[string]string{"team": "shop"},
		PodAnnotations:                map[string]string{"example.com/owner": "shop"},
		ServiceAccountName:            "cache",
		TerminationGracePeriodSeconds: ptr.To[int64](60),
		PreStopDelaySeconds:           15,
		ExtraEnv:                      []cachev1alpha1.EnvVar{{Name: "TZ", Value: "UTC"}, {Name: "EMPTY"}},
		ExtraVolumes: []cachev1alpha1.ExtraVolume{
			{Name: "extstore", MountPath: "/data", EmptyDir: &cachev1alpha1.EmptyDirVolume{SizeLimit: ptr.To(resource.MustParse("2Gi"))}},
			{Name: "disk", MountPath: "/disk", Ephemeral: &cachev1alpha1.EphemeralVolume{StorageClassName: ptr.To("fast"), Size: resource.MustParse("10Gi")}},
		},
	}})
	tpl := d.Spec.Template
	if tpl.Labels["team"] != "shop" || tpl.Labels[labelInstance] != "sessions" || d.Spec.Selector.MatchLabels["team"] != "" {
		t.Errorf("template labels %v, selector %v: podLabels belong on the pods only", tpl.Labels, d.Spec.Selector.MatchLabels)
	}
	if tpl.Annotations["example.com/owner"] != "shop" || tpl.Annotations[AnnotationConfigHash] == "" {
		t.Errorf("template annotations = %v", tpl.Annotations)
	}
	pod := tpl.Spec
	if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "registry" || pod.ServiceAccountName != "cache" ||
		*pod.TerminationGracePeriodSeconds != 60 {
		t.Errorf("pod = pull %v, sa %q, grace %v", pod.ImagePullSecrets, pod.ServiceAccountName, pod.TerminationGracePeriodSeconds)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("a service account must not bring its token")
	}
	if pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != memcacheUID {
		t.Errorf("fsGroup = %v, want %d with volumes", pod.SecurityContext.FSGroup, memcacheUID)
	}
	if len(pod.Volumes) != 2 || pod.Volumes[0].EmptyDir.SizeLimit.String() != "2Gi" {
		t.Fatalf("volumes = %+v", pod.Volumes)
	}
	claim := pod.Volumes[1].Ephemeral.VolumeClaimTemplate.Spec
	if *claim.StorageClassName != "fast" || claim.Resources.Requests.Storage().String() != "10Gi" || claim.DataSource != nil || claim.DataSourceRef != nil {
		t.Errorf("ephemeral claim = %+v", claim)
	}
	c := containerNamed(t, pod, containerMemcached)
	if len(c.Env) != 2 || c.Env[0] != (corev1.EnvVar{Name: "TZ", Value: "UTC"}) || c.Env[1] != (corev1.EnvVar{Name: "EMPTY"}) {
		t.Errorf("env = %+v", c.Env)
	}
	if len(c.VolumeMounts) != 2 || c.VolumeMounts[0].MountPath != "/data" || c.VolumeMounts[1].MountPath != "/disk" {
		t.Errorf("mounts = %+v", c.VolumeMounts)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 15 {
		t.Errorf("preStop = %+v, want a 15 s sleep", c.Lifecycle)
	}
}

func TestNoOverridesChangeNothing(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{Resources: memoryLimit("256Mi")})
	pod := d.Spec.Template.Spec
	if pod.SecurityContext.FSGroup != nil || len(pod.Volumes) != 0 || pod.ServiceAccountName != "" || pod.TerminationGracePeriodSeconds != nil {
		t.Errorf("pod without overrides = %+v", pod)
	}
	c := pod.Containers[0]
	if c.Lifecycle != nil || len(c.Env) != 0 || len(c.VolumeMounts) != 0 {
		t.Errorf("container without overrides = %+v", c)
	}
	if got := c.Resources.Limits.Memory().String(); got != "256Mi" {
		t.Errorf("memory limit %s, want the spec's 256Mi", got)
	}
}

func TestDefaultMemoryLimitIsSet(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{MemoryMiB: ptr.To[int32](128),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}})
	c := d.Spec.Template.Spec.Containers[0]
	if got := c.Resources.Limits.Memory().String(); got != "144Mi" {
		t.Errorf("memory limit %s, want 144Mi (128 MiB and 16 MiB headroom)", got)
	}
	if got := c.Resources.Requests.Cpu().String(); got != "100m" {
		t.Errorf("cpu request %s: the spec's requests stay", got)
	}
}

func TestTLSAndAuthAreMountedAndPassed(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{
		TLS: &cachev1alpha1.TLSSpec{SecretName: "cert", MinVersion: cachev1alpha1.TLSVersion13,
			ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cert", Key: "ca.crt"}},
		Auth: &cachev1alpha1.AuthSpec{SecretName: "users"},
	})
	pod := d.Spec.Template.Spec
	c := containerNamed(t, pod, containerMemcached)
	args := strings.Join(c.Args, " ")
	want := "-Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_min_version=3," +
		"ssl_ca_cert=/etc/memcached/tls/client-ca.crt,ssl_verify_mode=2 -Y /etc/memcached/auth/authfile"
	if !strings.HasSuffix(args, want) {
		t.Errorf("args %q\nwant them to end with %q", args, want)
	}
	if len(pod.Volumes) != 2 {
		t.Fatalf("volumes = %+v", pod.Volumes)
	}
	tls := pod.Volumes[0].Projected
	if tls == nil || *tls.DefaultMode != 0o440 || len(tls.Sources) != 1 {
		t.Fatalf("tls volume = %+v (one projection: the CA is in the same Secret)", pod.Volumes[0])
	}
	items := tls.Sources[0].Secret.Items
	if tls.Sources[0].Secret.Name != "cert" || len(items) != 3 || items[2].Key != "ca.crt" || items[2].Path != clientCAFile {
		t.Errorf("tls projection = %+v", tls.Sources[0].Secret)
	}
	auth := pod.Volumes[1].Secret
	if auth == nil || auth.SecretName != "users" || *auth.DefaultMode != 0o440 || len(auth.Items) != 1 || auth.Items[0].Key != "authfile" {
		t.Errorf("auth volume = %+v", pod.Volumes[1])
	}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Name)
		}
	}
	if len(c.VolumeMounts) != 2 || *pod.SecurityContext.FSGroup != memcacheUID {
		t.Errorf("mounts %+v, fsGroup %v", c.VolumeMounts, pod.SecurityContext.FSGroup)
	}
}

func TestClientCAFromAnotherSecretIsASecondProjection(t *testing.T) {
	_, d := buildDeployment(t, cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert",
		ClientCA: &cachev1alpha1.SecretKeySelector{Name: "clients", Key: "bundle.pem"}}})
	sources := d.Spec.Template.Spec.Volumes[0].Projected.Sources
	if len(sources) != 2 || sources[1].Secret.Name != "clients" || sources[1].Secret.Items[0].Key != "bundle.pem" || sources[1].Secret.Items[0].Path != clientCAFile {
		t.Errorf("sources = %+v", sources)
	}
}

func TestExporterScrapesOverTLS(t *testing.T) {
	for _, mutual := range []bool{false, true} {
		spec := cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}, TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}}
		if mutual {
			spec.TLS.ClientCA = &cachev1alpha1.SecretKeySelector{Name: "cert"}
		}
		_, d := buildDeployment(t, spec)
		e := containerNamed(t, d.Spec.Template.Spec, containerExporter)
		if !slices.Contains(e.Args, "--memcached.tls.enable") || !slices.Contains(e.Args, "--memcached.tls.insecure-skip-verify") {
			t.Errorf("mutual=%v: exporter args %v", mutual, e.Args)
		}
		hasCert := slices.Contains(e.Args, "--memcached.tls.cert-file=/etc/memcached/tls/tls.crt")
		if hasCert != mutual || (len(e.VolumeMounts) == 1) != mutual {
			t.Errorf("mutual=%v: client certificate %v, mounts %+v", mutual, hasCert, e.VolumeMounts)
		}
	}
}

func TestSecretHashAnnotation(t *testing.T) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "shop"},
		Spec: cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}}}
	s, err := resolveSettings(&mc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	before := podAnnotations(mc, s)
	if _, ok := before[AnnotationSecretHash]; ok {
		t.Fatal("no hash before the Secrets were read")
	}
	s.SecretHash = "h1.abcd.0123"
	after := podAnnotations(mc, s)
	if after[AnnotationSecretHash] != "h1.abcd.0123" || after[AnnotationConfigHash] != before[AnnotationConfigHash] {
		t.Errorf("annotations %v: the Secrets' fingerprint has its own annotation, the config hash stays", after)
	}
}

func TestDesiredStatefulSet(t *testing.T) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "shop", UID: "uid-1"},
		Spec: cachev1alpha1.MemcachedSpec{WorkloadKind: cachev1alpha1.WorkloadStatefulSet, Size: ptr.To[int32](3), MinReadySeconds: 5}}
	s, err := resolveSettings(&mc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := desiredStatefulSet(mc, s)
	if err != nil {
		t.Fatal(err)
	}
	sts, err := convertInto(ac, &appsv1.StatefulSet{})
	if err != nil {
		t.Fatal(err)
	}
	spec := sts.Spec
	if *spec.Replicas != 3 || spec.ServiceName != "sessions" || spec.PodManagementPolicy != appsv1.ParallelPodManagement ||
		spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || spec.MinReadySeconds != 5 {
		t.Errorf("statefulset spec = %+v", spec)
	}
	if spec.Selector.MatchLabels[labelInstance] != "sessions" || spec.Template.Annotations[AnnotationConfigHash] == "" ||
		len(spec.VolumeClaimTemplates) != 0 || !metav1.IsControlledBy(sts, mc) {
		t.Errorf("statefulset = %+v", sts)
	}
}

func TestDesiredNetworkPolicy(t *testing.T) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "shop", UID: "uid-1"},
		Spec: cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true},
			NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true, Clients: []cachev1alpha1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}, PodSelector: &metav1.LabelSelector{}},
			}}}}
	s, err := resolveSettings(&mc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := desiredNetworkPolicy(mc, s)
	if err != nil {
		t.Fatal(err)
	}
	np, err := convertInto(ac, &networkingv1.NetworkPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(np.Spec)
	want := `{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"sessions","app.kubernetes.io/managed-by":"runbook","app.kubernetes.io/name":"memcached"}},` +
		`"ingress":[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"podSelector":{"matchLabels":{"app":"shop"}}},` +
		`{"podSelector":{},"namespaceSelector":{"matchLabels":{"team":"shop"}}}]},` +
		`{"ports":[{"protocol":"TCP","port":9150}],"from":[{"namespaceSelector":{"matchLabels":{"metrics":"enabled"}}}]}],"policyTypes":["Ingress"]}`
	if string(got) != want {
		t.Errorf("network policy spec\n  %s\nwant\n  %s", got, want)
	}
	if !metav1.IsControlledBy(np, mc) {
		t.Error("not owned")
	}
}

// The variables that change memcached's configuration behind the spec are
// refused in any case; others pass.
func TestReservedEnv(t *testing.T) {
	for name, reserved := range map[string]bool{
		"OPENSSL_CONF": true, "openssl_conf": true, "LD_PRELOAD": true, "POSIXLY_CORRECT": true, "posixly_correct": true,
		"MEMCACHED_PORT_FILENAME": true, "T_MEMD_INITIAL_MALLOC": true, "SASL_CONF_PATH": true, "SSL_CERT_FILE": true,
		"TZ": false, "MALLOC_ARENA_MAX": false, "LANG": false, "MY_LD_PATH": false,
	} {
		err := checkPodOverrides(&cachev1alpha1.PodOverrides{ExtraEnv: []cachev1alpha1.EnvVar{{Name: name, Value: "x"}}})
		if (err != nil) != reserved {
			t.Errorf("%s: err = %v, want reserved %v", name, err, reserved)
		}
	}
}
