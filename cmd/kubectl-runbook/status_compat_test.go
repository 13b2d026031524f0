package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/reloadercompat"
)

func TestReloaderCompatPolicyIsListedAsItsWorkload(t *testing.T) {
	p := &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "reloader-deploy-web",
			Labels:      map[string]string{reloadercompat.Label: "true"},
			Annotations: map[string]string{reloadercompat.WorkloadAnnotation: "Deployment/web"}},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target: autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			Policies: []autorebootv1alpha1.Policy{{Name: "reloader", Trigger: autorebootv1alpha1.Trigger{Referenced: &autorebootv1alpha1.ReferencedTrigger{
				Objects: []autorebootv1alpha1.ReferencedObject{{Kind: autorebootv1alpha1.WatchConfigMap, Name: "a"}, {Kind: autorebootv1alpha1.WatchSecret, Name: "b"}}}}}},
		},
	}
	r := reloaderCompatRow(p, Row{Kind: "RebootPolicy", Namespace: "shop", Name: p.Name, State: StateHealthy, Details: "Deployment web; reloader: Success; 0 restarts"})
	if r.Kind != KindReloaderCompat || r.Name != "deployment/web" || r.State != StateHealthy {
		t.Fatalf("row = %+v", r)
	}
	if !strings.HasPrefix(r.Details, "RebootPolicy reloader-deploy-web, 2 objects tracked: ") {
		t.Fatalf("details = %q", r.Details)
	}
	plain := Row{Kind: "RebootPolicy", Name: "mine"}
	p.Labels = nil
	if got := reloaderCompatRow(p, plain); got != plain {
		t.Fatalf("a RebootPolicy of a user became %+v", got)
	}
}
