package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	// ManagerNamespace is where the manager's ServiceAccount lives, as in
	// config/default.
	ManagerNamespace = "runbook-system"
	// ManagerServiceAccount is config/rbac's ServiceAccount.
	ManagerServiceAccount = "controller-manager"
	// ManagerUser is the user the apiserver sees for the manager started
	// with ManagerKubeconfig: its requests are told apart from the
	// benchmark's and the control plane's by this name.
	ManagerUser = "system:serviceaccount:" + ManagerNamespace + ":" + ManagerServiceAccount
)

// systemNamespace matches config/rbac's placeholder namespace, which
// config/default's kustomization replaces.
var systemNamespace = regexp.MustCompile(`(?m)^(\s*)namespace: system\s*$`)

// ManagerKubeconfig gives the manager its own identity on c, as in a real
// installation: it creates ManagerNamespace, applies config/rbac there (the
// ServiceAccount, the ClusterRole generated from the controllers' markers
// and their bindings — what config/default's namespace transformer does,
// without needing kustomize), requests a token of the ServiceAccount and
// writes a kubeconfig that authenticates with it into dir. The apiserver
// authorizes the manager with RBAC and names it ManagerUser in its audit
// log.
func ManagerKubeconfig(ctx context.Context, c *cluster.Cluster, dir string) (string, error) {
	if _, err := c.Kubectl(ctx, "create", "namespace", ManagerNamespace); err != nil {
		return "", err
	}
	rbacDir := filepath.Join(testenv.RepoRoot(), "config", "rbac")
	raw, err := os.ReadFile(filepath.Join(rbacDir, "kustomization.yaml"))
	if err != nil {
		return "", err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return "", fmt.Errorf("config/rbac/kustomization.yaml: %w", err)
	}
	var docs []string
	for _, r := range k.Resources {
		doc, err := os.ReadFile(filepath.Join(rbacDir, r))
		if err != nil {
			return "", err
		}
		docs = append(docs, systemNamespace.ReplaceAllString(string(doc), "${1}namespace: "+ManagerNamespace))
	}
	file := filepath.Join(dir, "rbac.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		return "", err
	}
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", file); err != nil {
		return "", fmt.Errorf("applying config/rbac: %w", err)
	}
	token, err := c.Kubectl(ctx, "create", "token", ManagerServiceAccount, "-n", ManagerNamespace, "--duration=4h")
	if err != nil {
		return "", fmt.Errorf("requesting a token for the ServiceAccount: %w", err)
	}
	out := filepath.Join(dir, "manager.kubeconfig")
	if err := cluster.WriteTokenKubeconfig(c.Kubeconfig, out, strings.TrimSpace(token)); err != nil {
		return "", err
	}
	// RBAC bindings reach the authorizer's cache asynchronously: wait
	// until the manager's identity may do what it will do first.
	for range 100 {
		if ans, err := c.Kubectl(ctx, "auth", "can-i", "list", "deployments.apps", "--all-namespaces", "--as="+ManagerUser); err == nil && strings.TrimSpace(ans) == "yes" {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("the ServiceAccount %s may still not list Deployments after 10s", ManagerUser)
}
