package provider_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pipeNext is a transport whose response body is a pipe the test writes to; like
// net/http's, it ends the body when the request's context ends. It reports the
// request's context.
func pipeNext(w **io.PipeWriter, reqCtx *context.Context) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		pr, pw := io.Pipe()
		context.AfterFunc(req.Context(), func() { pw.CloseWithError(errors.New("transport: request canceled")) })
		*w, *reqCtx = pw, req.Context()
		return &http.Response{StatusCode: http.StatusOK, Body: pr}, nil
	}
}

func TestStallMiddleware(t *testing.T) {
	const idle = time.Minute
	synctest.Test(t, func(t *testing.T) {
		var pw *io.PipeWriter
		var reqCtx context.Context
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://model.test/", nil)
		res, err := provider.StallMiddleware(idle)(req, pipeNext(&pw, &reqCtx))
		if err != nil {
			t.Fatal(err)
		}
		// The server sends a byte every 59s for ten minutes; the consumer pauses for
		// longer than idle between reads, with bytes waiting and without: neither is a
		// stall.
		go func() {
			for range 10 {
				time.Sleep(idle - time.Second)
				pw.Write([]byte("x"))
			}
		}()
		buf := make([]byte, 1)
		for i := range 10 {
			if _, err := res.Body.Read(buf); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			if i == 4 {
				time.Sleep(3 * idle)
			}
		}
		// Then it goes quiet.
		start := time.Now()
		_, err = res.Body.Read(buf)
		if se, ok := errors.AsType[*provider.StallError](err); !ok || se.Idle != idle || !errors.Is(err, provider.ErrStalled) {
			t.Fatalf("read after the server went quiet: %v, want a *provider.StallError for %s", err, idle)
		}
		if d := time.Since(start); d != idle {
			t.Errorf("the read failed after %v, want %v", d, idle)
		}
		if got, want := err.Error(), "model stream stalled: no bytes from the model for 1m0s"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
		if !errors.Is(context.Cause(reqCtx), provider.ErrStalled) {
			t.Errorf("the request's context ended with %v, want the stall", context.Cause(reqCtx))
		}
		if _, err := res.Body.Read(buf); !errors.Is(err, provider.ErrStalled) {
			t.Errorf("a later read: %v, want the stall again", err)
		}
		res.Body.Close()
	})
}

func TestStallMiddleware_CallerCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pw *io.PipeWriter
		var reqCtx context.Context
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://model.test/", nil)
		res, err := provider.StallMiddleware(time.Minute)(req, pipeNext(&pw, &reqCtx))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		_, err = res.Body.Read(make([]byte, 1))
		if err == nil || errors.Is(err, provider.ErrStalled) || time.Since(start) != time.Second {
			t.Errorf("read: %v after %v, want the transport's error at once on the cancel", err, time.Since(start))
		}
		res.Body.Close()
	})
}

func TestStallMiddleware_CloseReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pw *io.PipeWriter
		var reqCtx context.Context
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://model.test/", nil)
		res, err := provider.StallMiddleware(time.Minute)(req, pipeNext(&pw, &reqCtx))
		if err != nil {
			t.Fatal(err)
		}
		go pw.Write([]byte("x"))
		if _, err := res.Body.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if !errors.Is(reqCtx.Err(), context.Canceled) || errors.Is(context.Cause(reqCtx), provider.ErrStalled) {
			t.Errorf("after Close the request's context is %v (cause %v), want cancelled, not stalled", reqCtx.Err(), context.Cause(reqCtx))
		}
		// No timer is left to fire: the bubble ends with nothing running.
		time.Sleep(time.Hour)
	})
}

func TestStallMiddleware_TransportError(t *testing.T) {
	var reqCtx context.Context
	boom := errors.New("connection refused")
	req, _ := http.NewRequest(http.MethodPost, "http://model.test/", nil)
	_, err := provider.StallMiddleware(time.Minute)(req, func(r *http.Request) (*http.Response, error) {
		reqCtx = r.Context()
		return nil, boom
	})
	if err != boom || reqCtx.Err() == nil {
		t.Errorf("error %v, request context %v; want the transport's error, the context released", err, reqCtx.Err())
	}
}

func TestIdleTimeout(t *testing.T) {
	for setting, want := range map[time.Duration]time.Duration{0: provider.DefaultIdleTimeout, -1: 0, time.Second: time.Second} {
		if got := provider.IdleTimeout(setting); got != want {
			t.Errorf("IdleTimeout(%v) = %v, want %v", setting, got, want)
		}
	}
}
