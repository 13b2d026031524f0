package reloadercompat

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/probe"
)

// FieldManager is the compat mode's field manager for RebootPolicies.
const FieldManager = "runbook-reloadercompat"

// Event reasons on the workload.
const (
	EventHandled     = "ReloaderCompat"
	EventRefused     = "ReloaderCompatRefused"
	EventUnsupported = "ReloaderAnnotationUnsupported"
)

// secretRecheck: Secrets' annotations are not watched, so a workload that
// considers Secrets is resolved again this often.
const secretRecheck = 5 * time.Minute

// Admission counts a namespace's compat RebootPolicies on the API server
// and holds the others' creates meanwhile.
type Admission struct {
	mu     sync.Mutex
	Reader client.Reader
}

// Reconciler keeps the compat RebootPolicy of each annotated workload of
// one kind in line with its annotations.
type Reconciler struct {
	Client   client.Client
	Kind     autorebootv1alpha1.TargetKind
	Resolver resolver
	Settings settings
	// MaxPerNamespace bounds the compat RebootPolicies of a namespace.
	MaxPerNamespace int
	// Admission makes the count and the create one step, shared by the
	// reconcilers of every kind (nil: counted from Client).
	Admission *Admission
	Events    status.Events
	Metrics   *Metrics
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := newWorkload(r.Kind)
	err := r.Client.Get(ctx, req.NamespacedName, w)
	if apierrors.IsNotFound(err) {
		r.Metrics.forget(r.Kind, req.NamespacedName)
		return ctrl.Result{}, r.ensureAbsent(ctx, req.Namespace, policyName(r.Kind, req.Name))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	name := policyName(r.Kind, w.GetName())
	rules := readRules(w.GetAnnotations(), templateOf(w).Annotations)
	if !rules.any() {
		r.Metrics.forget(r.Kind, req.NamespacedName)
		return ctrl.Result{}, r.ensureAbsent(ctx, w.GetNamespace(), name)
	}
	res, err := r.Resolver.resolve(ctx, w.GetNamespace(), rules, probe.TemplateObjects(&templateOf(w).Spec))
	if err != nil {
		return ctrl.Result{}, err
	}
	var result ctrl.Result
	if res.secrets {
		result.RequeueAfter = secretRecheck
	}
	if len(res.objects) == 0 {
		r.Metrics.set(r.Kind, req.NamespacedName, stateIdle)
		return result, r.ensureAbsent(ctx, w.GetNamespace(), name)
	}
	changed, err := r.ensure(ctx, w, name, res)
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed != nil && changed.refused {
		r.Metrics.set(r.Kind, req.NamespacedName, stateRefused)
		result.RequeueAfter = secretRecheck
		return result, nil
	}
	r.Metrics.set(r.Kind, req.NamespacedName, stateTracked)
	return result, nil
}

// outcome of ensure when it acted.
type outcome struct{ refused bool }

// ensure creates or updates the workload's RebootPolicy; nil when it was
// already as wanted (nothing written).
func (r *Reconciler) ensure(ctx context.Context, w client.Object, name string, res resolution) (*outcome, error) {
	want := desiredSpec(r.Kind, w.GetName(), res.objects, r.Settings)
	have := &autorebootv1alpha1.RebootPolicy{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.GetNamespace(), Name: name}, have)
	switch {
	case apierrors.IsNotFound(err):
		return r.create(ctx, w, name, want, res)
	case err != nil:
		return nil, err
	}
	if !ours(have, w) {
		// A RebootPolicy of that name that the compat mode did not make
		// (or made for an earlier workload of that name) is left alone.
		r.Events.Warning(w, nil, EventRefused, "Track",
			"RebootPolicy %s exists and is not this workload's compat policy; Reloader annotations are not honoured", name)
		return &outcome{refused: true}, nil
	}
	if specMatches(have.Spec, want) && have.Labels[Label] == "true" {
		return nil, nil
	}
	have.Spec = want
	if have.Labels == nil {
		have.Labels = map[string]string{}
	}
	have.Labels[Label] = "true"
	if err := r.Client.Update(ctx, have, client.FieldOwner(FieldManager)); err != nil {
		return nil, fmt.Errorf("updating RebootPolicy %s/%s: %w", have.Namespace, name, err)
	}
	r.announce(w, name, res)
	return &outcome{}, nil
}

func (r *Reconciler) create(ctx context.Context, w client.Object, name string, want autorebootv1alpha1.RebootPolicySpec, res resolution) (*outcome, error) {
	if r.MaxPerNamespace > 0 {
		reader := client.Reader(r.Client)
		if r.Admission != nil {
			// The cache lags the creates just made: count on the API
			// server, one create at a time, or a burst passes the cap.
			r.Admission.mu.Lock()
			defer r.Admission.mu.Unlock()
			reader = r.Admission.Reader
		}
		n, err := r.policiesIn(ctx, reader, w.GetNamespace())
		if err != nil {
			return nil, err
		}
		if n >= r.MaxPerNamespace {
			r.Events.Warning(w, nil, EventRefused, "Track",
				"the namespace already has %d Reloader-compat workloads, the manager's maximum (--reloader-compat-max-per-namespace)", n)
			return &outcome{refused: true}, nil
		}
	}
	p := &autorebootv1alpha1.RebootPolicy{}
	p.Namespace, p.Name = w.GetNamespace(), name
	p.Labels = map[string]string{Label: "true"}
	p.Annotations = map[string]string{WorkloadAnnotation: string(r.Kind) + "/" + w.GetName()}
	p.OwnerReferences = append(p.OwnerReferences, ownedBy(w, r.Kind))
	p.Spec = want
	if err := r.Client.Create(ctx, p, client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("RebootPolicy %s/%s appeared meanwhile, reconciling again: %w", p.Namespace, name, err)
		}
		return nil, fmt.Errorf("creating RebootPolicy %s/%s: %w", p.Namespace, name, err)
	}
	log.FromContext(ctx).V(1).Info("compat RebootPolicy created", "policy", name, "objects", len(res.objects))
	r.announce(w, name, res)
	return &outcome{}, nil
}

// announce tells the workload's owners what is tracked, and what of the
// annotations is not honoured.
func (r *Reconciler) announce(w client.Object, name string, res resolution) {
	r.Events.Normal(w, nil, EventHandled, "Track", "restarted by RebootPolicy %s when %s changes", name, describe(res.objects))
	if len(res.unsupported) > 0 {
		r.Events.Warning(w, nil, EventUnsupported, "Track",
			"secret reload list entries that are not Secret names are not honoured (%d, e.g. %.64q): list the Secrets by name", len(res.unsupported), res.unsupported[0])
	}
	if res.truncated > 0 {
		r.Events.Warning(w, nil, EventUnsupported, "Track",
			"%d more objects match than a RebootPolicy may track (%d); they are not tracked", res.truncated, maxObjects)
	}
}

func describe(objs []autorebootv1alpha1.ReferencedObject) string {
	const shown = 5
	parts := make([]string, 0, shown)
	for i, o := range objs {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more", len(objs)-shown))
			break
		}
		parts = append(parts, string(o.Kind)+" "+o.Name)
	}
	return strings.Join(parts, ", ")
}

// ours: the RebootPolicy was made by the compat mode for this workload.
func ours(p *autorebootv1alpha1.RebootPolicy, w client.Object) bool {
	for _, o := range p.OwnerReferences {
		if o.UID == w.GetUID() && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// ensureAbsent deletes the compat RebootPolicy of that name, if the
// compat mode made it.
func (r *Reconciler) ensureAbsent(ctx context.Context, namespace, name string) error {
	p := &autorebootv1alpha1.RebootPolicy{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.Labels[Label] != "true" || !ownedByKind(p, r.Kind) {
		return nil
	}
	if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting RebootPolicy %s/%s: %w", namespace, name, err)
	}
	return nil
}

func ownedByKind(p *autorebootv1alpha1.RebootPolicy, kind autorebootv1alpha1.TargetKind) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == string(kind) && o.APIVersion == "apps/v1" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// policiesIn counts the compat RebootPolicies of a namespace.
func (r *Reconciler) policiesIn(ctx context.Context, reader client.Reader, namespace string) (int, error) {
	list := &autorebootv1alpha1.RebootPolicyList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{Label: "true"}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}
