// Package providertest holds the tests every provider adapter shares, written once and
// parameterised by an [Adapter]: a stalled stream before and after the first delta, a
// slow stream and a slow consumer that are not stalls, no idle timeout, and the fuzz
// target that feeds arbitrary bytes to Stream as the provider's SSE body.
package providertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// Adapter describes an adapter to the shared tests. They run in the adapter's package
// directory, whose testdata holds first_delta.sse: the start of an answer whose one delta
// is the text "Thinking about it", and nothing after it.
type Adapter struct {
	// Provider is the adapter's name, which starts its errors' text.
	Provider string
	// Path is the path the adapter posts a call to, under the base URL.
	Path string
	// New returns a model of the adapter with c's settings.
	New func(t testing.TB, c Config) runtime.Model
	// Slow is a recorded answer, as the adapter's events, that the slow tests stream
	// with Gap before each of its SSE events: longer in all than Idle, the idle timeout
	// they set, though no gap is.
	Slow Slow
}

// Slow is an adapter's slow stream.
type Slow struct {
	// File is the SSE file, under the adapter's testdata, and Events what the adapter
	// makes of it.
	File   string
	Events []runtime.ModelEvent
	// Gap is the pause before each event but the first; Idle the idle timeout.
	Gap, Idle time.Duration
}

// Config is what the shared tests set in an adapter's Config.
type Config struct {
	BaseURL      string
	HTTPClient   *http.Client
	IdleTimeout  time.Duration
	MaxRetries   int
	RetryBackoff time.Duration
	// Sleep replaces the adapter's wait between retries.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Hello is the request the shared tests send.
var Hello = &runtime.ModelRequest{Messages: []runtime.Message{runtime.SystemMessage("Be brief."), runtime.UserMessage("Hello")}}

// The stall tests run on real time with short timeouts: a stall is waited for, never
// raced against.
const testIdle = 50 * time.Millisecond

// model returns a's model on a fake server answering with replies, and the server and
// the waits between retries.
func (a Adapter) model(t *testing.T, c Config, replies ...ssetest.Reply) (runtime.Model, *ssetest.Server, *ssetest.Sleeps) {
	t.Helper()
	srv := ssetest.New(t, a.Path, replies...)
	s := new(ssetest.Sleeps)
	c.BaseURL, c.HTTPClient, c.Sleep = srv.URL, srv.Client(), s.Sleep
	return a.New(t, c), srv, s
}

// providerError returns err as a *provider.Error, failing t if it is not one.
func providerError(t *testing.T, err error) *provider.Error {
	t.Helper()
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a provider error", err, err)
	}
	return pe
}

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
	m, srv, _ := a.model(t, Config{IdleTimeout: a.Slow.Idle}, ssetest.Reply{File: "testdata/" + a.Slow.File, Gap: a.Slow.Gap})
	start := time.Now()
	got, err := ssetest.Collect(t, t.Context(), m, Hello)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d <= a.Slow.Idle {
		t.Errorf("the stream took %v, not longer than the idle timeout: the test proves nothing", d)
	}
	if diff := cmp.Diff(a.Slow.Events, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// slowConsumer: a consumer that takes longer than the idle timeout between events is
// not a stalled server.
func (a Adapter) slowConsumer(t *testing.T) {
	m, _, _ := a.model(t, Config{IdleTimeout: testIdle}, ssetest.Reply{File: "testdata/" + a.Slow.File})
	var got []runtime.ModelEvent
	for ev, err := range m.Stream(t.Context(), Hello) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if len(got) == 1 {
			time.Sleep(3 * testIdle)
		}
	}
	if diff := cmp.Diff(a.Slow.Events, got); diff != "" {
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

// bodyTransport answers every request with 200 and the SSE body it holds, without a
// network: one fuzz exec costs one decode.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(b)),
		Request: r, ContentLength: -1,
	}, nil
}

// FuzzStream feeds arbitrary bytes to a's Stream as the provider's SSE body; the corpus
// starts from the adapter's testdata/*.sse and a few bodies of every provider's kinds.
// Stream must not panic, must end, and must end either with an error or with exactly
// one finish, last, with a reason; every event has a known kind and no tool call index
// is below -1. Text is not checked for valid UTF-8: deltas may split a rune and the
// adapter passes the provider's bytes on; the service makes them valid.
func FuzzStream(f *testing.F, a Adapter) {
	files, err := filepath.Glob("testdata/*.sse")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n"))
	f.Add([]byte("event: error\ndata: {}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		m := a.New(t, Config{
			BaseURL: "http://fuzz.invalid", HTTPClient: &http.Client{Transport: bodyTransport(body)}, MaxRetries: -1,
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var evs []runtime.ModelEvent
		var end error
		for ev, err := range m.Stream(ctx, Hello) {
			if end != nil {
				t.Fatalf("yielded after the error %v: %+v", end, ev)
			}
			if err != nil {
				end = err
				continue
			}
			if n := len(evs); n > 0 && evs[n-1].Kind == runtime.ModelFinish {
				t.Fatalf("event after the finish: %+v", ev)
			}
			if ev.Kind < runtime.ModelTextDelta || ev.Kind > runtime.ModelFinish {
				t.Fatalf("event of unknown kind: %+v", ev)
			}
			if ev.Index < -1 {
				t.Fatalf("tool call index %d", ev.Index)
			}
			evs = append(evs, ev)
		}
		if ctx.Err() != nil {
			t.Fatalf("Stream did not end within 5 s")
		}
		if end == nil && (len(evs) == 0 || evs[len(evs)-1].Kind != runtime.ModelFinish) {
			t.Fatalf("the stream ended without a finish or an error: %+v", evs)
		}
		if end == nil && evs[len(evs)-1].Reason == runtime.FinishUnspecified {
			t.Fatalf("finish without a reason")
		}
	})
}

// TestCancel: a consumer that cancels the call's context, or stops reading, after the
// first delta ends the HTTP request, and a cancelled one's events end with
// context.Canceled.
func TestCancel(t *testing.T, a Adapter) {
	for _, how := range []string{"cancel", "break"} {
		t.Run(how, func(t *testing.T) {
			m, srv, _ := a.model(t, Config{}, ssetest.Reply{File: "testdata/first_delta.sse", Hold: true})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var evs []runtime.ModelEvent
			var last error
			for ev, err := range m.Stream(ctx, Hello) {
				if err != nil {
					last = err
					break
				}
				evs = append(evs, ev)
				if how == "break" {
					break
				}
				cancel()
			}
			// Bounded only so that a broken adapter fails rather than hangs the test.
			select {
			case <-srv.Gone:
			case <-time.After(time.Minute):
				t.Fatal("the server did not see the request end")
			}
			if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("Thinking about it")}, evs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if how == "cancel" && !errors.Is(last, context.Canceled) {
				t.Errorf("sequence ended with %v, want context.Canceled", last)
			}
		})
	}
}

// Assemble runs one step of an agent on m, with tools that answer "ok", and returns
// the assistant message the runtime assembled and the run's events.
func Assemble(t *testing.T, m runtime.Model, tools ...string) (runtime.Message, []runtime.Event) {
	t.Helper()
	var ts []runtime.Tool
	for _, name := range tools {
		ts = append(ts, rt.Tool(name, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
			return runtime.Output{Text: "ok"}, nil
		}))
	}
	a, err := runtime.New(runtime.Config{Model: m, Tools: ts, MaxSteps: 1, NewID: rt.SequentialIDs()})
	if err != nil {
		t.Fatal(err)
	}
	var evs []runtime.Event
	for ev, err := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("Weather?")}}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if fin, ok := ev.(*runtime.RunFinished); ok {
			for _, msg := range fin.NewMessages {
				if msg.Role == runtime.RoleAssistant {
					return msg, evs
				}
			}
			t.Fatalf("no assistant message; run finished %v: %v", fin.Reason, fin.Err)
		}
	}
	t.Fatal("no run_finished")
	return runtime.Message{}, nil
}
