// Package retry holds what the provider adapters share about retrying a model call that
// failed before its first delta: the backoff policy, reading Retry-After, and classifying
// transport failures. The adapters own the loop; this package only answers "how long"
// and "may it help".
package retry

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
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

// After returns how long h asks a client to wait before retrying: retry-after-ms (as
// the OpenAI and Anthropic APIs send it), else Retry-After in seconds or as an HTTP date.
// It returns 0 when h asks for nothing, or for a date in the past.
func After(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// StatusTransient reports whether an HTTP status says that the same request may succeed
// later: 408, 409, 429 and every 5xx (Anthropic's 529 "overloaded" included). A server's
// x-should-retry header, where it sends one, decides instead.
func StatusTransient(status int, h http.Header) bool {
	switch strings.ToLower(h.Get("X-Should-Retry")) {
	case "true":
		return true
	case "false":
		return false
	}
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// ConnectionError reports whether err is a failure of the connection rather than an
// answer of the server: refused, reset or dropped connections, timeouts, and bodies cut
// short. A host that does not resolve is not one, nor a cancelled context.
func ConnectionError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		return dns.IsTimeout || dns.IsTemporary
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	// net/http reports some transport failures as plain errors.
	msg := err.Error()
	return strings.Contains(msg, "connection reset") || strings.Contains(msg, "server closed idle connection") ||
		strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "http2: stream closed") ||
		strings.Contains(msg, "INTERNAL_ERROR")
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
