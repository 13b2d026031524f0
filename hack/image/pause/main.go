// Command pause holds a pod sandbox's namespaces: it does nothing until
// SIGTERM or SIGINT, then exits 0. It is the sandbox image of the local
// node's containerd (sandbox_image), built here because no registry is
// reachable. Unlike Kubernetes' pause it does not reap children: the pods'
// containers run in their own PID namespaces.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// Said once the handler is installed, so a caller knows a signal from
	// now on ends it cleanly.
	fmt.Fprintln(os.Stderr, "pause: waiting for SIGTERM or SIGINT")
	s := <-sig
	fmt.Fprintf(os.Stderr, "pause: %s, exiting\n", s)
}
