// Command web is the demo targets' web server: it shows what a container
// sees, so a test can tell which configuration a running container got.
//
//	GET /healthz  200 "ok"
//	GET /env      the process environment, one KEY=value a line, sorted
//	GET /file     the file given by -file, read at each request (e.g. a
//	              mounted ConfigMap key), 404 when -file is not set
//	GET /         the hostname, the environment and the file
//
// It listens on -listen (default :8080) and stops on SIGTERM or SIGINT.
// The file is the one path it was started with: a request cannot name
// another.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to listen on")
	filePath := flag.String("file", "", "path of the file /file prints (e.g. a mounted ConfigMap key)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("web: listening on %s, file %q", ln.Addr(), *filePath)
	if err := serve(ctx, ln, *filePath); err != nil {
		log.Fatal(err)
	}
}

// serve answers on ln until ctx ends, then lets requests in flight finish.
func serve(ctx context.Context, ln net.Listener, filePath string) error {
	srv := &http.Server{Handler: handler(filePath), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func handler(filePath string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /env", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, environment())
	})
	mux.HandleFunc("GET /file", func(w http.ResponseWriter, _ *http.Request) {
		if filePath == "" {
			http.Error(w, "no -file given", http.StatusNotFound)
			return
		}
		b, err := os.ReadFile(filePath)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		host, _ := os.Hostname()
		_, _ = fmt.Fprintf(w, "hostname %s\n\n[environment]\n%s", host, environment())
		if filePath != "" {
			b, err := os.ReadFile(filePath)
			if err != nil {
				_, _ = fmt.Fprintf(w, "\n[%s]\n%v\n", filePath, err)
			} else {
				_, _ = fmt.Fprintf(w, "\n[%s]\n%s", filePath, b)
			}
		}
	})
	return mux
}

func environment() string {
	env := os.Environ()
	sort.Strings(env)
	var b strings.Builder
	for _, e := range env {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.String()
}
