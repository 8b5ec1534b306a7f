package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentd/agentd/service/store"
)

// errStoreFailed is the cause of a run whose events the store would not take: it ends,
// rather than go on with events no client could read again.
var errStoreFailed = errors.New("the store failed")

// journalWriter copies every run's frames to the store, for all runs at once: each
// flush is one AppendEvents of whatever the runs journaled since the last, so that no
// event pays a transaction of its own (group commit) and a busy server writes in
// bigger batches, not more of them. One goroutine writes, woken when a run journals
// into a quiet writer; it is started on the first frame and ends when the server shuts
// down.
type journalWriter struct {
	st  store.Store
	srv *Server

	mu      sync.Mutex
	dirty   []*session // runs with frames not yet in the store
	running bool       // the goroutine is writing; it takes dirty runs until none are left
}

func newJournalWriter(srv *Server, st store.Store) *journalWriter {
	return &journalWriter{st: st, srv: srv}
}

// mark records that ss journaled a frame: the writer copies it to the store soon.
// Called with ss.mu held, once per frame; it costs a lock and, for a run already
// waiting to be written, nothing more.
func (w *journalWriter) mark(ss *session) {
	if ss.dirty {
		return
	}
	ss.dirty = true
	w.mu.Lock()
	w.dirty = append(w.dirty, ss)
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
}

// run writes until no run has frames left to write.
func (w *journalWriter) run() {
	var batch []*session
	for {
		w.mu.Lock()
		batch, w.dirty = w.dirty, batch[:0]
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.write(batch)
		clear(batch)
	}
}

// write copies the unstored frames of runs to the store in one AppendEvents. A failure
// is retried run by run, so that one run the store refuses fails alone.
func (w *journalWriter) write(runs []*session) {
	type pending struct {
		ss   *session
		last int64
	}
	var batches []store.Events
	var ps []pending
	for _, ss := range runs {
		// Taken under the run's lock, which a run holds across frames that go to the
		// store together (a step's end and its checkpoint): never one without the other.
		ss.mu.Lock()
		ss.dirty = false
		lease, moved := ss.lease, ss.moved
		var first int64
		var frames []frame
		if !moved {
			first, frames = ss.journal.unstored()
		}
		ss.mu.Unlock()
		if len(frames) == 0 {
			continue
		}
		batches = append(batches, store.Events{Lease: lease, First: first, Frames: asBytes(frames)})
		ps = append(ps, pending{ss, first + int64(len(frames)) - 1})
	}
	if len(batches) == 0 {
		return
	}
	err := w.append(batches)
	if err == nil {
		for _, p := range ps {
			p.ss.journal.storedUpTo(p.last)
		}
		return
	}
	for i, p := range ps {
		if len(ps) > 1 {
			err = w.append(batches[i : i+1])
		}
		if errors.Is(err, store.ErrFenced) {
			w.srv.lostRun(p.ss)
			continue
		}
		if err != nil {
			w.srv.log.Error("the store refused a run's events: ending the run", "run_id", p.ss.runID, "error", err)
			err = fmt.Errorf("%w: %w", errStoreFailed, err)
			p.ss.journal.storeFailed(err)
			_, cancel := p.ss.runCtx()
			cancel(err)
			continue
		}
		p.ss.journal.storedUpTo(p.last)
	}
}

// storeTimeout bounds one write to the store.
const storeTimeout = 30 * time.Second

func (w *journalWriter) append(batches []store.Events) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return w.st.AppendEvents(ctx, batches)
}

// flushRun returns once every frame ss journaled is in the store, or with why it could
// not be: its last frames are written at once, not after a wait.
func (w *journalWriter) flushRun(ss *session) error {
	return w.storedThrough(ss, -1)
}

// storedThrough returns once the store has ss's frames up to seq (every frame journaled,
// as they come, for seq -1), or with why it will not: the store failed, or the run moved
// to another replica (errRunMoved), which never stores them.
func (w *journalWriter) storedThrough(ss *session, seq int64) error {
	deadline := time.Now().Add(storeTimeout)
	for {
		stored, failed := ss.journal.storedState()
		target := seq
		if target < 0 {
			target = ss.journal.last.Load()
		}
		if stored.seq >= target {
			return nil
		}
		if failed != nil {
			return failed
		}
		ss.journal.seal()
		ss.mu.Lock()
		moved := ss.moved
		if !moved {
			w.mark(ss)
		}
		ss.mu.Unlock()
		if moved {
			return errRunMoved
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("the store took too long to write the run's last events")
		}
		// A run that moves meanwhile says nothing: look again now and then.
		t := time.NewTimer(min(left, 250*time.Millisecond))
		select {
		case <-stored.changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// asBytes converts frames for the store, which keeps them as they are.
func asBytes(frames []frame) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = f
	}
	return out
}
