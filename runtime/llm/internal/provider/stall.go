package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultIdleTimeout is the adapters' idle timeout when their Config leaves it 0. It is
// long enough for a reasoning model's quiet spells (Anthropic sends pings meanwhile, the
// Chat Completions API nothing) and short enough that a dead stream does not hold a run
// until its deadline.
const DefaultIdleTimeout = 3 * time.Minute

// ErrStalled is wrapped by the error of a model call whose response stream sent no byte
// for the idle timeout.
var ErrStalled = errors.New("model stream stalled")

// StallError is the failure of a stalled stream. It wraps [ErrStalled].
type StallError struct {
	// Idle is the idle timeout that passed without a byte.
	Idle time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%v: no bytes from the model for %s", ErrStalled, e.Idle)
}

// Unwrap returns [ErrStalled].
func (e *StallError) Unwrap() error { return ErrStalled }

// IdleTimeout returns the idle timeout of an adapter's setting: 0 means
// [DefaultIdleTimeout], a negative setting none (0).
func IdleTimeout(setting time.Duration) time.Duration {
	switch {
	case setting == 0:
		return DefaultIdleTimeout
	case setting < 0:
		return 0
	}
	return setting
}

// StallMiddleware returns an HTTP middleware, of the type both SDKs'
// option.WithMiddleware take, that gives each request a context of its own and fails a
// read of the response body with a [*StallError] when no byte arrives for idle: the
// request's context is cancelled with the error as its cause, which makes the transport
// close the connection. Cancelling the caller's context still ends the request at once.
// Closing the body stops the timer and releases the context. idle must be positive.
//
// Only the wait inside Read counts: between reads the timer is stopped, so a consumer
// that is slow to read (a slow gRPC client, which slows the model read on purpose) is
// never taken for a stalled server. The wait for the response headers is not bounded
// here; the HTTP client's transport bounds it (ResponseHeaderTimeout).
func StallMiddleware(idle time.Duration) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if idle <= 0 {
		panic("provider: StallMiddleware needs a positive idle timeout")
	}
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		ctx, cancel := context.WithCancelCause(req.Context())
		res, err := next(req.WithContext(ctx))
		if err != nil || res == nil || res.Body == nil {
			cancel(nil)
			return res, err
		}
		r := &stallReader{rc: res.Body, ctx: ctx, cancel: cancel, idle: idle, stall: &StallError{Idle: idle}}
		// Created stopped, so that Read and Close only Reset and Stop it, which are safe
		// for concurrent use.
		r.timer = time.AfterFunc(time.Hour, func() { cancel(r.stall) })
		r.timer.Stop()
		res.Body = r
		return res, nil
	}
}

// stallReader is a response body whose reads fail once idle passes without a byte.
type stallReader struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration
	stall  *StallError
	timer  *time.Timer
}

func (r *stallReader) Read(p []byte) (int, error) {
	r.timer.Reset(r.idle)
	n, err := r.rc.Read(p)
	r.timer.Stop()
	if err != nil && context.Cause(r.ctx) == error(r.stall) {
		// The transport reports the cancel in words of its own, or as the cause.
		return n, r.stall
	}
	return n, err
}

func (r *stallReader) Close() error {
	r.timer.Stop()
	err := r.rc.Close()
	r.cancel(nil)
	return err
}
