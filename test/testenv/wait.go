package testenv

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// Eventually calls check every interval until it returns nil; once timeout
// has passed it fails the test with what it waited for and check's last
// error.
func Eventually(t testing.TB, interval, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		time.Sleep(interval)
	}
}

// SyncBuffer is a bytes.Buffer that a process's or a logger's goroutines
// write while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
