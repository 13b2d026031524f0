package nsscaler

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// DefaultArgoCDNamespace is where Argo CD keeps the Applications its
// tracking names without a namespace (--nsscaler-argocd-namespace).
const DefaultArgoCDNamespace = "argocd"

// gitOpsPass is the GitOps half of a reconcile (spec.gitOps): before the
// workloads are parked, the GitOps objects that manage the parked
// namespaces are paused, so that they do not put the replicas back; after
// the workloads are restored, the objects no longer needed paused get back
// what they had. The record on each object is the only memory.
type gitOpsPass struct {
	self string
	spec *scalingv1alpha1.GitOpsSpec
	act  bool
	plan Plan
	// kinds are the kinds looked at: enabled, or possibly holding an
	// object this NSScaler paused (the status says so, or it is leaving).
	kinds []*gitOpsKind
	// claims are, per GitOps object named by a workload of a parked
	// namespace, those namespaces.
	claims map[gitOpsRef]sets.Set[string]
	// objects are the listed objects, by reference; listed the kinds
	// that could be listed.
	objects map[gitOpsRef]*unstructured.Unstructured
	listed  sets.Set[*gitOpsKind]
	obs     *gitOpsObservation
}

// newGitOpsPass prepares the GitOps pass; nil when there is nothing to do
// (no tool enabled, none paused, not leaving).
func (r *Reconciler) newGitOpsPass(scaler *scalingv1alpha1.NSScaler, obs *observation) *gitOpsPass {
	heldBefore := scaler.Status.GitOps != nil && scaler.Status.GitOps.PausedCount > 0
	p := &gitOpsPass{
		self: scaler.Name, spec: scaler.Spec.GitOps, act: obs.acts(), plan: obs.plan,
		claims: map[gitOpsRef]sets.Set[string]{}, objects: map[gitOpsRef]*unstructured.Unstructured{},
		listed: sets.New[*gitOpsKind](),
		obs:    &obs.gitOps,
	}
	for _, k := range gitOpsKinds {
		if k.enabled(p.spec) || heldBefore || obs.deleting {
			p.kinds = append(p.kinds, k)
		}
		if k.enabled(p.spec) {
			p.obs.enabled = true
		}
	}
	if len(p.kinds) == 0 {
		return nil
	}
	return p
}

// collectClaims reads, from every workload of a parked namespace, the
// GitOps objects of enabled kinds it names.
func (r *Reconciler) collectClaims(ctx context.Context, p *gitOpsPass, handlers []kindHandler) {
	if !p.act || p.plan.Parked.Len() == 0 || !p.obs.enabled {
		return
	}
	for _, h := range handlers {
		// A kind that cannot be listed is reported by the workload pass.
		_ = h.each(ctx, func(w Workload) {
			if !p.plan.Parked.Has(w.Namespace) {
				return
			}
			for _, ref := range gitOpsRefsOf(w, r.argoCDNamespace) {
				if !ref.kind.enabled(p.spec) {
					continue
				}
				if p.claims[ref] == nil {
					p.claims[ref] = sets.New[string]()
				}
				p.claims[ref].Insert(w.Namespace)
			}
		})
	}
}

// listGitOpsObjects reads the objects of the pass's kinds from the
// apiserver (they are few; a fresh read makes each write's
// resourceVersion guard meaningful). A kind whose CRD is not installed is
// reported when enabled and otherwise skipped.
func (r *Reconciler) listGitOpsObjects(ctx context.Context, p *gitOpsPass) {
	for _, k := range p.kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		err := r.apiReader.List(ctx, list)
		switch {
		case err == nil:
		case meta.IsNoMatchError(err):
			if k.enabled(p.spec) {
				p.obs.missing = append(p.obs.missing, k)
			}
			continue
		default:
			if k.enabled(p.spec) {
				p.obs.errs = append(p.obs.errs, fmt.Errorf("listing %s: %w", k.gvk.GroupKind(), err))
			}
			continue
		}
		p.listed.Insert(k)
		for i := range list.Items {
			u := &list.Items[i]
			p.objects[gitOpsRef{kind: k, key: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}] = u
		}
	}
}

// pauseGitOps pauses what the parked namespaces need paused and counts what
// the NSScaler holds; it runs before the workload pass.
func (r *Reconciler) pauseGitOps(ctx context.Context, scaler *scalingv1alpha1.NSScaler, p *gitOpsPass, handlers []kindHandler) {
	r.collectClaims(ctx, p, handlers)
	r.listGitOpsObjects(ctx, p)
	refs := sortedRefs(p.objects)
	for ref := range p.claims {
		if _, found := p.objects[ref]; !found && p.listed.Has(ref.kind) {
			p.obs.unverified++
		}
	}
	for _, ref := range refs {
		u := p.objects[ref]
		managed := p.managedNamespaces(ref, u)
		rec, recorded, recErr := recordOf(u)
		mine := recorded && recErr == nil && rec.By == p.self
		switch {
		case managed.Len() == 0:
			if mine {
				p.obs.held = append(p.obs.held, heldObject{ref: ref}) // resumed after the workloads
			}
		case recorded && !mine:
			p.obs.pausedByOthers++ // another NSScaler's, or a record it cannot read: left alone
		case mine:
			p.obs.held = append(p.obs.held, heldObject{ref: ref, namespaces: managed})
			if p.act && !ref.kind.isPaused(u) {
				// Resumed by someone while the namespace is parked: paused
				// again, the record of before the first pause kept.
				raw := u.GetAnnotations()[AnnotationGitOpsPaused]
				if r.writeGitOps(ctx, scaler, p, ref, u, gitOpsPause, &raw, nil) {
					p.obs.repaused = append(p.obs.repaused, ref)
				}
			}
		case ref.kind.isPaused(u):
			p.obs.pausedByOthers++ // suspended by someone else: never ours to resume
		case p.act:
			r.pauseOne(ctx, scaler, p, ref, u, managed)
		}
	}
}

// managedNamespaces are the parked namespaces that name the object and that
// its own spec or status shows it manages; a claim it does not back is
// counted unverified and ignored.
func (p *gitOpsPass) managedNamespaces(ref gitOpsRef, u *unstructured.Unstructured) sets.Set[string] {
	managed := sets.New[string]()
	for ns := range p.claims[ref] {
		if ref.kind.manages(u, ns) {
			managed.Insert(ns)
		}
	}
	if p.claims[ref].Len() > 0 && managed.Len() == 0 {
		p.obs.unverified++
	}
	return managed
}

// pauseOne pauses one object, recording its previous value in the same
// write.
func (r *Reconciler) pauseOne(ctx context.Context, scaler *scalingv1alpha1.NSScaler, p *gitOpsPass, ref gitOpsRef, u *unstructured.Unstructured, managed sets.Set[string]) {
	rec, err := newRecord(ref.kind, u, p.self)
	if err != nil {
		p.obs.errs = append(p.obs.errs, fmt.Errorf("%s: %w", ref, err))
		return
	}
	if r.writeGitOps(ctx, scaler, p, ref, u, gitOpsPause, &rec, nil) {
		p.obs.held = append(p.obs.held, heldObject{ref: ref, namespaces: managed})
		p.obs.paused = append(p.obs.paused, ref)
	}
}

// resumeGitOps gives every object this NSScaler holds but no parked
// namespace needs back what it had; it runs after the workload pass.
func (r *Reconciler) resumeGitOps(ctx context.Context, scaler *scalingv1alpha1.NSScaler, p *gitOpsPass) {
	kept := p.obs.held[:0]
	for _, h := range p.obs.held {
		if h.namespaces.Len() > 0 || !p.act {
			kept = append(kept, h)
			continue
		}
		u := p.objects[h.ref]
		rec, _, _ := recordOf(u)
		if !r.writeGitOps(ctx, scaler, p, h.ref, u, gitOpsResume, nil, rec.Previous) {
			kept = append(kept, h)
			continue
		}
		p.obs.resumed = append(p.obs.resumed, h.ref)
	}
	p.obs.held = kept
}

// gitOps write operations (metrics and errors).
const (
	gitOpsPause  = "pause"
	gitOpsResume = "resume"
)

// writeGitOps patches the paused field of one object — to the kind's
// paused value with record set, or to previous with the record removed —
// guarded by the resourceVersion it was read at: a concurrent change makes
// it fail (409) and the next reconcile decide again on fresh data.
func (r *Reconciler) writeGitOps(ctx context.Context, scaler *scalingv1alpha1.NSScaler, p *gitOpsPass, ref gitOpsRef, u *unstructured.Unstructured, op string, record *string, previous json.RawMessage) bool {
	value := previous
	if op == gitOpsPause {
		v, err := json.Marshal(ref.kind.paused)
		if err != nil {
			p.obs.errs = append(p.obs.errs, err)
			return false
		}
		value = v
	}
	body, err := fieldPatch(ref.kind.field, value, u.GetResourceVersion(), record)
	if err == nil {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(ref.kind.gvk)
		obj.SetNamespace(ref.key.Namespace)
		obj.SetName(ref.key.Name)
		err = r.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager))
	}
	r.metrics.gitOpsWrite(scaler.Name, ref.kind.kind, op, err)
	if err != nil {
		p.obs.errs = append(p.obs.errs, fmt.Errorf("%s %s: %w", op, ref, err))
		return false
	}
	log.FromContext(ctx).Info("gitops object "+op+"d", "kind", ref.kind.kind, "object", ref.key)
	return true
}

func (r gitOpsRef) String() string { return r.kind.kind + " " + r.key.String() }

// sortedRefs are the keys of objects in a stable order (kind, namespace,
// name), so that writes, status and events do not shuffle.
func sortedRefs(objects map[gitOpsRef]*unstructured.Unstructured) []gitOpsRef {
	refs := make([]gitOpsRef, 0, len(objects))
	for ref := range objects {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, compareRefs)
	return refs
}

func compareRefs(a, b gitOpsRef) int {
	if c := slices.Index(gitOpsKinds, a.kind) - slices.Index(gitOpsKinds, b.kind); c != 0 {
		return c
	}
	if a.key.Namespace != b.key.Namespace {
		return cmp.Compare(a.key.Namespace, b.key.Namespace)
	}
	return cmp.Compare(a.key.Name, b.key.Name)
}
