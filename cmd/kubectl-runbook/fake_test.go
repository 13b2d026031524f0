package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// testEnv is an environment on a fixed clock whose sleep advances it.
func testEnv(now time.Time) *environment {
	e := &environment{pollInterval: time.Second}
	e.now = func() time.Time { return now }
	e.sleep = func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }
	e.nonce = func() string { return "20261201t120000z-0a1b2c3d" }
	return e
}

func fakeClient(funcs *interceptor.Funcs, objs ...client.Object) client.WithWatch {
	b := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).WithStatusSubresource(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

func wantErr(t *testing.T, err error, infix string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), infix) {
		t.Errorf("error %v, want one containing %q", err, infix)
	}
}

type outputs struct{ out, errOut bytes.Buffer }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
