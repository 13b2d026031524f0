package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/runbook-dev/runbook/test/cluster"
)

// streamLogs copies the manager's logs to manager.log (and, with -logs, to
// the console) until Ctrl-C, a closed stdout or the manager's exit.
func (d *demo) streamLogs(ctx context.Context, m *cluster.Manager, file *os.File) error {
	if d.logs {
		_, _ = fmt.Fprintln(d.out, "Manager logs:")
	}
	printed := 0
	flush := func() {
		logs := m.Logs()
		_, _ = io.WriteString(file, logs[printed:])
		if d.logs {
			_, _ = fmt.Fprint(d.out, logs[printed:])
		}
		printed = len(logs)
	}
	for {
		flush()
		select {
		case <-ctx.Done():
			_, _ = fmt.Fprintln(d.out)
			return nil
		case <-m.Exited():
			flush()
			return errors.New("the manager exited unexpectedly; its logs are above and in manager.log")
		case <-time.After(time.Second):
		}
	}
}

// written is how much of the manager's log the file already holds.
func written(f *os.File) int {
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0
	}
	return int(off)
}
