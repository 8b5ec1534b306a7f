package provider

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of a [Policy].
const (
	DefaultMaxRetries    = 2
	DefaultBackoff       = 500 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultMaxRetryAfter = time.Minute
)

// Policy bounds and paces retries. It is a value; the zero value retries nothing. Build
// one with [NewPolicy], which sets the caps: Delay takes them to be positive.
type Policy struct {
	// MaxRetries is the number of retries after the first attempt.
	MaxRetries int
	// Backoff is the wait before the first retry, doubled for each next one.
	Backoff time.Duration
	// MaxBackoff caps a computed wait.
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After that is waited for; a server asking for
	// more gets no retry.
	MaxRetryAfter time.Duration
}

// NewPolicy returns the policy of an adapter's MaxRetries and RetryBackoff settings:
// maxRetries 0 means DefaultMaxRetries and negative none; backoff 0 means DefaultBackoff.
func NewPolicy(maxRetries int, backoff time.Duration) Policy {
	p := Policy{MaxRetries: maxRetries, Backoff: backoff, MaxBackoff: DefaultMaxBackoff, MaxRetryAfter: DefaultMaxRetryAfter}
	switch {
	case maxRetries == 0:
		p.MaxRetries = DefaultMaxRetries
	case maxRetries < 0:
		p.MaxRetries = 0
	}
	if p.Backoff <= 0 {
		p.Backoff = DefaultBackoff
	}
	return p
}

// Delay returns the wait before retry n (1 for the first retry), and false when the
// policy allows no such retry. A server's retryAfter (0 when it sent none) is honoured
// exactly; otherwise the wait is Backoff doubled n-1 times, capped at MaxBackoff, less
// up to a quarter of it at random so that clients failing together do not retry together.
func (p Policy) Delay(n int, retryAfter time.Duration) (time.Duration, bool) {
	if n < 1 || n > p.MaxRetries {
		return 0, false
	}
	if retryAfter > 0 {
		if retryAfter > p.MaxRetryAfter {
			return 0, false
		}
		return retryAfter, true
	}
	d := p.Backoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	d -= time.Duration(rand.Int64N(int64(d)/4 + 1))
	return d, true
}

// Sleep waits d, or until ctx is done, when it returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
