package memcached

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// withExporter is a Memcached of size 1 with the exporter, and its settings.
func withExporter(t *testing.T) (*cachev1alpha1.Memcached, settings) {
	t.Helper()
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "shop", UID: "uid-1"},
		Spec: cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}}
	s, err := resolveSettings(&mc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return mc, s
}

func TestDesiredService(t *testing.T) {
	mc, s := withExporter(t)
	svc, err := convertInto(desiredService(mc, s), &corev1.Service{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Name != "memcache" || svc.Spec.Ports[0].Port != 11211 ||
		svc.Spec.Ports[1].Port != 9150 || svc.Spec.Selector[labelInstance] != "sessions" {
		t.Errorf("service = %+v", svc.Spec)
	}
}
