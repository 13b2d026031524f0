package benchkit

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Observer is a watch-backed cache of a few kinds in the benchmark
// process: it waits for conditions by re-evaluating them on every event,
// instead of sleeping or polling the apiserver with lists.
type Observer struct {
	cache  cache.Cache
	notify chan struct{}
	stop   context.CancelFunc
	done   chan struct{}
}

// Observe starts watching the kinds of objs (in namespace, or everywhere
// when empty) and returns once the cache is synced. Stop ends the watches.
func Observe(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string, objs ...client.Object) (*Observer, error) {
	opts := cache.Options{Scheme: scheme}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return ObserveWith(ctx, cfg, opts, objs...)
}

// ObserveWith is Observe with the cache built from opts (a transform, a
// protobuf config: to be the same watcher as a controller's).
func ObserveWith(ctx context.Context, cfg *rest.Config, opts cache.Options, objs ...client.Object) (*Observer, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	o := &Observer{cache: c, notify: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
	poke := func() {
		select {
		case o.notify <- struct{}{}:
		default:
		}
	}
	for _, obj := range objs {
		inf, err := c.GetInformer(cctx, obj)
		if err != nil {
			cancel()
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			UpdateFunc: func(any, any) { poke() },
			DeleteFunc: func(any) { poke() },
		}); err != nil {
			cancel()
			return nil, err
		}
	}
	go func() { defer close(o.done); _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(cctx) {
		o.Stop()
		return nil, fmt.Errorf("the benchmark's watch cache did not sync")
	}
	return o, nil
}

// Reader reads from the cache (lists should pass
// client.UnsafeDisableDeepCopy and not modify what they get).
func (o *Observer) Reader() client.Reader { return o.cache }

// OnUpdate calls f (on the informer's goroutine) for every update of an
// object of obj's kind, with the old and the new object.
func (o *Observer) OnUpdate(ctx context.Context, obj client.Object, f func(oldObj, newObj any)) error {
	inf, err := o.cache.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: f})
	return err
}

// OnAddOrUpdate calls f (on the informer's goroutine) with every object of
// obj's kind as it is added or updated, and when the call was made.
func (o *Observer) OnAddOrUpdate(ctx context.Context, obj client.Object, f func(newObj any, at time.Time)) error {
	inf, err := o.cache.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(newObj any) { f(newObj, time.Now()) },
		UpdateFunc: func(_, newObj any) { f(newObj, time.Now()) },
	})
	return err
}

// Until evaluates cond now and after every event until it reports done.
// It fails when cond errs, when the progress cond reports has not changed
// for stall, or after limit in all. It returns the last progress.
func (o *Observer) Until(ctx context.Context, stall, limit time.Duration, cond func() (done bool, progress string, err error)) (string, error) {
	start := time.Now()
	lastChange, last := start, ""
	// The ticker only checks the deadlines; the cache is read on events.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		done, progress, err := cond()
		if err != nil || done {
			return progress, err
		}
		if progress != last {
			last, lastChange = progress, time.Now()
		}
		switch {
		case time.Since(lastChange) > stall:
			return progress, fmt.Errorf("no progress for %s (after %s): %s", stall, time.Since(start).Round(time.Second), progress)
		case time.Since(start) > limit:
			return progress, fmt.Errorf("not done after %s: %s", limit, progress)
		}
		select {
		case <-ctx.Done():
			return progress, ctx.Err()
		case <-o.notify:
		case <-tick.C:
		}
	}
}

// Stop ends the watches and waits for them.
func (o *Observer) Stop() {
	o.stop()
	<-o.done
}
