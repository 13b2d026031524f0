package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: admin
  user: {token: admin-token}
contexts:
- name: demo
  context: {cluster: demo, user: admin}
current-context: demo
`

// parsedConnection is the connection the root command's flags give for args.
func parsedConnection(t *testing.T, args ...string) *connection {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	conn := &connection{}
	cmd := &cobra.Command{Use: "runbook"}
	conn.bind(cmd)
	if err := cmd.ParseFlags(append([]string{"--kubeconfig", path}, args...)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestImpersonation: --as and --as-group reach the client's configuration as
// kubectl's do, on top of the kubeconfig's own credentials; without them
// nobody is impersonated.
func TestImpersonation(t *testing.T) {
	cfg, err := parsedConnection(t, "--as", "jane", "--as-group", "team-c", "--as-group", "oncall").clientConfig().ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Impersonate.UserName != "jane" || !slices.Equal(cfg.Impersonate.Groups, []string{"team-c", "oncall"}) || cfg.BearerToken != "admin-token" {
		t.Errorf("impersonating %+v with token %q, want jane in team-c and oncall with the admin's token", cfg.Impersonate, cfg.BearerToken)
	}
	cfg, err = parsedConnection(t).clientConfig().ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Impersonate.UserName != "" || len(cfg.Impersonate.Groups) != 0 {
		t.Errorf("without --as, impersonating %+v", cfg.Impersonate)
	}
}

// TestWhoamiWithoutSelfSubjectReview: where the apiserver cannot say who
// the client is, the user named by --as stands in, not the kubeconfig's.
func TestWhoamiWithoutSelfSubjectReview(t *testing.T) {
	cl := fakeClient(&interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*authenticationv1.SelfSubjectReview); ok {
			return errors.New("the server could not find the requested resource")
		}
		return c.Create(ctx, obj, opts...)
	}})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "admin"},
		{[]string{"--as", "jane"}, "jane"},
	} {
		if got := whoami(parsedConnection(t, tc.args...))(context.Background(), cl); got != tc.want {
			t.Errorf("whoami with %v = %q, want %q", tc.args, got, tc.want)
		}
	}
}
