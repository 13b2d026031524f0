package rebootpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/probe/probetest"
)

// A tenant's selector over many paused Deployments: one fire announces two
// RestartSkipped events per target (on the policy and on the target), each
// an apiserver write. The pass's batch records MaxEventsPerReason of them
// and one more that counts the rest; nothing is patched.
func TestOneFireOverManyPausedTargetsRecordsBoundedEvents(t *testing.T) {
	const targets = 40
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := probePolicy()
	rbp.Spec.MinRestartInterval = &metav1.Duration{}
	rbp.Spec.Target = autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "web"}}}
	objs := []client.Object{rbp}
	for i := range targets {
		d := rolledOutDeployment(govStart.Add(-time.Hour))
		d.Name = fmt.Sprintf("web-%02d", i)
		d.Labels = map[string]string{"tier": "web"}
		d.Spec.Paused = true
		objs = append(objs, d)
	}
	fx := newReconcileFixture(t, f, objs...)
	fx.reconcile(t)
	drainEvents(fx)
	fx.seen = nil

	cur := fx.rbp(t)
	cur.Annotations = map[string]string{autorebootv1alpha1.RestartRequestAnnotation: "n-1"}
	if err := fx.c.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	fx.reconcile(t)
	if n := countEvents(fx, autorebootv1alpha1.EventRestartSkipped); n != status.MaxEventsPerReason+1 {
		t.Fatalf("%d RestartSkipped events for %d paused targets, want %d: %q", n, targets, status.MaxEventsPerReason+1, fx.seen)
	}
	counted := fmt.Sprintf("and %d more %s events", 2*targets-status.MaxEventsPerReason-1, autorebootv1alpha1.EventRestartSkipped)
	found := false
	for _, e := range fx.seen {
		found = found || strings.Contains(e, counted)
	}
	if !found {
		t.Fatalf("no event says %q: %q", counted, fx.seen)
	}
	for i := range targets {
		var d appsv1.Deployment
		if err := fx.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("web-%02d", i)}, &d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] != "" {
			t.Fatalf("paused %s was patched", d.Name)
		}
	}
}
