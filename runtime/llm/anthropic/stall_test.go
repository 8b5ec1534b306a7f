package anthropic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	"github.com/agentd/agentd/runtime/llm/openai"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// The stall tests run on real time with short timeouts: a stall is waited for, never
// raced against.
const testIdle = 50 * time.Millisecond

// TestStallBeforeFirstDelta: a server that sends the headers and then nothing fails the
// call after the idle timeout, like a connection failure: retried, with backoff, the
// bounded number of times.
func TestStallBeforeFirstDelta(t *testing.T) {
	m, srv, s := newModel(t, anthropic.Config{IdleTimeout: testIdle, RetryBackoff: 100 * time.Millisecond},
		ssetest.Silent(), ssetest.Silent(), ssetest.Silent())
	start := time.Now()
	evs, err := ssetest.Collect(t, t.Context(), m, hello)
	elapsed := time.Since(start)
	if len(evs) != 0 {
		t.Errorf("events %v, want none", evs)
	}
	if !errors.Is(err, anthropic.ErrStalled) || !errors.Is(err, openai.ErrStalled) {
		t.Fatalf("error %v, want one that wraps ErrStalled, the same in both adapters", err)
	}
	pe := providerError(t, err)
	if pe.Emitted || !pe.Transient || pe.Attempts != 3 || pe.Retryable() {
		t.Errorf("error %+v: want not emitted, transient, 3 attempts, not retryable by the runtime", pe)
	}
	if got, want := err.Error(), "anthropic: call failed: model stream stalled: no bytes from the model for 50ms (after 3 attempts)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (two retries by default)", n)
	}
	if waits := s.Waits(); len(waits) != 2 || waits[0] < 75*time.Millisecond || waits[0] > 100*time.Millisecond {
		t.Errorf("waits %v, want two backoffs, the first about 100ms", waits)
	}
	if elapsed < 3*testIdle {
		t.Errorf("the call failed after %v, before three idle timeouts had passed", elapsed)
	}
	select {
	case <-srv.Gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the stalled request end")
	}
}

// TestStallAfterFirstDelta: a stall once a delta was yielded ends the sequence with the
// typed error, and is not retried.
func TestStallAfterFirstDelta(t *testing.T) {
	m, srv, s := newModel(t, anthropic.Config{IdleTimeout: testIdle}, ssetest.Reply{File: "testdata/first_delta.sse", Hold: true})
	evs, err := ssetest.Collect(t, t.Context(), m, hello)
	if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("Thinking about it")}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !errors.Is(err, anthropic.ErrStalled) {
		t.Fatalf("error %v, want one that wraps ErrStalled", err)
	}
	pe := providerError(t, err)
	if !pe.Emitted || pe.Attempts != 1 || pe.Retryable() {
		t.Errorf("error %+v: want emitted, 1 attempt, not retryable", pe)
	}
	if got, want := err.Error(), "anthropic: stream failed after the first delta: model stream stalled: no bytes from the model for 50ms"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if n, w := len(srv.Requests()), len(s.Waits()); n != 1 || w != 0 {
		t.Errorf("%d requests and %d waits, want 1 and none", n, w)
	}
}

// TestSlowStreamCompletes: a stream whose events come slower than nothing but faster
// than the idle timeout completes, though it takes longer in all than the timeout and
// pings are all that come for longer than it.
func TestSlowStreamCompletes(t *testing.T) {
	const idle = 200 * time.Millisecond
	m, srv, _ := newModel(t, anthropic.Config{IdleTimeout: idle}, ssetest.Reply{File: "testdata/quiet_with_pings.sse", Gap: 50 * time.Millisecond})
	start := time.Now()
	got, err := ssetest.Collect(t, t.Context(), m, hello)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d <= idle {
		t.Errorf("the stream took %v, not longer than the idle timeout: the test proves nothing", d)
	}
	want := []runtime.ModelEvent{
		rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
		ssetest.Usage(runtime.Usage{InputTokens: 175, OutputTokens: 15, CacheReadInputTokens: 100, CacheCreationInputTokens: 50}),
		rt.Finish(runtime.FinishStop),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}
