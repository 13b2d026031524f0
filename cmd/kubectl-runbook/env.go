package main

import (
	"context"
	"time"
)

// environment is what the commands take from the world: the time, waiting,
// and the nonces of restart requests. Tests replace it.
type environment struct {
	now          func() time.Time
	sleep        func(context.Context, time.Duration) error
	nonce        func() string
	pollInterval time.Duration
}

func realEnvironment() *environment {
	return &environment{
		now: time.Now,
		sleep: func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		},
		nonce:        func() string { return newNonce(time.Now()) },
		pollInterval: 500 * time.Millisecond,
	}
}
