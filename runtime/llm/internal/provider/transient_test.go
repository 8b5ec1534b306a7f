package provider

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

func TestRetryAfter(t *testing.T) {
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
		if got := RetryAfter(tc.h, now); got != tc.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.h, got, tc.want)
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

func TestFromResponseAndFromTransport(t *testing.T) {
	res := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"2"}}}
	if e := (&Error{}).FromResponse(res); e.Status != 429 || e.RetryAfter != 2*time.Second || !e.Transient {
		t.Errorf("FromResponse(429, Retry-After 2) = %+v", e)
	}
	if e := (&Error{}).FromResponse(&http.Response{StatusCode: 400, Header: http.Header{}}); e.Status != 400 || e.Transient {
		t.Errorf("FromResponse(400) = %+v, want not transient", e)
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("read body: %w", &StallError{Idle: time.Second}), true},
		{io.ErrUnexpectedEOF, true},
		{errors.New("message 1: unsupported role"), false},
	} {
		if e := (&Error{Err: tc.err}).FromTransport(); e.Transient != tc.want {
			t.Errorf("FromTransport(%v).Transient = %t, want %t", tc.err, e.Transient, tc.want)
		}
	}
}
