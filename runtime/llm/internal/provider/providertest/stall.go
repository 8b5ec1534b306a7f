package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// The stall tests run on real time with short timeouts: a stall is waited for, never
// raced against.
const testIdle = 50 * time.Millisecond

// TestStalls runs the stall tests on a.
func TestStalls(t *testing.T, a Adapter) {
	t.Run("before the first delta", a.stallBeforeFirstDelta)
	t.Run("after the first delta", a.stallAfterFirstDelta)
	t.Run("slow server", a.slowServer)
	t.Run("slow consumer", a.slowConsumer)
	t.Run("no idle timeout", a.noIdleTimeout)
}

// stallBeforeFirstDelta: a server that sends the headers and then nothing fails the
// call after the idle timeout, like a connection failure: retried, with backoff, the
// bounded number of times.
func (a Adapter) stallBeforeFirstDelta(t *testing.T) {
	m, srv, s := a.model(t, Config{IdleTimeout: testIdle, RetryBackoff: 100 * time.Millisecond},
		ssetest.Silent(), ssetest.Silent(), ssetest.Silent())
	start := time.Now()
	evs, err := ssetest.Collect(t, t.Context(), m, Hello)
	elapsed := time.Since(start)
	if len(evs) != 0 {
		t.Errorf("events %v, want none", evs)
	}
	if !errors.Is(err, provider.ErrStalled) {
		t.Fatalf("error %v, want one that wraps ErrStalled", err)
	}
	pe := providerError(t, err)
	if pe.Emitted || !pe.Transient || pe.Attempts != 3 || !pe.Retryable() {
		t.Errorf("error %+v: want not emitted, transient, 3 attempts, retryable later", pe)
	}
	if got, want := err.Error(), a.Provider+": call failed: model stream stalled: no bytes from the model for 50ms (after 3 attempts)"; got != want {
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

// stallAfterFirstDelta: a stall once a delta was yielded ends the sequence with the
// typed error, and is not retried.
func (a Adapter) stallAfterFirstDelta(t *testing.T) {
	m, srv, s := a.model(t, Config{IdleTimeout: testIdle}, ssetest.Reply{File: "testdata/first_delta.sse", Hold: true})
	evs, err := ssetest.Collect(t, t.Context(), m, Hello)
	if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("Thinking about it")}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !errors.Is(err, provider.ErrStalled) {
		t.Fatalf("error %v, want one that wraps ErrStalled", err)
	}
	pe := providerError(t, err)
	if !pe.Emitted || pe.Attempts != 1 || pe.Retryable() {
		t.Errorf("error %+v: want emitted, 1 attempt, not retryable", pe)
	}
	if got, want := err.Error(), a.Provider+": stream failed after the first delta: model stream stalled: no bytes from the model for 50ms"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if n, w := len(srv.Requests()), len(s.Waits()); n != 1 || w != 0 {
		t.Errorf("%d requests and %d waits, want 1 and none", n, w)
	}
}

// slowServer: a stream whose events come slower than nothing but faster than the idle
// timeout, longer in all than the timeout, completes.
func (a Adapter) slowServer(t *testing.T) {
	slow := sse(a.Slow.File)
	slow.Gap = a.Slow.Gap
	m, srv, _ := a.model(t, Config{IdleTimeout: a.Slow.Idle}, slow)
	start := time.Now()
	got, err := ssetest.Collect(t, t.Context(), m, Hello)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d <= a.Slow.Idle {
		t.Errorf("the stream took %v, not longer than the idle timeout: the test proves nothing", d)
	}
	if diff := cmp.Diff(a.Text, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// slowConsumer: a consumer that takes longer than the idle timeout between events is
// not a stalled server.
func (a Adapter) slowConsumer(t *testing.T) {
	m, _, _ := a.model(t, Config{IdleTimeout: testIdle}, sse(a.Slow.File))
	var got []runtime.ModelEvent
	for ev, err := range m.Stream(t.Context(), Hello) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == runtime.ModelResponseInfo {
			continue // not a delta
		}
		got = append(got, ev)
		if len(got) == 1 {
			time.Sleep(3 * testIdle)
		}
	}
	if diff := cmp.Diff(a.Text, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// noIdleTimeout: a negative IdleTimeout turns the bound off; the call then waits for
// its context.
func (a Adapter) noIdleTimeout(t *testing.T) {
	m, srv, _ := a.model(t, Config{IdleTimeout: -1}, ssetest.Silent())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := ssetest.Collect(t, ctx, m, Hello)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the call ended (%v) without an idle timeout or a cancel", err)
	case <-time.After(4 * testIdle):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	<-srv.Gone
}
