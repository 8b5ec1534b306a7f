package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := NewPolicy(0, 100*time.Millisecond)
	if p.MaxRetries != DefaultMaxRetries {
		t.Fatalf("MaxRetries = %d, want %d", p.MaxRetries, DefaultMaxRetries)
	}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond} {
		d, ok := p.Delay(n, 0)
		if !ok || d > want || d < want*3/4 {
			t.Errorf("Delay(%d) = %v, %t; want within [%v, %v]", n, d, ok, want*3/4, want)
		}
	}
	if _, ok := p.Delay(3, 0); ok {
		t.Error("Delay(3) allowed a third retry of a policy with two")
	}
	if d, ok := p.Delay(1, 3*time.Second); !ok || d != 3*time.Second {
		t.Errorf("Delay with Retry-After 3s = %v, %t; want exactly 3s", d, ok)
	}
	if _, ok := p.Delay(1, 2*time.Minute); ok {
		t.Error("a Retry-After above MaxRetryAfter was waited for")
	}
	if _, ok := NewPolicy(-1, 0).Delay(1, 0); ok {
		t.Error("a negative MaxRetries allowed a retry")
	}
	long := NewPolicy(20, time.Second)
	if d, _ := long.Delay(20, 0); d > DefaultMaxBackoff {
		t.Errorf("Delay(20) = %v, above the cap %v", d, DefaultMaxBackoff)
	}
}

func TestAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{nil, 0},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Second).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
	} {
		if got := After(tc.h, now); got != tc.want {
			t.Errorf("After(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestStatusTransient(t *testing.T) {
	for status, want := range map[int]bool{400: false, 401: false, 404: false, 408: true, 409: true, 429: true, 500: true, 503: true, 529: true} {
		if got := StatusTransient(status, http.Header{}); got != want {
			t.Errorf("StatusTransient(%d) = %t, want %t", status, got, want)
		}
	}
	if StatusTransient(503, http.Header{"X-Should-Retry": {"false"}}) {
		t.Error("x-should-retry: false was not honoured")
	}
	if !StatusTransient(400, http.Header{"X-Should-Retry": {"true"}}) {
		t.Error("x-should-retry: true was not honoured")
	}
}

func TestConnectionError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{&url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, true},
		{&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, true},
		{&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}}, false},
		{&url.Error{Op: "Post", URL: "x://y", Err: errors.New("unsupported protocol scheme")}, false},
		{errors.New("bad request"), false},
	} {
		if got := ConnectionError(tc.err); got != tc.want {
			t.Errorf("ConnectionError(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
