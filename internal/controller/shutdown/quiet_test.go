package shutdown

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestQuiet(t *testing.T) {
	failed := errors.New("apiserver said no")
	canceled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	expired := func() context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
		t.Cleanup(cancel)
		return ctx
	}
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		res     reconcile.Result
		err     error
		wantRes reconcile.Result
		wantErr error
	}{
		{"stopping: the error goes", canceled(), reconcile.Result{}, fmt.Errorf("get x: %w", context.Canceled), reconcile.Result{}, nil},
		{"stopping: any error goes", canceled(), reconcile.Result{RequeueAfter: time.Second}, failed, reconcile.Result{}, nil},
		{"stopping without an error: the result stays", canceled(), reconcile.Result{RequeueAfter: time.Minute}, nil, reconcile.Result{RequeueAfter: time.Minute}, nil},
		{"running: the error stays", context.Background(), reconcile.Result{}, failed, reconcile.Result{}, failed},
		{"running: a canceled request of its own stays an error", context.Background(), reconcile.Result{}, context.Canceled, reconcile.Result{}, context.Canceled},
		{"a reconcile timeout is no shutdown", expired(), reconcile.Result{}, context.DeadlineExceeded, reconcile.Result{}, context.DeadlineExceeded},
		{"running: the result stays", context.Background(), reconcile.Result{RequeueAfter: time.Second}, nil, reconcile.Result{RequeueAfter: time.Second}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			r := Quiet[string](reconcile.TypedFunc[string](func(_ context.Context, req string) (reconcile.Result, error) {
				got = req
				return tc.res, tc.err
			}))
			res, err := r.Reconcile(tc.ctx, "ns/name")
			if got != "ns/name" {
				t.Fatalf("inner reconciler got %q", got)
			}
			if res != tc.wantRes || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("got (%+v, %v), want (%+v, %v)", res, err, tc.wantRes, tc.wantErr)
			}
		})
	}
}
