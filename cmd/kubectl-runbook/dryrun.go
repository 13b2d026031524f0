package main

import (
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldOwner names the plugin's writes in managedFields.
const fieldOwner = "kubectl-runbook"

// writeOptions are the flags every command that writes shares.
type writeOptions struct {
	dryRun string
}

// bindDryRun adds --dry-run, spelled as kubectl spells it: --dry-run and
// --dry-run=server ask the apiserver to validate and admit the write
// without persisting it; --dry-run=none (the default) writes.
func (w *writeOptions) bindDryRun(cmd *cobra.Command) {
	cmd.Flags().StringVar(&w.dryRun, "dry-run", "none", `"server" (or just --dry-run): the apiserver checks the change without making it`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
}

func (w *writeOptions) validate() error {
	switch w.dryRun {
	case "none", "server":
		return nil
	case "client":
		return fmt.Errorf("--dry-run=client is not supported: use --dry-run (a server-side dry run, which also runs validation and admission)")
	}
	return fmt.Errorf(`--dry-run=%q: want "server" or "none"`, w.dryRun)
}

func (w *writeOptions) isDryRun() bool { return w.dryRun == "server" }

// patchOptions are the options of the command's one write.
func (w *writeOptions) patchOptions() []client.PatchOption {
	opts := []client.PatchOption{client.FieldOwner(fieldOwner)}
	if w.isDryRun() {
		opts = append(opts, client.DryRunAll)
	}
	return opts
}

// suffix marks the output of a dry run.
func (w *writeOptions) suffix() string {
	if w.isDryRun() {
		return " (server dry run: nothing was changed)"
	}
	return ""
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
