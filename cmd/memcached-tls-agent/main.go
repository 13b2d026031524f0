// Command memcached-tls-agent runs beside memcached in each pod of a
// Memcached with TLS: when the kubelet updates the mounted certificate, it
// loads the renewal into the running memcached (refresh_certs), so the
// pods and their cached items stay. See internal/tlsreload.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/runbook-dev/runbook/internal/tlsreload"
)

func main() {
	a := tlsreload.Agent{Log: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	flag.StringVar(&a.Dir, "tls-dir", "/etc/memcached/tls", "the mounted TLS files: tls.crt, tls.key, client-ca.crt")
	flag.StringVar(&a.AuthFile, "auth-file", "", "memcached's auth file, when memcached requires authentication")
	flag.StringVar(&a.Addr, "memcached", "127.0.0.1:11211", "memcached's address in the pod")
	flag.BoolVar(&a.Mutual, "mutual-tls", false, "memcached requires a client certificate: present the server's own")
	flag.DurationVar(&a.Interval, "interval", time.Second, "how often the TLS volume is looked at")
	flag.DurationVar(&a.MaxBackoff, "max-backoff", time.Minute, "longest wait between failed reload attempts")
	flag.Parse()
	if a.Interval <= 0 || a.MaxBackoff < a.Interval {
		fmt.Fprintln(os.Stderr, "memcached-tls-agent: -interval must be positive and at most -max-backoff")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := a.Run(ctx); err != nil {
		a.Log.Error("stopped", "error", err.Error())
		os.Exit(1)
	}
}
