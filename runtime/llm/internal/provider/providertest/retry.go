package providertest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// TestRetries: a call that fails before its first delta, transiently, is retried with
// the same body, after the server's wait or the backoff; one that fails for good, or
// after its first delta, is not, and its error says whether a later call may succeed.
func TestRetries(t *testing.T, a Adapter) {
	// Exponential backoff from 100ms, less up to a quarter of jitter.
	backoff := func(t *testing.T, waits []time.Duration) {
		if len(waits) != 2 || waits[0] < 75*time.Millisecond || waits[0] > 100*time.Millisecond ||
			waits[1] < 150*time.Millisecond || waits[1] > 200*time.Millisecond {
			t.Errorf("waits = %v, want about 100ms then 200ms", waits)
		}
	}
	exactly := func(want time.Duration) func(*testing.T, []time.Duration) {
		return func(t *testing.T, waits []time.Duration) {
			if diff := cmp.Diff([]time.Duration{want}, waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		}
	}
	// What proxies in front of an API answer.
	html500 := ssetest.Reply{Status: http.StatusInternalServerError, Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html>bad gateway</html>"}
	plain500 := ssetest.Reply{Status: http.StatusInternalServerError, Header: http.Header{"Content-Type": {"text/plain"}}, Body: "upstream connect error"}
	for _, tc := range []struct {
		name    string
		replies []ssetest.Reply
		waits   func(t *testing.T, waits []time.Duration)
	}{
		{"429 with Retry-After", []ssetest.Reply{
			a.RateLimited.reply(http.Header{"Retry-After": {"1"}}), sse("text.sse"),
		}, exactly(time.Second)},
		{"429 with retry-after-ms", []ssetest.Reply{
			a.RateLimited.reply(http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}), sse("text.sse"),
		}, exactly(250 * time.Millisecond)},
		{"the API's 5xx, then a proxy's 500", []ssetest.Reply{a.ServerError.reply(nil), html500, sse("text.sse")}, backoff},
		{"a proxy's 500, then the API's 5xx", []ssetest.Reply{plain500, a.ServerError.reply(nil), sse("text.sse")}, backoff},
		{"connection dropped before the first byte", []ssetest.Reply{{Cut: true}, sse("text.sse")}, nil},
		{"error event before the first delta", []ssetest.Reply{sse(a.ErrorEvent), sse("text.sse")}, nil},
		{"stream cut before the first delta", []ssetest.Reply{
			{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: a.Opening, Cut: true}, sse("text.sse"),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv, s := a.model(t, Config{RetryBackoff: 100 * time.Millisecond}, tc.replies...)
			got, err := ssetest.Collect(t, t.Context(), m, Hello)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(a.Text, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			reqs := srv.Requests()
			if len(reqs) != len(tc.replies) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.replies))
			}
			for _, r := range reqs[1:] {
				if string(r.Body) != string(reqs[0].Body) {
					t.Errorf("a retry sent a different body:\n%s\nwant\n%s", r.Body, reqs[0].Body)
				}
			}
			if tc.waits != nil {
				tc.waits(t, s.Waits())
			}
		})
	}
	t.Run("exhausted", a.retriesExhausted)
	t.Run("no retries", a.noRetries)
	t.Run("not retried", a.notRetried)
	t.Run("connection dropped after a delta", a.connectionDropped)
	t.Run("no finish reason", a.noFinishReason)
}

// retriesExhausted: a call that fails transiently every time fails after the default
// two retries, with the last failure's error.
func (a Adapter) retriesExhausted(t *testing.T) {
	fail := a.ServerError.reply(nil)
	m, srv, s := a.model(t, Config{}, fail, fail, fail)
	_, err := ssetest.Collect(t, t.Context(), m, Hello)
	pe := providerError(t, err)
	if pe.Provider != a.Provider || pe.Status != a.ServerError.Status || pe.Type != a.ServerError.Type ||
		pe.Attempts != 3 || !pe.Transient || !pe.Retryable() {
		t.Errorf("error %+v: want %s's status %d, %s, 3 attempts, transient, retryable later",
			pe, a.Provider, a.ServerError.Status, a.ServerError.Type)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (two retries by default)", n)
	}
	if n := len(s.Waits()); n != 2 {
		t.Errorf("%d waits, want 2", n)
	}
	if got, want := err.Error(), a.Provider+": "+a.ServerError.Text+" (after 3 attempts)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// noRetries: with MaxRetries negative nothing retries the call, here or in the
// runtime; the error still says a later call may succeed.
func (a Adapter) noRetries(t *testing.T) {
	m, srv, s := a.model(t, Config{MaxRetries: -1}, a.RateLimited.reply(nil))
	_, err := ssetest.Collect(t, t.Context(), m, Hello)
	if pe := providerError(t, err); !pe.Retryable() || pe.Attempts != 1 || len(s.Waits()) != 0 {
		t.Errorf("error %+v after %d waits: want retryable later, after 1 attempt and no wait", pe, len(s.Waits()))
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// notRetried: a bad request is not transient; a rate limit whose Retry-After is past
// the longest wait is, but is not retried now: a later call may succeed.
func (a Adapter) notRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       APIError
		header    http.Header
		transient bool
	}{
		{"400", a.BadRequest, nil, false},
		{"Retry-After too long", a.RateLimited, http.Header{"Retry-After": {"3600"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv, s := a.model(t, Config{}, tc.err.reply(tc.header))
			_, err := ssetest.Collect(t, t.Context(), m, Hello)
			pe := providerError(t, err)
			if pe.Transient != tc.transient || pe.Retryable() != tc.transient || pe.Attempts != 1 || pe.Type != tc.err.Type {
				t.Errorf("error %+v: want 1 attempt, %s, Transient and Retryable() %t", pe, tc.err.Type, tc.transient)
			}
			if got, want := err.Error(), a.Provider+": "+tc.err.Text; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
			if n, w := len(srv.Requests()), len(s.Waits()); n != 1 || w != 0 {
				t.Errorf("%d requests and %d waits, want 1 and none", n, w)
			}
		})
	}
}

// connectionDropped: a connection lost after the first delta ends the sequence with
// a typed error, and is not retried.
func (a Adapter) connectionDropped(t *testing.T) {
	m, srv, _ := a.model(t, Config{}, ssetest.Reply{File: "testdata/cut_after_delta.sse", Cut: true})
	evs, err := ssetest.Collect(t, t.Context(), m, Hello)
	if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("The answer")}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	pe := providerError(t, err)
	if !pe.Emitted || !pe.Transient || pe.Retryable() || pe.Status != 0 {
		t.Errorf("error %+v: want emitted, transient, not retryable, no status", pe)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// noFinishReason: a stream that ends without a finish reason fails with an error
// that wraps runtime.ErrMissingFinishReason, after its deltas, and is not retried.
func (a Adapter) noFinishReason(t *testing.T) {
	m, srv, _ := a.model(t, Config{}, sse(a.NoFinish))
	evs, err := ssetest.Collect(t, t.Context(), m, Hello)
	if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("The answer is"), rt.Text(" 42")}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !errors.Is(err, runtime.ErrMissingFinishReason) {
		t.Fatalf("error %v does not wrap ErrMissingFinishReason", err)
	}
	if pe := providerError(t, err); !pe.Emitted || pe.Retryable() {
		t.Errorf("Emitted = %t, Retryable() = %t; want true, false", pe.Emitted, pe.Retryable())
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: nothing is retried after a delta", n)
	}
}
