package providertest

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// TestCancel: a consumer that cancels the call's context, or stops reading, after the
// first delta ends the HTTP request, and a cancelled one's events end with
// context.Canceled; a context that ends during the wait before a retry ends the call.
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
				if ev.Kind == runtime.ModelResponseInfo {
					continue // not a delta
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
	t.Run("during the backoff", func(t *testing.T) {
		// The server asks for 30 s; the context ends long before.
		m, _, _ := a.model(t, Config{Sleep: provider.Sleep},
			a.RateLimited.reply(http.Header{"Retry-After": {"30"}}))
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := ssetest.Collect(t, ctx, m, Hello)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want the context's", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the backoff outlived the context by %v", d)
		}
	})
}
