package stdlog

import (
	"bufio"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"golang.org/x/time/rate"
)

// TestNetHTTPPeerBytesReachTheLoggerBounded drives the case the package
// exists for: a server that sends bytes nobody asked for on an idle
// keep-alive connection makes net/http call log.Printf with those bytes.
func TestNetHTTPPeerBytesReachTheLoggerBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hostile := "HTTP/1.1 200 OK\r\n" + strings.Repeat("\x1b[31mforged log line\n", 500)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
		_, _ = c.Write([]byte(hostile)) // after the answer: unsolicited
		_, _ = c.Read(make([]byte, 1))  // until the client closes
	}()

	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: 1})
	prevOut, prevFlags := log.Writer(), log.Flags()
	defer func() { log.SetOutput(prevOut); log.SetFlags(prevFlags) }()
	log.SetFlags(0)
	log.SetOutput(NewWriter(logger, rate.Limit(0), 2, 64))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()

	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := append([]string(nil), lines...)
		mu.Unlock()
		if len(got) > 0 {
			for _, l := range got {
				if len(l) > 400 || strings.Contains(l, "\x1b") || strings.Contains(l, "\nforged") {
					t.Errorf("a peer's bytes reached the log unbounded or raw: %q", l)
				}
			}
			if !strings.Contains(got[0], "Unsolicited response") {
				t.Errorf("first entry %q: want net/http's report", got[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("net/http logged nothing about the unsolicited bytes within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
