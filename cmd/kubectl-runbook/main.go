// Command kubectl-runbook is the `kubectl runbook` plugin: a command-line
// view of what Runbook is doing right now. kubectl runs it for `kubectl
// runbook ...` when it is on PATH:
//
//	go install github.com/runbook-dev/runbook/cmd/kubectl-runbook@latest
//	kubectl runbook status -A
//
// See docs/plugin.md.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

func main() {
	if err := newRootCommand(realEnvironment()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// connection is how the plugin reaches the cluster: the flags kubectl users
// expect, resolved the way kubectl resolves them (KUBECONFIG, the current
// context and its namespace).
type connection struct {
	kubeconfig, context, namespace string
	// as and asGroups are kubectl's --as and --as-group: act as another
	// user, as an admin does to see what a team may do.
	as       string
	asGroups []string
}

func (c *connection) bind(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&c.namespace, "namespace", "n", "", "the namespace (default: the context's namespace, else default)")
	f.StringVar(&c.as, "as", "", "the user to impersonate for the operation")
	f.StringArrayVar(&c.asGroups, "as-group", nil, "a group to impersonate for the operation; repeat it for several")
}

func (c *connection) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	overrides.AuthInfo.Impersonate = c.as
	overrides.AuthInfo.ImpersonateGroups = c.asGroups
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// resolve returns a client for the cluster and the namespace to use.
func (c *connection) resolve() (client.Client, string, error) {
	cc := c.clientConfig()
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", errors.New("no cluster to talk to: set KUBECONFIG or pass --kubeconfig")
		}
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns := c.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("reading the context's namespace: %w", err)
		}
	}
	cfg.UserAgent = "kubectl-runbook"
	cl, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		return nil, "", fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	return cl, ns, nil
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, autorebootv1alpha1.AddToScheme, cachev1alpha1.AddToScheme, scalingv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func newRootCommand(env *environment) *cobra.Command {
	conn := &connection{}
	root := &cobra.Command{
		Use: "runbook",
		// Usage lines read `kubectl runbook ...`, as the user types it.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl runbook"},
		Short:       "See what Runbook's RebootPolicies, Memcacheds and NSScalers are doing",
		Long: `kubectl runbook shows the state of Runbook's custom resources in one place.

  kubectl runbook status                 RebootPolicies and Memcacheds of the namespace, and the NSScalers acting on it
  kubectl runbook status -A              everything, in every namespace
  kubectl runbook restart POLICY         fire a RebootPolicy now (or KIND/WORKLOAD: the policy that targets it)
  kubectl runbook resume POLICY          let a halted rollout go on
  kubectl runbook approve POLICY         release the restarts that wait for approval (spec.approval Required)
  kubectl runbook wake NS --for 2h       let a parked namespace run for a while
  kubectl runbook park NS                end that early
  kubectl runbook unpark NS              let it run until its NSScaler's schedule wakes it anyway
  kubectl runbook savings                what parking did not run, per namespace and in total

Every command that writes takes --dry-run (a server-side dry run).

docs/plugin.md describes every command.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	conn.bind(root)
	root.AddCommand(newStatusCommand(conn), newRestartCommand(conn, env), newWakeCommand(conn, env), newParkCommand(conn, env), newUnparkCommand(conn, env), newSavingsCommand(conn, env))
	root.AddCommand(newResumeCommand(conn, env), newApproveCommand(conn, env))
	return root
}
