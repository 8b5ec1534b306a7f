package provider

import (
	"context"
	"iter"
	"time"

	"github.com/agentd/agentd/runtime"
)

// Retrier makes an adapter's calls, retrying a call that failed before its first event
// while the failure is transient and its [Policy] allows, after the server's Retry-After
// or the policy's backoff. Nothing is retried once an event has been yielded. Its
// fields must not change once it is in use; it is then safe for concurrent use.
type Retrier struct {
	// Provider names the adapter in its errors ([Error.Provider]).
	Provider string
	// Policy bounds and paces the retries.
	Policy Policy
	// Sleep waits between retries; nil means [Sleep]. Tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Attempt makes one call and yields its events through yield, stopping when yield
// returns false (the consumer stopped). It returns the call's failure, nil when the call
// succeeded or the consumer stopped; the Retrier sets the failure's Provider, Emitted and
// Attempts.
type Attempt func(yield func(runtime.ModelEvent) bool) *Error

// Stream runs attempt until it succeeds, the consumer stops, or it fails for good, and
// yields its events through yield. A final failure ends the events with the *Error, or
// with ctx's error when ctx is done, however the call failed.
func (r *Retrier) Stream(ctx context.Context, yield func(runtime.ModelEvent, error) bool, attempt Attempt) {
	emitted, stopped := false, false
	send := func(ev runtime.ModelEvent) bool {
		emitted = true
		if !yield(ev, nil) {
			stopped = true
		}
		return !stopped
	}
	sleep := r.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for n := 1; ; n++ {
		e := attempt(send)
		if e == nil || stopped {
			return
		}
		if ctx.Err() != nil {
			yield(runtime.ModelEvent{}, ctx.Err())
			return
		}
		e.Provider, e.Emitted, e.Attempts = r.Provider, emitted, n
		if e.Transient && !emitted {
			if d, ok := r.Policy.Delay(n, e.RetryAfter); ok {
				if err := sleep(ctx, d); err != nil {
					yield(runtime.ModelEvent{}, err)
					return
				}
				continue
			}
		}
		yield(runtime.ModelEvent{}, e)
		return
	}
}

// Fail ends the events with err, a failure before any call (the request could not be
// built), as an *Error of no attempt.
func (r *Retrier) Fail(yield func(runtime.ModelEvent, error) bool, err error) {
	yield(runtime.ModelEvent{}, &Error{Provider: r.Provider, Err: err})
}

// Stream is an adapter's Model.Stream: it builds the call's parameters from req once (a
// nil req is an empty request), then makes the call through r's attempts. A request that
// cannot be built fails as an *Error of no attempt.
func Stream[P any](ctx context.Context, r *Retrier, req *runtime.ModelRequest,
	params func(*runtime.ModelRequest) (P, error),
	once func(context.Context, P, func(runtime.ModelEvent) bool) *Error,
) iter.Seq2[runtime.ModelEvent, error] {
	return func(yield func(runtime.ModelEvent, error) bool) {
		if req == nil {
			req = &runtime.ModelRequest{}
		}
		p, err := params(req)
		if err != nil {
			r.Fail(yield, err)
			return
		}
		r.Stream(ctx, yield, func(yield func(runtime.ModelEvent) bool) *Error {
			return once(ctx, p, yield)
		})
	}
}
