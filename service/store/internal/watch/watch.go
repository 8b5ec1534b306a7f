// Package watch tells a store's watchers which runs changed: the Watch of the stores
// whose changes all go through one process (memory, SQLite).
package watch

import (
	"context"
	"sync"
)

// Hub hands the ids of changed runs to every watcher. Each watcher has a goroutine of
// its own that calls its func with what changed since the last call, so that Notify
// never waits for a watcher, and a slow watcher gets the changes of several calls at
// once. Hub is safe for concurrent use.
type Hub struct {
	mu       sync.Mutex
	watchers map[*watcher]struct{}
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
}

type watcher struct {
	f    func(ids []string)
	wake chan struct{} // holds one wake-up at most: the ids wait in ids

	mu   sync.Mutex
	ids  []string
	seen map[string]bool
}

// NewHub returns a hub with no watchers.
func NewHub() *Hub {
	return &Hub{watchers: map[*watcher]struct{}{}, done: make(chan struct{})}
}

// Watch calls f with the ids of the runs Notify is told of, from a goroutine of its
// own, until ctx ends or the hub closes. No call starts once ctx has ended: a change
// notified after that is not reported.
func (h *Hub) Watch(ctx context.Context, f func(ids []string)) {
	w := &watcher{f: f, wake: make(chan struct{}, 1), seen: map[string]bool{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.watchers[w] = struct{}{}
	h.wg.Go(func() {
		defer h.remove(w)
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.done:
				return
			case <-w.wake:
			}
			ids := w.take()
			// The select may have picked the wake-up of a change made after ctx ended.
			if ctx.Err() != nil {
				return
			}
			// A wake-up whose ids an earlier take had already is no change: and f(nil)
			// would say that anything may have changed.
			if len(ids) > 0 {
				w.f(ids)
			}
		}
	})
}

func (h *Hub) remove(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
}

// Notify tells every watcher that the runs ids changed.
func (h *Hub) Notify(ids ...string) {
	if len(ids) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		w.add(ids)
		select {
		case w.wake <- struct{}{}:
		default: // a wake-up is pending already, and it takes the new ids too
		}
	}
}

func (w *watcher) add(ids []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if !w.seen[id] {
			w.seen[id] = true
			w.ids = append(w.ids, id)
		}
	}
}

func (w *watcher) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := w.ids
	w.ids = nil
	clear(w.seen)
	return ids
}

// Close stops every watcher and waits for their goroutines; Watch after Close does
// nothing. It must not be called from a watcher's func.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
	h.mu.Unlock()
	h.wg.Wait()
}
