package watch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/service/store/internal/watch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// collect returns a func for Watch that sends each call's ids on a channel.
func collect() (func([]string), chan []string) {
	ch := make(chan []string, 100)
	return func(ids []string) { ch <- ids }, ch
}

func receive(t *testing.T, ch chan []string) []string {
	t.Helper()
	select {
	case ids := <-ch:
		return ids
	case <-time.After(10 * time.Second):
		t.Fatal("no call")
		return nil
	}
}

func TestEveryWatcherHearsEveryChange(t *testing.T) {
	h := watch.NewHub()
	defer h.Close()
	fa, a := collect()
	fb, b := collect()
	h.Watch(t.Context(), fa)
	h.Watch(t.Context(), fb)
	h.Notify("run_1", "run_2")
	for _, ch := range []chan []string{a, b} {
		if got := receive(t, ch); !slices.Equal(got, []string{"run_1", "run_2"}) {
			t.Errorf("a watcher got %v, want run_1, run_2", got)
		}
	}
}

// A watcher that is slow gets what changed meanwhile in one call, each id once.
func TestSlowWatcherGetsChangesTogether(t *testing.T) {
	h := watch.NewHub()
	defer h.Close()
	release := make(chan struct{})
	ch := make(chan []string, 10)
	h.Watch(t.Context(), func(ids []string) {
		ch <- ids
		<-release
	})
	h.Notify("run_1")
	receive(t, ch) // the watcher is now in its func
	h.Notify("run_2")
	h.Notify("run_3", "run_2")
	close(release)
	if got := receive(t, ch); !slices.Equal(got, []string{"run_2", "run_3"}) {
		t.Errorf("the slow watcher's next call: %v, want run_2, run_3", got)
	}
}

func TestWatchEnds(t *testing.T) {
	h := watch.NewHub()
	ctx, cancel := context.WithCancel(t.Context())
	f, ch := collect()
	h.Watch(ctx, f)
	cancel()
	h.Notify("run_1")
	h.Close() // waits for the watcher's goroutine
	select {
	case ids := <-ch:
		t.Errorf("a watcher whose context ended was called with %v", ids)
	default:
	}
	// After Close, Watch starts nothing.
	h.Watch(t.Context(), f)
	h.Notify("run_2")
}
