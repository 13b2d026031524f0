package probe

import (
	"context"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// typeReferenced is the metric label of referenced triggers.
const TypeReferenced = "referenced"

// ReferencedSettings are the admin's choices for referenced triggers.
type ReferencedSettings struct {
	// SecretsWithoutLabel lets referenced triggers track Secrets that lack
	// the usable label. Off by default: whoever may create a RebootPolicy
	// may not be whoever may read the namespace's Secrets (or run pods that
	// mount them), and would learn when an unlabelled Secret changes.
	SecretsWithoutLabel bool
	// WatchSecrets watches Secret metadata instead of polling each
	// referenced Secret with a GET every period (needs list and watch on
	// secrets, which the default RBAC does not grant).
	WatchSecrets bool
	// MaxTargets is the most workloads one referenced trigger tracks
	// (default 256).
	MaxTargets int
	// MaxPerTarget is the most objects one workload may reference
	// (default 32).
	MaxPerTarget int
	// MaxPerPolicy is the most distinct objects one trigger tracks over
	// all its targets (default 128).
	MaxPerPolicy int
}

func (s ReferencedSettings) withDefaults() ReferencedSettings {
	if s.MaxTargets <= 0 {
		s.MaxTargets = 256
	}
	if s.MaxPerTarget <= 0 {
		s.MaxPerTarget = 32
	}
	if s.MaxPerPolicy <= 0 {
		s.MaxPerPolicy = 128
	}
	return s
}

// referencedProber observes the references of a policy's targets. It reads
// the targets from the manager's cache, the watched objects' versions from
// the refWatcher, and an object's data (one GET) only when its version
// changed. Unwatched objects (Secrets, unless watched) are polled: a GET of
// their metadata every period, of their data when the version changed.
type referencedProber struct {
	targets   client.Reader
	workloads Workloads
	watcher   *RefWatcher
	reader    *refReader
	keys      *fingerprint.Source
	clock     clock.Clock
	settings  ReferencedSettings
	policy    types.NamespacedName
	target    autorebootv1alpha1.TargetRef
	spec      autorebootv1alpha1.ReferencedTrigger
	period    time.Duration

	wakeC chan struct{}
	// interest is what the watcher wakes it for (guarded by watcher.mu).
	interest map[refKey]struct{}
	// objects: what is known of each referenced object; polled: when an
	// unwatched object was last read. Used by the worker goroutine only.
	objects map[refKey]objectState
	polled  map[refKey]time.Time
	// templates caches each target's references by UID and template
	// version.
	templates map[types.UID]templateRefs
	// seen is each target's fingerprint as last observed: the base from
	// which the next observation names what changed.
	seen map[string]string
}

type templateRefs struct {
	version string
	refs    []reference
}

func newReferencedProber(f *Probers, s Spec) *referencedProber {
	p := &referencedProber{
		targets: f.targets, workloads: f.workloads, watcher: f.watcher, reader: f.refReader, keys: f.keys, clock: f.clock,
		settings: f.settings.Referenced.withDefaults(), policy: s.Policy, target: s.Target,
		spec: *s.Trigger.Referenced, period: Seconds(s.Trigger.Referenced.PeriodSeconds, 10),
		wakeC: make(chan struct{}, 1), objects: map[refKey]objectState{}, polled: map[refKey]time.Time{},
		templates: map[types.UID]templateRefs{}, seen: map[string]string{},
	}
	p.watcher.register(p)
	return p
}

func (p *referencedProber) Kind() string { return TypeReferenced }
func (p *referencedProber) Close()       { p.watcher.drop(p) }

// wake asks for an observation now; a wake-up already waiting is enough.
func (p *referencedProber) wake() {
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

func (p *referencedProber) Wakeups() <-chan struct{} { return p.wakeC }

// Probe is the periodic observation: unwatched objects are polled.
func (p *referencedProber) Probe(ctx context.Context) Observation { return p.observe(ctx, true) }

// ProbeWoken observes after a wake-up: only what changed is read.
func (p *referencedProber) ProbeWoken(ctx context.Context) Observation { return p.observe(ctx, false) }

// targetRefs is one target with the references that count.
type targetRefs struct {
	name string
	refs []reference
}

func (p *referencedProber) observe(ctx context.Context, poll bool) Observation {
	key, err := p.keys.Key(ctx)
	if err != nil {
		return keyUnavailable()
	}
	targets, o := p.resolve(ctx)
	if o != nil {
		return *o
	}
	used := map[refKey][]reference{}
	for _, t := range targets {
		for _, r := range t.refs {
			k := refKey{kind: r.kind, namespace: p.policy.Namespace, name: r.name}
			used[k] = append(used[k], r)
		}
	}
	if len(used) > p.settings.MaxPerPolicy {
		return tooManyReferences(fmt.Sprintf("the targets reference %d objects, more than the manager's maximum of %d per policy (--referenced-max-objects-per-policy)",
			len(used), p.settings.MaxPerPolicy))
	}
	interest := make(map[refKey]struct{}, len(used))
	for k := range used {
		interest[k] = struct{}{}
	}
	p.watcher.setInterest(p, interest)
	before := p.objects
	if o := p.readObjects(ctx, key, used, poll); o != nil {
		return *o
	}
	return p.result(key, targets, before)
}

// resolve lists the targets and their (filtered) references, bounded by
// the admin's limits.
func (p *referencedProber) resolve(ctx context.Context) ([]targetRefs, *Observation) {
	objs, err := p.listTargets(ctx)
	if err != nil {
		return nil, &Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonProbeError,
			Message: fmt.Sprintf("reading the targets failed (%s)", status.APIErrorReason(err))}
	}
	if len(objs) > p.settings.MaxTargets {
		o := tooManyReferences(fmt.Sprintf("%d targets match, more than the manager's maximum of %d per referenced trigger (--referenced-max-targets)",
			len(objs), p.settings.MaxTargets))
		return nil, &o
	}
	seen := make(map[types.UID]templateRefs, len(objs))
	out := make([]targetRefs, 0, len(objs))
	for _, obj := range objs {
		tr, ok := p.templates[obj.GetUID()]
		if version := p.workloads.TemplateVersion(obj); !ok || tr.version != version {
			tr = templateRefs{version: version, refs: p.referencesOf(obj)}
		}
		seen[obj.GetUID()] = tr
		if len(tr.refs) > p.settings.MaxPerTarget {
			o := tooManyReferences(fmt.Sprintf("%s %s references %d objects, more than the manager's maximum of %d (--referenced-max-objects-per-target)",
				p.target.Kind, obj.GetName(), len(tr.refs), p.settings.MaxPerTarget))
			return nil, &o
		}
		out = append(out, targetRefs{name: obj.GetName(), refs: tr.refs})
	}
	p.templates = seen
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// referencesOf is what the trigger tracks for one target: the objects the
// spec lists, else the template's references filtered by kinds and exclude.
func (p *referencedProber) referencesOf(obj client.Object) []reference {
	if len(p.spec.Objects) > 0 {
		return listedReferences(p.spec.Objects)
	}
	return filterReferences(templateReferences(p.workloads.PodSpec(obj)), p.spec)
}

func tooManyReferences(msg string) Observation {
	return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonTooManyReferences, Message: msg}
}

// listTargets reads the target workloads from the manager's cache,
// without copying them (they are only read).
func (p *referencedProber) listTargets(ctx context.Context) ([]client.Object, error) {
	if p.target.Name != "" {
		obj := p.workloads.NewObject(p.target.Kind)
		if obj == nil {
			return nil, fmt.Errorf("unsupported target kind %q", p.target.Kind)
		}
		err := p.targets.Get(ctx, types.NamespacedName{Namespace: p.policy.Namespace, Name: p.target.Name}, obj,
			&client.GetOptions{UnsafeDisableDeepCopy: ptr.To(true)})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []client.Object{obj}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.target.Selector.LabelSelector())
	if err != nil {
		return nil, err
	}
	list := p.workloads.NewList(p.target.Kind)
	if list == nil {
		return nil, fmt.Errorf("unsupported target kind %q", p.target.Kind)
	}
	if err := p.targets.List(ctx, list, client.InNamespace(p.policy.Namespace), client.MatchingLabelsSelector{Selector: sel},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []client.Object
	err = meta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, o.(client.Object))
		return nil
	})
	return out, err
}
