package journal

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd/agentd/service/store"
)

// ErrMoved is what waiting for the store returns for a run that is no longer run here:
// another replica holds it, or this one let it go.
var ErrMoved = errors.New("the run's lease was lost: another replica runs it now")

// A Run is what the writer sees of a run.
type Run interface {
	// Lock and Unlock are the run's lock, which the run holds across frames that must
	// reach the store together (a step's end and its checkpoint), and which guards its
	// Writing.
	sync.Locker
	// Journal returns the run's journal.
	Journal() *Journal
	// LeaseLocked returns the lease the run's frames are stored under, and false once the
	// run is not run here any more. Called with the lock held.
	LeaseLocked() (lease store.Lease, here bool)
	// Writing returns the writer's state of the run, which only the writer touches,
	// with the run's lock held.
	Writing() *Writing
	// ID returns the run's id, for logs.
	ID() string
}

// Writing is the writer's state of one run.
type Writing struct {
	dirty bool // marked: frames wait to be written
	// failing is when the store began to fail the run's writes, zero while it takes
	// them; retry, when the writer tries again.
	failing, retry time.Time
}

// WriterConfig says what the writer does when the store does not take a run's frames.
type WriterConfig struct {
	// Gated is set when the store keeps frames on disk and readers see only what it has
	// (Journal's gated): a write that fails is tried again while the lease lasts. Unset,
	// a refused write ends the run (Refused).
	Gated bool
	// LeaseTTL is how long a failing write is tried again before the run is let go.
	LeaseTTL time.Duration
	Log      *slog.Logger
	// Wrote is told of each write to the store: whether the store took it.
	Wrote func(ok bool)
	// Lost is told of a run the store says another replica holds, or ended.
	Lost func(Run)
	// Refused is told of a run whose frames a store that is not gated refused.
	Refused func(Run, error)
	// GiveUp is told of a run whose frames the store has not taken for a lease.
	GiveUp func(Run)
}

// Writer copies every run's frames to the store, for all runs at once: each
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
type Writer struct {
	st  store.Store
	cfg WriterConfig

	mu      sync.Mutex
	dirty   []Run // runs with frames not yet in the store
	running bool  // the goroutine is writing; it takes dirty runs until none are left
	// waiting are runs whose last write failed, written again when retry fires.
	waiting []Run
	retry   *time.Timer
	retryAt time.Time
}

// NewWriter returns a writer to st.
func NewWriter(st store.Store, cfg WriterConfig) *Writer {
	return &Writer{st: st, cfg: cfg}
}

// Mark records that r journaled a frame: the writer copies it to the store soon. Called
// with r locked, once per frame; it costs a lock and, for a run already waiting to be
// written, nothing more.
func (w *Writer) Mark(r Run) {
	wr := r.Writing()
	if wr.dirty {
		return
	}
	wr.dirty = true
	w.mu.Lock()
	w.dirty = append(w.dirty, r)
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
}

// run writes until no run has frames left to write.
func (w *Writer) run() {
	var batch []Run
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
func (w *Writer) later(runs []Run, at time.Time) {
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
func (w *Writer) retryNow() {
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
func (w *Writer) write(runs []Run) {
	type pending struct {
		r       Run
		last    int64
		failing bool // the run's last write failed
	}
	var batches []store.Events
	var ps []pending
	var deferred []Run
	var next time.Time
	now := time.Now()
	for _, r := range runs {
		// Taken under the run's lock, which a run holds across frames that go to the
		// store together (a step's end and its checkpoint): never one without the other.
		r.Lock()
		wr := r.Writing()
		if wr.retry.After(now) {
			// Marked again while it waits to be tried again: it waits on.
			deferred = append(deferred, r)
			if next.IsZero() || wr.retry.Before(next) {
				next = wr.retry
			}
			r.Unlock()
			continue
		}
		wr.dirty = false
		lease, here := r.LeaseLocked()
		failing := !wr.failing.IsZero()
		var first int64
		var frames []Frame
		if here {
			first, frames = r.Journal().Unstored()
		}
		r.Unlock()
		if len(frames) == 0 {
			continue
		}
		batches = append(batches, store.Events{Lease: lease, First: first, Frames: asBytes(frames)})
		ps = append(ps, pending{r, first + int64(len(frames)) - 1, failing})
	}
	w.later(deferred, next)
	if len(batches) == 0 {
		return
	}
	err := w.append(batches)
	if err == nil {
		w.cfg.Wrote(true)
	}
	if err != nil && len(ps) > 1 && !Transient(err) {
		for i, p := range ps {
			err := w.append(batches[i : i+1])
			if err == nil {
				w.cfg.Wrote(true)
			}
			w.written(p.r, p.last, p.failing, err)
		}
		return
	}
	for _, p := range ps {
		w.written(p.r, p.last, p.failing, err)
	}
}

// written records how writing r's frames up to seq last went; failing says the run's
// write before this one failed.
func (w *Writer) written(r Run, last int64, failing bool, err error) {
	switch {
	case err == nil:
		r.Journal().StoredUpTo(last)
		if !failing {
			return // the common case: nothing to reset, no lock to take
		}
		r.Lock()
		wr := r.Writing()
		since := wr.failing
		wr.failing, wr.retry = time.Time{}, time.Time{}
		r.Unlock()
		w.cfg.Log.Info("the store took the run's events again", "run_id", r.ID(), "after", time.Since(since).Round(time.Millisecond).String())
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrFinished):
		// Another replica holds the run, or took it up and ended it: the streams follow
		// it in the store.
		w.cfg.Lost(r)
	case !w.cfg.Gated:
		// Its clients saw its events as they came: the run ends, and says why.
		w.cfg.Refused(r, err)
	default:
		w.failed(r, err)
	}
}

// failed has a write of r's frames tried again, backing off, while the run's lease
// lasts; past it, or for a refusal that another try would meet again, the run is let
// go.
func (w *Writer) failed(r Run, err error) {
	now := time.Now()
	w.cfg.Wrote(false)
	r.Lock()
	wr := r.Writing()
	first := wr.failing.IsZero()
	if first {
		wr.failing = now
	}
	failing := now.Sub(wr.failing)
	giveUp := !Transient(err) || failing >= w.cfg.LeaseTTL
	queue := false
	if !giveUp {
		wr.retry = now.Add(RetryDelay(failing))
		// Marked during the write, the run is in dirty already, and is deferred from
		// there; else it waits here. Either way marks wait for the retry, which takes
		// every frame journaled by then.
		queue = !wr.dirty
		wr.dirty = true
	}
	retry := wr.retry
	r.Unlock()
	if giveUp {
		w.cfg.Log.Error("the store did not take the run's events: letting the run go", "run_id", r.ID(), "failing_for", failing.Round(time.Millisecond).String(), "error", err)
		w.cfg.GiveUp(r)
		return
	}
	if first {
		w.cfg.Log.Warn("the store did not take the run's events: trying again while its lease lasts", "run_id", r.ID(), "error", err)
	}
	if queue {
		w.later([]Run{r}, retry)
	}
}

// RetryDelay is how long a write that has failed for failing waits before it is tried
// again: a tenth of a second at first, backing off to a second.
func RetryDelay(failing time.Duration) time.Duration {
	return min(max(failing/2, 100*time.Millisecond), time.Second)
}

// Transient reports whether err is a store's failure to answer (a connection lost,
// a timeout), which a later try may not meet, rather than its refusal of the write.
func Transient(err error) bool {
	for _, refusal := range []error{store.ErrNotFound, store.ErrExists, store.ErrSeq, store.ErrExpired, store.ErrFinished, store.ErrFenced, store.ErrHeld} {
		if errors.Is(err, refusal) {
			return false
		}
	}
	return err != nil
}

// StoreTimeout bounds one write to the store.
const StoreTimeout = 30 * time.Second

func (w *Writer) append(batches []store.Events) error {
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	return w.st.AppendEvents(ctx, batches)
}

// Flush returns once every frame r journaled is in the store, or with why it could not
// be: its last frames are written at once, not after a wait.
func (w *Writer) Flush(r Run) error {
	return w.StoredThrough(r, -1)
}

// StoredThrough returns once the store has r's frames up to seq (every frame journaled,
// as they come, for seq -1), or with why it will not: the store failed, or the run is
// no longer run here (ErrMoved: another replica holds it, or this one let it go), and
// this server never stores them. Its callers hold back what must not happen unless the
// frames before it are stored (a tool's run, a checkpoint): they go on only on nil.
func (w *Writer) StoredThrough(r Run, seq int64) error {
	j := r.Journal()
	// A journal let go forgets what it never stored (Journal.Follow): the frames asked
	// for stay asked for.
	floor := seq
	if seq < 0 {
		floor = j.Last()
	}
	// The writer lets the run go once the store has failed it for a lease; this wait
	// outlasts that, and lets it go itself should it not.
	deadline := time.Now().Add(w.cfg.LeaseTTL + 2*StoreTimeout)
	for {
		stored, failed := j.storedState()
		target := floor
		if seq < 0 {
			target = max(floor, j.Last())
		}
		if stored.Seq >= target {
			return nil
		}
		if failed != nil {
			return failed
		}
		j.Seal()
		r.Lock()
		_, here := r.LeaseLocked()
		if here {
			w.Mark(r)
		}
		r.Unlock()
		if !here {
			return ErrMoved
		}
		left := time.Until(deadline)
		if left <= 0 {
			w.cfg.Log.Error("the store has not taken the run's events for too long: letting the run go", "run_id", r.ID())
			w.cfg.GiveUp(r)
			return ErrMoved
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
func asBytes(frames []Frame) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = f
	}
	return out
}
