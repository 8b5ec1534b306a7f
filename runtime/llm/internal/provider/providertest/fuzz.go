package providertest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentd/agentd/runtime"
)

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
// is below -1; the served model is reported at most once, named, and just before
// another event, never alone before an error (which would keep a retry from happening). Text is not checked for valid UTF-8: deltas may split a rune and the
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
		m := a.mustNew(t, Config{
			Model: a.Model, APIKey: Key, BaseURL: "http://fuzz.invalid", HTTPClient: &http.Client{Transport: bodyTransport(body)},
			MaxRetries: -1, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
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
				if n := len(evs); n > 0 && evs[n-1].Kind == runtime.ModelResponseInfo {
					t.Fatalf("the served model was reported alone before the error %v", err)
				}
				end = err
				continue
			}
			if n := len(evs); n > 0 && evs[n-1].Kind == runtime.ModelFinish {
				t.Fatalf("event after the finish: %+v", ev)
			}
			if ev.Kind < runtime.ModelTextDelta || ev.Kind > runtime.ModelResponseInfo {
				t.Fatalf("event of unknown kind: %+v", ev)
			}
			if ev.Kind == runtime.ModelResponseInfo {
				if ev.Name == "" || slices.ContainsFunc(evs, func(e runtime.ModelEvent) bool { return e.Kind == runtime.ModelResponseInfo }) {
					t.Fatalf("served model reported unnamed or twice: %+v after %+v", ev, evs)
				}
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
