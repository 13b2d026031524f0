package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitOptions are --wait and --timeout of a command whose write the
// controller acts on later (restart, resume, approve): the command can
// stay until the controller has acted, and says so when it has not.
type waitOptions struct {
	wait    bool
	timeout time.Duration
}

// bindWait adds --wait ("wait until <until>") and --timeout.
func (w *waitOptions) bindWait(cmd *cobra.Command, until string) {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "wait until "+until)
	cmd.Flags().DurationVar(&w.timeout, "timeout", 2*time.Minute, "how long --wait waits")
}

// validate checks the flags with those of the write: a dry run makes no
// request for the controller to act on.
func (w *waitOptions) validate(write *writeOptions) error {
	if err := write.validate(); err != nil {
		return err
	}
	if w.wait && write.isDryRun() {
		return errors.New("--wait with --dry-run: a dry run makes no request to wait for")
	}
	if w.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", w.timeout)
	}
	return nil
}

// waitingWrite is the options of a command whose one write the controller
// acts on later (restart, resume, approve).
type waitingWrite interface {
	validate() error
	commandContext(context.Context) (context.Context, context.CancelFunc)
}

// runWaitingWrite is the RunE of such a command: the flags are checked
// before a cluster is looked for, and run (given the command's one
// argument) is bounded by commandContext.
func runWaitingWrite(conn *connection, o waitingWrite, run func(ctx context.Context, cl client.Client, ns, arg string, out, errOut io.Writer) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		cl, ns, err := conn.resolve()
		if err != nil {
			return err
		}
		ctx, cancel := o.commandContext(cmd.Context())
		defer cancel()
		return run(ctx, cl, ns, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
}

// commandContext bounds the whole command: the wait, and time for the
// reads and the write around it, so that a hung apiserver does not hang
// the command.
func (w *waitOptions) commandContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, w.timeout+30*time.Second)
}

// until calls check every poll interval until it reports done or fails;
// once --timeout has passed it returns late's error instead. what names
// the awaited thing when the command is interrupted.
func (w *waitOptions) until(ctx context.Context, env *environment, what string, check func() (bool, error), late func() error) error {
	deadline := env.now().Add(w.timeout)
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		if !env.now().Before(deadline) {
			return late()
		}
		if err := env.sleep(ctx, env.pollInterval); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
	}
}
