package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// assertNothingLabelled waits until no object of any listable kind, in any
// namespace or cluster-scoped, carries the release's instance label (the
// manager pods end after their grace period). CRDs are not the release's
// objects: Helm installs them from crds/ and never deletes them.
func assertNothingLabelled(t *testing.T, r *release) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(kc.Config)
	must(t, err)
	dyn, err := dynamic.NewForConfig(kc.Config)
	must(t, err)
	lists, err := dc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		t.Fatal(err)
	}
	var kinds []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		must(t, err)
		for _, res := range l.APIResources {
			if slices.Contains(res.Verbs, "list") && !strings.Contains(res.Name, "/") {
				kinds = append(kinds, gv.WithResource(res.Name))
			}
		}
	}
	eventually(t, 3*time.Minute, "no object labelled "+r.selector(), func() error {
		var left []string
		for _, gvr := range kinds {
			list, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{LabelSelector: r.selector()})
			if err != nil {
				return fmt.Errorf("list %s: %w", gvr, err)
			}
			for _, o := range list.Items {
				left = append(left, fmt.Sprintf("%s %s/%s", gvr.Resource, o.GetNamespace(), o.GetName()))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	t.Logf("no object of %d listable kinds carries %s", len(kinds), r.selector())
}
