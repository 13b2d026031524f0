package alerts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// Error is a failed query. Unreachable: Prometheus itself did not answer
// (network, timeout, 5xx), which the next queries of the same round would
// meet too; otherwise the answer was unusable.
type Error struct {
	Unreachable bool
	msg         string
}

func (e *Error) Error() string { return e.msg }

func unreachable(format string, args ...any) error {
	return &Error{Unreachable: true, msg: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error {
	return &Error{msg: fmt.Sprintf(format, args...)}
}

func transportError(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return unreachable("Prometheus did not answer within %s", timeout)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return unreachable("Prometheus could not be reached: %v", op.Err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return unreachable("Prometheus could not be reached: its host name does not resolve")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// Without the URL, which holds the address and the query.
		return unreachable("Prometheus could not be reached: %v", ue.Err)
	}
	return unreachable("Prometheus could not be reached: %v", err)
}
