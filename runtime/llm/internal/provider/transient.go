package provider

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RetryAfter returns how long h asks a client to wait before retrying: retry-after-ms
// (as the OpenAI and Anthropic APIs send it), else Retry-After in seconds or as an HTTP
// date. It returns 0 when h asks for nothing, or for a date in the past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
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

// FromResponse sets what an HTTP error response tells: its status, the wait it asks
// for, and whether the status is transient. It returns e.
func (e *Error) FromResponse(res *http.Response) *Error {
	e.Status = res.StatusCode
	e.RetryAfter = RetryAfter(res.Header, time.Now())
	e.Transient = StatusTransient(res.StatusCode, res.Header)
	return e
}

// FromTransport sets what a call that got no error response tells: it is transient when
// Err is a failure of the connection or a stall, since the server may answer a new
// connection. It returns e.
func (e *Error) FromTransport() *Error {
	e.Transient = ConnectionError(e.Err) || errors.Is(e.Err, ErrStalled)
	return e
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
