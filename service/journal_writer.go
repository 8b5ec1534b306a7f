package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// errStoreFailed is the cause of a run whose events a store that keeps them in memory
// would not take: it ends, its clients having seen its events as they came.
var errStoreFailed = errors.New("the store failed")

// errStoreLost is why the streams of a run end when this server could not keep it: its
// store did not take its events, or renew its lease, for a whole lease. The run goes on
// from the store, here or on another replica, once the store answers again.
var errStoreLost = errors.New("the store did not answer for a lease")

// journalWriter copies every run's frames to the store, for all runs at once: each
// flush is one AppendEvents of whatever the runs journaled since the last, so that no
// event pays a transaction of its own (group commit) and a busy server writes in
// bigger batches, not more of them. One goroutine writes, woken when a run journals
// into a quiet writer; it is started on the first frame and ends when the server shuts
// down.
//
// A write the store fails is tried again, backing off, for as long as the run's lease
// lasts: a store that restarts, or a connection that breaks, delays the run's events
// and loses none. Meanwhile the run goes on until it waits for the store (its streams
// and the stream that started it read only what the store has; a tool runs only once
// its start is stored). A run whose events the store has not taken for a lease is let
// go (storeLost): its streams end UNAVAILABLE naming the last seq they sent, and the
// run goes on from the store, on whichever replica takes it up.
type journalWriter struct {
	st  store.Store
	srv *Server

	mu      sync.Mutex
	dirty   []*session // runs with frames not yet in the store
	running bool       // the goroutine is writing; it takes dirty runs until none are left
	// waiting are runs whose last write failed, written again when retry fires.
	waiting []*session
	retry   *time.Timer
	retryAt time.Time
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

// later has the writer take runs again at (or soon after) at, once a write failed.
func (w *journalWriter) later(runs []*session, at time.Time) {
	if len(runs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting = append(w.waiting, runs...)
	if w.retry != nil && !w.retryAt.After(at) {
		return
	}
	if w.retry != nil {
		w.retry.Stop()
	}
	w.retryAt = at
	w.retry = time.AfterFunc(time.Until(at), w.retryNow)
}

// retryNow hands the runs waiting for another try to the writer.
func (w *journalWriter) retryNow() {
	w.mu.Lock()
	w.dirty = append(w.dirty, w.waiting...)
	w.waiting, w.retry = nil, nil
	start := !w.running && len(w.dirty) > 0
	w.running = w.running || start
	w.mu.Unlock()
	if start {
		go w.run()
	}
}

// write copies the unstored frames of runs to the store in one AppendEvents. When the
// store refuses some of the runs (a lease lost, a sequence it does not expect), each is
// tried alone, so that one run the store refuses fails alone; when it fails them all
// (it does not answer), they are tried again later together.
func (w *journalWriter) write(runs []*session) {
	type pending struct {
		ss      *session
		last    int64
		failing bool // the run's last write failed
	}
	var batches []store.Events
	var ps []pending
	var deferred []*session
	var next time.Time
	now := time.Now()
	for _, ss := range runs {
		// Taken under the run's lock, which a run holds across frames that go to the
		// store together (a step's end and its checkpoint): never one without the other.
		ss.mu.Lock()
		if ss.storeRetry.After(now) {
			// Marked again while it waits to be tried again: it waits on.
			deferred = append(deferred, ss)
			if next.IsZero() || ss.storeRetry.Before(next) {
				next = ss.storeRetry
			}
			ss.mu.Unlock()
			continue
		}
		ss.dirty = false
		lease, moved, failing := ss.lease, ss.moved, !ss.storeFailing.IsZero()
		var first int64
		var frames []journal.Frame
		if !moved {
			first, frames = ss.journal.Unstored()
		}
		ss.mu.Unlock()
		if len(frames) == 0 {
			continue
		}
		batches = append(batches, store.Events{Lease: lease, First: first, Frames: asBytes(frames)})
		ps = append(ps, pending{ss, first + int64(len(frames)) - 1, failing})
	}
	w.later(deferred, next)
	if len(batches) == 0 {
		return
	}
	err := w.append(batches)
	if err == nil {
		w.srv.writeDone.Store(time.Now().UnixNano())
	}
	if err != nil && len(ps) > 1 && !storeTransient(err) {
		for i, p := range ps {
			err := w.append(batches[i : i+1])
			if err == nil {
				w.srv.writeDone.Store(time.Now().UnixNano())
			}
			w.written(p.ss, p.last, p.failing, err)
		}
		return
	}
	for _, p := range ps {
		w.written(p.ss, p.last, p.failing, err)
	}
}

// written records how writing ss's frames up to seq last went; failing says the run's
// write before this one failed.
func (w *journalWriter) written(ss *session, last int64, failing bool, err error) {
	switch {
	case err == nil:
		ss.journal.StoredUpTo(last)
		if !failing {
			return // the common case: nothing to reset, no lock to take
		}
		ss.mu.Lock()
		since := ss.storeFailing
		ss.storeFailing, ss.storeRetry = time.Time{}, time.Time{}
		ss.mu.Unlock()
		w.srv.log.Info("the store took the run's events again", "run_id", ss.runID, "after", time.Since(since).Round(time.Millisecond).String())
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrFinished):
		// Another replica holds the run, or took it up and ended it: the streams follow
		// it in the store.
		w.srv.lostRun(ss)
	case !w.srv.gated:
		// Its clients saw its events as they came: the run ends, and says why.
		w.srv.log.Error("the store refused a run's events: ending the run", "run_id", ss.runID, "error", err)
		err = fmt.Errorf("%w: %w", errStoreFailed, err)
		ss.journal.StoreFailed(err)
		_, cancel := ss.runCtx()
		cancel(err)
	default:
		w.failed(ss, err)
	}
}

// failed has a write of ss's frames tried again, backing off, while the run's lease
// lasts; past it, or for a refusal that another try would meet again, the run is let
// go.
func (w *journalWriter) failed(ss *session, err error) {
	now := time.Now()
	w.srv.writeFailed.Store(now.UnixNano())
	ss.mu.Lock()
	first := ss.storeFailing.IsZero()
	if first {
		ss.storeFailing = now
	}
	failing := now.Sub(ss.storeFailing)
	giveUp := !storeTransient(err) || failing >= w.srv.cfg.LeaseTTL
	queue := false
	if !giveUp {
		ss.storeRetry = now.Add(retryDelay(failing))
		// Marked during the write, the run is in dirty already, and is deferred from
		// there; else it waits here. Either way marks wait for the retry, which takes
		// every frame journaled by then.
		queue = !ss.dirty
		ss.dirty = true
	}
	ss.mu.Unlock()
	if giveUp {
		w.srv.log.Error("the store did not take the run's events: letting the run go", "run_id", ss.runID, "failing_for", failing.Round(time.Millisecond).String(), "error", err)
		w.srv.storeLost(ss)
		return
	}
	if first {
		w.srv.log.Warn("the store did not take the run's events: trying again while its lease lasts", "run_id", ss.runID, "error", err)
	}
	if queue {
		w.later([]*session{ss}, ss.storeRetry)
	}
}

// retryDelay is how long a write that has failed for failing waits before it is tried
// again: a tenth of a second at first, backing off to a second.
func retryDelay(failing time.Duration) time.Duration {
	return min(max(failing/2, 100*time.Millisecond), time.Second)
}

// storeTransient reports whether err is a store's failure to answer (a connection lost,
// a timeout), which a later try may not meet, rather than its refusal of the write.
func storeTransient(err error) bool {
	for _, refusal := range []error{store.ErrNotFound, store.ErrExists, store.ErrSeq, store.ErrExpired, store.ErrFinished, store.ErrFenced, store.ErrHeld} {
		if errors.Is(err, refusal) {
			return false
		}
	}
	return err != nil
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
// as they come, for seq -1), or with why it will not: the store failed, or the run is
// no longer run here (errRunMoved: another replica holds it, or this one let it go),
// and this server never stores them. Its callers hold back what must not happen unless
// the frames before it are stored (a tool's run, a checkpoint): they go on only on nil.
func (w *journalWriter) storedThrough(ss *session, seq int64) error {
	// A journal let go forgets what it never stored (journal.follow): the frames asked
	// for stay asked for.
	floor := seq
	if seq < 0 {
		floor = ss.journal.Last()
	}
	// The writer lets the run go once the store has failed it for a lease; this wait
	// outlasts that, and lets it go itself should it not.
	deadline := time.Now().Add(w.srv.cfg.LeaseTTL + 2*storeTimeout)
	for {
		stored, failed := ss.journal.StoredState()
		target := floor
		if seq < 0 {
			target = max(floor, ss.journal.Last())
		}
		if stored.Seq >= target {
			return nil
		}
		if failed != nil {
			return failed
		}
		ss.journal.Seal()
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
			w.srv.log.Error("the store has not taken the run's events for too long: letting the run go", "run_id", ss.runID)
			w.srv.storeLost(ss)
			return errRunMoved
		}
		// A run that moves meanwhile says nothing: look again now and then.
		t := time.NewTimer(min(left, 250*time.Millisecond))
		select {
		case <-stored.Changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// asBytes converts frames for the store, which keeps them as they are.
func asBytes(frames []journal.Frame) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = f
	}
	return out
}
