package runs

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// A run this server runs it holds by a lease in the store (store.Lease), taken when the
// run is created, claimed, or woken, and renewed every third of Config.LeaseTTL. Every
// write of the run (its events, its checkpoints and status, its thread's messages) is
// fenced on the lease's epoch: a server that lost a run (a pause past its lease, a cut
// to the database) adds nothing to it, and stops it at once (lostRun).
//
// With a store other replicas share (PostgreSQL), the store is also where replicas meet:
// a replica takes up the runs nobody holds that need someone (their replica died, they
// were handed over on drain, or a parked run's approval or park timeout is due), and
// an input sent to a replica that does not run its run is stored, where the run's
// holder finds it (inputs.go), or, for a run nobody holds, the replica that took it
// claims the run and acts on it itself. No replica ever calls another.

// errRunMoved is the cause of a run this server stopped because another replica holds it.
var errRunMoved = journal.ErrMoved

// defaultReplica names this process: its host name and a random suffix, so that a
// restarted pod of the same name is a new holder.
func defaultReplica() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	return cmp.Or(host, "agentd") + "-" + hex.EncodeToString(b)
}

// heldLease returns the run's lease.
func (ss *session) heldLease() store.Lease {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lease
}

// startFleet starts renewing the leases of the runs this server runs, with a store
// that outlives it, and, with one other replicas share, watching the store for changes
// to runs (RecoverRuns starts taking up the runs of others).
func (s *Manager) startFleet() {
	if !s.gated {
		return // a memory store: nobody else could claim a run
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.fleetCtx, s.fleetStop = ctx, cancel
	s.fleetDone.Add(1)
	go func() {
		defer s.fleetDone.Done()
		s.renewLoop(ctx)
	}()
	if s.shared {
		s.store.Watch(ctx, s.changed)
		s.fleetDone.Add(1)
		go func() {
			defer s.fleetDone.Done()
			s.pumpLoop(ctx)
		}()
	}
}

// startTakeover starts taking up the runs of the shared store that need a replica,
// with runCtx's values (hooks) for the runs it takes up.
func (s *Manager) startTakeover(runCtx context.Context) {
	s.takeoverOnce.Do(func() {
		runCtx = context.WithoutCancel(runCtx)
		s.fleetDone.Add(1)
		go func() {
			defer s.fleetDone.Done()
			s.takeoverLoop(s.fleetCtx, runCtx)
		}()
	})
}

// stopFleet stops what startFleet started, once the server's runs are over.
func (s *Manager) stopFleet() {
	if s.fleetStop != nil {
		s.fleetStop()
		s.fleetDone.Wait()
	}
}

// renewLoop renews the leases of the runs going on here every third of the lease, in
// one round trip, and, with a store other replicas share, sends the replica's
// heartbeat. A run whose lease is gone stops at once; so does every run when no
// renewal succeeded for a whole lease (the store may have given them to another).
func (s *Manager) renewLoop(ctx context.Context) {
	every := s.cfg.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	renewed := time.Now()
	if s.shared {
		s.heartbeat(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.shared {
			s.heartbeat(ctx)
		}
		held := map[string]*session{}
		leaseOf := map[string]store.Lease{}
		var leases []store.Lease
		for _, ss := range s.liveRuns() {
			ss.mu.Lock()
			// A run that ended here is held until its end is stored (finishRun), and then
			// let go of: its lease runs until then.
			l, running := ss.lease, ss.phase != phaseParked && !ss.moved && ss.lease.Epoch > 0
			ss.mu.Unlock()
			if running {
				held[l.RunID], leaseOf[l.RunID] = ss, l
				leases = append(leases, l)
			}
		}
		if len(leases) == 0 {
			renewed = time.Now()
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		lost, err := s.store.Renew(rctx, leases, s.cfg.LeaseTTL)
		cancel()
		if err != nil {
			s.log.Warn("renewing the runs' leases failed", "runs", len(leases), "error", err)
			if time.Since(renewed) < s.cfg.LeaseTTL-every {
				continue
			}
			// Past its lease, as far as this process can tell: another replica may run
			// them now.
			s.log.Error("no lease renewed for a whole lease: stopping the runs here", "runs", len(leases))
			for _, ss := range held {
				s.storeLost(ss)
			}
			continue
		}
		renewed = time.Now()
		for _, id := range lost {
			if ss := held[id]; ss != nil && ss.leaseLost(leaseOf[id]) {
				s.lostRun(ss)
			}
		}
	}
}

// leaseLost reports whether the store not renewing l, the run's lease when the renewal
// began, means another replica holds the run: not when the run let go of l itself since,
// parking (its park releases the lease, and a park that finds it taken lets the run go
// itself) or woken under a new one.
func (ss *session) leaseLost(l store.Lease) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lease == l && !ss.handOver && ss.phase != phaseParking && ss.phase != phaseParked
}

// keepTrying does one of a run's writes to the store (f, under a context bounded by
// journal.StoreTimeout), trying it again, backing off, while the store fails to answer and the
// run's lease lasts, as the journal writer does with its events. A fenced write lets
// the run go to the replica holding it (lostRun); one the store has not taken for a
// lease lets it go to whichever replica the store answers next (storeLost). A store
// that keeps nothing across processes is tried once.
func (s *Manager) keepTrying(ss *session, f func(ctx context.Context) error) error {
	began := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
		err := f(ctx)
		cancel()
		switch {
		case err == nil && s.gated:
			s.writeDone.Store(time.Now().UnixNano())
			return nil
		case err == nil || !s.gated:
			return err
		case errors.Is(err, store.ErrFenced):
			s.lostRun(ss)
			return err
		case !journal.Transient(err):
			return err
		}
		s.writeFailed.Store(time.Now().UnixNano())
		ss.mu.Lock()
		moved := ss.moved
		ss.mu.Unlock()
		failing := time.Since(began)
		if moved {
			return err
		}
		if failing >= s.cfg.LeaseTTL {
			s.log.Error("the store did not answer for a lease: letting the run go", "run_id", ss.runID, "error", err)
			s.storeLost(ss)
			return err
		}
		time.Sleep(journal.RetryDelay(failing))
	}
}

// lostRun stops a run another replica holds now (or whose lease this server can no
// longer vouch for): it journals nothing more, and the streams attached to it follow
// the run from the store wherever it goes on; Run streams, whose input the run here can
// no longer take, end UNAVAILABLE (RUN_MOVED), to attach again.
func (s *Manager) lostRun(ss *session) {
	if s.letGo(ss, errRunMoved) {
		s.log.Warn("the run's lease was lost: it stops here, another replica runs it", "run_id", ss.runID)
	}
}

// errStoreFailed is the cause of a run whose events a store that keeps them in memory
// would not take: it ends, its clients having seen its events as they came.
var errStoreFailed = errors.New("the store failed")

// errStoreLost is why the streams of a run end when this server could not keep it: its
// store did not take its events, or renew its lease, for a whole lease. The run goes on
// from the store, here or on another replica, once the store answers again.
var errStoreLost = errors.New("the store did not answer for a lease")

// storeRefused ends a run whose events a store that keeps them in memory refused: its
// clients saw its events as they came, and the run says why it ended.
func (s *Manager) storeRefused(ss *session, err error) {
	s.log.Error("the store refused a run's events: ending the run", "run_id", ss.runID, "error", err)
	err = fmt.Errorf("%w: %w", errStoreFailed, err)
	ss.journal.StoreFailed(err)
	_, cancel := ss.runCtx()
	cancel(err)
}

// storeLost stops a run this server cannot keep, its store having failed it for a
// lease: it journals nothing more, its lease runs out, and whichever replica the store
// answers next takes it up from what the store has. Every stream attached to it ends
// UNAVAILABLE (STORE_UNAVAILABLE) naming the last seq it sent, to attach again: one
// that followed the run from a store that does not answer would wait in silence.
func (s *Manager) storeLost(ss *session) {
	s.letGo(ss, errStoreLost)
}

// letGo stops running ss here, leaving it to the store and whichever replica holds it,
// and reports whether it was running here. The streams attached to it end with why
// (Run streams alone for errRunMoved: the others follow the run from the store).
func (s *Manager) letGo(ss *session, why error) bool {
	ss.mu.Lock()
	if ss.moved || ss.phase == phaseEnded && ss.toPark == nil && ss.journal.Stored() >= ss.journal.Last() {
		ss.mu.Unlock()
		return false // moved already, or over: its end is in the store
	}
	ss.moved = true
	ss.keyed.orphan()
	ss.dropParkLocked() // whichever replica takes it up counts it
	cancel := ss.cancel
	p := ss.parked
	var ended []*journal.Outbox
	for o := range ss.outs {
		if o.Runs || why != errRunMoved {
			ended = append(ended, o)
		}
	}
	ss.mu.Unlock()
	ss.journal.Follow(s.follows.poll(ss.runID), errRunMoved)
	s.release(ss)
	if p != nil {
		p.stop()
	}
	cancel(errRunMoved)
	for _, o := range ended {
		o.Stop(why)
	}
	return true
}

// takeoverLoop takes up, every second or so, the runs of the shared store that need a
// replica and have none, as many as this server has room for: it claims them in
// batches (store.ClaimNext), which replicas looking at once share rather than race
// for, and takes each batch up in parallel. A full batch is followed by the next at
// once, so that the runs of a replica that died all go on elsewhere within a few
// seconds of its leases running out.
func (s *Manager) takeoverLoop(ctx, runCtx context.Context) {
	for {
		d := takeoverInterval/2 + rand.N(takeoverInterval)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for !s.Draining() && ctx.Err() == nil && !s.writesFailing() {
			room := min(s.cfg.MaxConcurrentRuns-int(s.active.Load()), takeoverBatch)
			if room <= 0 {
				break
			}
			qctx, cancel := context.WithTimeout(ctx, journal.StoreTimeout)
			recs, err := s.store.ClaimNext(qctx, s.cfg.Replica, s.cfg.LeaseTTL, room, s.wakeAfter())
			cancel()
			if err != nil {
				s.log.Warn("looking for runs to take up failed", "error", err)
				break
			}
			s.takeClaimed(runCtx, recs)
			if len(recs) < room {
				break
			}
		}
	}
}

// wakeAfter is how long this server leaves a parked run that is due to others before
// it claims it: a replica drained hands its runs over by parking them due at once, and
// in a rolling restart the replica started last is the one least likely to be drained
// next. The youngest replica alive and not draining claims them at once, the others
// after deferWake (heartbeat).
func (s *Manager) wakeAfter() time.Duration {
	return time.Duration(s.wakeDefer.Load())
}

// deferWake is how long a replica that is not the youngest leaves parked runs due to
// the youngest.
const deferWake = 2 * time.Second

// heartbeat tells the store that this replica is alive (and whether it drains), and
// learns from the replicas alive whether it is the youngest not draining (wakeAfter).
func (s *Manager) heartbeat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL/3)
	defer cancel()
	alive, err := s.store.Heartbeat(ctx, store.Replica{ID: s.cfg.Replica, StartedAt: s.started, Draining: s.Draining()}, 2*s.cfg.LeaseTTL)
	if err != nil {
		s.log.Debug("the replica's heartbeat failed", "error", err)
		return
	}
	youngest := ""
	for _, r := range alive { // oldest first
		if !r.Draining {
			youngest = r.ID
		}
	}
	d := deferWake
	if youngest == s.cfg.Replica {
		d = 0
	}
	s.wakeDefer.Store(int64(d))
}

// writesFailing reports whether the store failed this server's last write of a run's,
// within the last two leases: a replica that cannot store runs' events takes none up,
// which it would only let go again, a lease later, with their clients' streams.
func (s *Manager) writesFailing() bool {
	failed := s.writeFailed.Load()
	return failed > s.writeDone.Load() && time.Since(time.Unix(0, failed)) < 2*s.cfg.LeaseTTL
}

// takeoverInterval is the mean time between two looks for runs to take up;
// takeoverBatch bounds the runs one claim takes, and takeoverParallel how many of them
// are taken up at once.
const (
	takeoverInterval = time.Second
	takeoverBatch    = 64
	takeoverParallel = 16
)

// takeClaimed takes up runs this server has claimed, takeoverParallel at a time.
func (s *Manager) takeClaimed(ctx context.Context, recs []store.Run) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, takeoverParallel)
	for _, rec := range recs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := s.taking(rec.ID, func() (*session, error) { return s.recoverClaimed(ctx, rec) })
			if err != nil && !errors.Is(err, store.ErrFinished) {
				s.log.Warn("taking up a run failed", "run_id", rec.ID, "error", err)
			}
		})
	}
	wg.Wait()
}

// taking runs take, which takes up the run of id, unless the run is going on here
// already: one take of a run at a time, those that come meanwhile sharing its outcome.
func (s *Manager) taking(id string, take func() (*session, error)) (*session, error) {
	v, err, _ := s.takes.Do(id, func() (any, error) {
		s.liveMu.Lock()
		ss := s.live[id]
		s.liveMu.Unlock()
		if ss != nil {
			return ss, nil
		}
		return take()
	})
	ss, _ := v.(*session)
	return ss, err
}

// takeUp claims the run of id for this server and runs it here: a run left by a
// replica that died goes on from its last checkpoint, a parked one is readied to wake.
// It returns the run's session; store.ErrHeld when another replica holds it.
func (s *Manager) takeUp(ctx context.Context, id string) (*session, error) {
	return s.taking(id, func() (*session, error) {
		cctx, cancel := context.WithTimeout(ctx, journal.StoreTimeout)
		rec, err := s.store.Claim(cctx, id, s.cfg.Replica, s.cfg.LeaseTTL, false)
		cancel()
		if err != nil {
			return nil, err
		}
		return s.recoverClaimed(ctx, rec)
	})
}

// recoverClaimed runs here the run rec, which this server has just claimed.
func (s *Manager) recoverClaimed(ctx context.Context, rec store.Run) (*session, error) {
	id := rec.ID
	if err := s.recoverRun(ctx, rec); err != nil {
		return nil, err
	}
	s.liveMu.Lock()
	ss := s.live[id]
	s.liveMu.Unlock()
	if ss == nil {
		return nil, store.ErrFinished // it ended as it was taken up
	}
	if s.shared {
		// Inputs stored for it while nobody held it (one may be why it was claimable)
		// are acted on now, not at the next look.
		s.kickPump([]*session{ss})
	}
	if rec.Status == store.Parked {
		s.log.Info("parked run taken up", "run_id", id, "epoch", rec.Epoch)
		ss.mu.Lock()
		p := ss.parked
		ss.mu.Unlock()
		if p != nil && len(p.approvals)+len(p.clientCalls) == 0 {
			// Handed over by a replica that drained: it waits for nobody.
			if err := s.wake(ctx, ss); err != nil {
				s.log.Warn("waking a run handed over failed", "run_id", id, "error", err)
			}
		}
	}
	return ss, nil
}

// changed is the store's word that runs changed, from any replica: streams following
// them look now, and the runs going on here look for inputs stored for them.
func (s *Manager) changed(ids []string) {
	var runs []*session
	if ids == nil {
		s.nudges.wake(nil)
		s.follows.changed(nil)
		runs = s.liveRuns()
	} else {
		changed := make([]string, len(ids))
		s.liveMu.Lock()
		for i, id := range ids {
			run, input := strings.CutPrefix(id, store.InputPrefix)
			changed[i] = run
			if ss := s.live[run]; ss != nil && input {
				runs = append(runs, ss) // given an input, maybe by another replica
			}
		}
		s.liveMu.Unlock()
		s.nudges.wake(changed)
		s.follows.changed(changed)
	}
	if len(runs) > 0 {
		s.kickPump(runs)
	}
}

// nudges are the waits of streams following runs from the store: each ends at its
// time, or sooner when the store says its run changed.
type nudges struct {
	mu    sync.Mutex
	byRun map[string]map[*nudge]struct{}
}

type nudge struct {
	once sync.Once
	ch   chan struct{}
	woke atomic.Bool // the store said the run changed
}

func (n *nudge) fire() { n.once.Do(func() { close(n.ch) }) }

// after returns a nudge whose channel is closed after d, or sooner when run id changes.
func (n *nudges) after(id string, d time.Duration) *nudge {
	w := &nudge{ch: make(chan struct{})}
	n.mu.Lock()
	if n.byRun == nil {
		n.byRun = map[string]map[*nudge]struct{}{}
	}
	if n.byRun[id] == nil {
		n.byRun[id] = map[*nudge]struct{}{}
	}
	n.byRun[id][w] = struct{}{}
	n.mu.Unlock()
	time.AfterFunc(d, func() {
		w.fire()
		n.mu.Lock()
		defer n.mu.Unlock()
		if ws := n.byRun[id]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(n.byRun, id)
			}
		}
	})
	return w
}

// wake ends the waits on runs ids; nil ends them all.
func (n *nudges) wake(ids []string) {
	n.mu.Lock()
	var fire []*nudge
	take := func(id string) {
		for w := range n.byRun[id] {
			fire = append(fire, w)
		}
		delete(n.byRun, id)
	}
	if ids == nil {
		for id := range n.byRun {
			take(id)
		}
	} else {
		for _, id := range ids {
			take(id)
		}
	}
	n.mu.Unlock()
	for _, w := range fire {
		w.woke.Store(true)
		w.fire()
	}
}
