package provider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// script is an Attempt per call: call i yields events[i] and fails with fails[i] (nil
// for success; past the end, success).
type script struct {
	events [][]runtime.ModelEvent
	fails  []*provider.Error
	calls  int
}

func (s *script) attempt(yield func(runtime.ModelEvent) bool) *provider.Error {
	i := s.calls
	s.calls++
	if i < len(s.events) {
		for _, ev := range s.events[i] {
			if !yield(ev) {
				return nil
			}
		}
	}
	if i < len(s.fails) {
		return s.fails[i]
	}
	return nil
}

// stream runs r over s and returns the events and the error that ended them, with the
// waits r slept.
func stream(ctx context.Context, r *provider.Retrier, s *script) (evs []runtime.ModelEvent, err error, waits []time.Duration) {
	r.Sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	r.Stream(ctx, func(ev runtime.ModelEvent, e error) bool {
		if e != nil {
			err = e
			return false
		}
		evs = append(evs, ev)
		return true
	}, s.attempt)
	return evs, err, waits
}

func transient(retryAfter time.Duration) *provider.Error {
	return &provider.Error{Status: 429, Transient: true, RetryAfter: retryAfter}
}

var answer = []runtime.ModelEvent{rt.Text("hi"), rt.Finish(runtime.FinishStop)}

func TestRetrier_RetriesTransientFailuresBeforeTheFirstEvent(t *testing.T) {
	r := &provider.Retrier{Provider: "p", Policy: provider.NewPolicy(0, 100*time.Millisecond)}
	s := &script{events: [][]runtime.ModelEvent{nil, nil, answer}, fails: []*provider.Error{transient(time.Second), transient(0)}}
	evs, err, waits := stream(t.Context(), r, s)
	if err != nil || s.calls != 3 {
		t.Fatalf("error %v after %d calls, want success after 3", err, s.calls)
	}
	if diff := cmp.Diff(answer, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The server's Retry-After exactly, then the backoff of the second retry, 200ms less
	// up to a quarter.
	if len(waits) != 2 || waits[0] != time.Second || waits[1] < 150*time.Millisecond || waits[1] > 200*time.Millisecond {
		t.Errorf("waits %v, want 1s then about 200ms", waits)
	}
}

func TestRetrier_FailsForGood(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   provider.Policy
		s        *script
		calls    int
		emitted  bool
		waits    int
		attempts int
	}{
		{"retries exhausted", provider.NewPolicy(2, time.Millisecond),
			&script{fails: []*provider.Error{transient(0), transient(0), transient(0), transient(0)}}, 3, false, 2, 3},
		{"not transient", provider.NewPolicy(2, time.Millisecond),
			&script{fails: []*provider.Error{{Status: 400}}}, 1, false, 0, 1},
		{"after the first event", provider.NewPolicy(2, time.Millisecond),
			&script{events: [][]runtime.ModelEvent{{rt.Text("par")}}, fails: []*provider.Error{transient(0)}}, 1, true, 0, 1},
		{"Retry-After too long", provider.NewPolicy(2, time.Millisecond),
			&script{fails: []*provider.Error{transient(time.Hour)}}, 1, false, 0, 1},
		{"no retries", provider.NewPolicy(-1, time.Millisecond),
			&script{fails: []*provider.Error{transient(0)}}, 1, false, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &provider.Retrier{Provider: "p", Policy: tc.policy}
			_, err, waits := stream(t.Context(), r, tc.s)
			pe, ok := errors.AsType[*provider.Error](err)
			if !ok {
				t.Fatalf("error %v (%T), want a *provider.Error", err, err)
			}
			if tc.s.calls != tc.calls || len(waits) != tc.waits {
				t.Errorf("%d calls and %d waits, want %d and %d", tc.s.calls, len(waits), tc.calls, tc.waits)
			}
			if pe.Provider != "p" || pe.Emitted != tc.emitted || pe.Attempts != tc.attempts {
				t.Errorf("error %+v: want provider p, emitted %t, %d attempts", pe, tc.emitted, tc.attempts)
			}
		})
	}
}

func TestRetrier_TheConsumerStops(t *testing.T) {
	r := &provider.Retrier{Provider: "p", Policy: provider.NewPolicy(2, time.Millisecond)}
	s := &script{events: [][]runtime.ModelEvent{answer}, fails: []*provider.Error{transient(0)}}
	calls := 0
	r.Stream(t.Context(), func(runtime.ModelEvent, error) bool { calls++; return false }, s.attempt)
	if calls != 1 || s.calls != 1 {
		t.Errorf("yield called %d times over %d calls, want once over one: nothing after the consumer stopped", calls, s.calls)
	}
}

func TestRetrier_ContextDone(t *testing.T) {
	t.Run("during the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := &provider.Retrier{Provider: "p", Policy: provider.NewPolicy(2, time.Millisecond)}
		s := &script{}
		s.fails = []*provider.Error{{Err: context.Canceled}}
		cancel()
		_, err, _ := stream(ctx, r, s)
		if !errors.Is(err, context.Canceled) || s.calls != 1 {
			t.Errorf("error %v after %d calls, want the context's after one", err, s.calls)
		}
		if _, ok := errors.AsType[*provider.Error](err); ok {
			t.Error("the context's end came as a provider error")
		}
	})
	t.Run("during the backoff", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		r := &provider.Retrier{Provider: "p", Policy: provider.NewPolicy(2, time.Millisecond)}
		r.Stream(ctx, func(_ runtime.ModelEvent, err error) bool {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want the context's", err)
			}
			return false
		}, (&script{fails: []*provider.Error{transient(30 * time.Second)}}).attempt)
	})
}

func TestRetrier_Fail(t *testing.T) {
	r := &provider.Retrier{Provider: "p"}
	boom := errors.New("message 1: unsupported role")
	var got error
	r.Fail(func(_ runtime.ModelEvent, err error) bool { got = err; return false }, boom)
	if pe, ok := errors.AsType[*provider.Error](got); !ok || !errors.Is(got, boom) || pe.Retryable() || got.Error() != "p: call failed: message 1: unsupported role" {
		t.Errorf("error %v, want a provider error wrapping the cause, not retryable", got)
	}
}
