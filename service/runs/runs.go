package runs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// The server keeps every run in its store (Config.Store): its record, and its journal,
// which the journal writer copies there as the run goes. The runs this server runs are
// also live, in memory, for the streams attached to them and the inputs SendRunInput
// brings; a finished run is read from the store alone, for Config.RunRetention.

// identity returns who owns what an RPC starts: Config.Identity's name for it.
func (s *Manager) identity(ctx context.Context) string {
	if s.cfg.Identity != nil {
		return s.cfg.Identity(ctx)
	}
	if s.cfg.Caller != nil {
		return s.cfg.Caller(ctx)
	}
	return ""
}

// keep records a run this server runs.
func (s *Manager) keep(ss *session) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	s.live[ss.runID] = ss
}

// release forgets a live run that ended: the store has it.
func (s *Manager) release(ss *session) {
	ss.mu.Lock()
	ss.dropParkLocked() // a park its end overtook
	ss.mu.Unlock()
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live[ss.runID] == ss {
		delete(s.live, ss.runID)
	}
}

// ParkedRuns returns how many runs wait parked, with nothing of them running.
func (s *Manager) ParkedRuns() int {
	n := 0
	for _, ss := range s.liveRuns() {
		ss.mu.Lock()
		if ss.phase == phaseParked {
			n++
		}
		ss.mu.Unlock()
	}
	return n
}

// stopParked stops the timers of the parked runs, for a server that shuts down: they
// stay parked in the store, for the next process that serves it.
func (s *Manager) stopParked() {
	for _, ss := range s.liveRuns() {
		ss.mu.Lock()
		p := ss.parked
		ss.mu.Unlock()
		if p != nil {
			p.stop()
		}
	}
}

// liveRuns returns the runs this server keeps in memory, going on or parked.
func (s *Manager) liveRuns() []*session {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	runs := make([]*session, 0, len(s.live))
	for _, ss := range s.live {
		runs = append(runs, ss)
	}
	return runs
}

// runRef is a run a caller may see: live on this server (ss), or in the store alone (rec).
type runRef struct {
	ss  *session
	rec store.Run
}

// lookup returns the run of id, if the caller may see it: the identity that started it
// or, for a run started anonymously, anyone. A run the caller may not see is not found.
func (s *Manager) lookup(ctx context.Context, id string) (runRef, error) {
	notFound := statusError(NotFound, reasonRunNotFound, "no run "+strconv.Quote(id)+" on this server: it never ran here, its journal is no longer kept, or another caller started it", map[string]string{"run_id": id})
	who := s.identity(ctx)
	s.liveMu.Lock()
	ss := s.live[id]
	s.liveMu.Unlock()
	if ss != nil {
		if ss.owner != "" && ss.owner != who {
			return runRef{}, notFound
		}
		return runRef{ss: ss}, nil
	}
	rec, err := s.store.GetRun(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return runRef{}, notFound
	case err != nil:
		return runRef{}, storeStatus(err)
	case rec.Owner != "" && rec.Owner != who:
		return runRef{}, notFound
	}
	return runRef{rec: rec}, nil
}

// storeStatus is the status of an RPC the store failed.
func storeStatus(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return contextError(err)
	}
	return statusError(Unavailable, reasonStoreUnavailable, "the server's store failed: "+err.Error()+"; retry", nil)
}

// olderFrames reads a run's frames from the store: what its journal no longer keeps in
// memory.
func (s *Manager) olderFrames(id string) journal.Older {
	return func(ctx context.Context, after int64, max int) ([]journal.Frame, error) {
		bs, err := s.store.ReadEvents(ctx, id, after, max)
		out := make([]journal.Frame, len(bs))
		for i, b := range bs {
			out[i] = b
		}
		return out, err
	}
}

// storedJournal is the journal of a run the server does not run: every frame comes from
// the store, and while the run is not finished the store is polled for more.
func (s *Manager) storedJournal(rec store.Run) *journal.Journal {
	return journal.Followed(s.olderFrames(rec.ID), rec.LastSeq, rec.Status == store.Finished, s.follows.poll(rec.ID))
}

// attachedLocked is the attached event of a stream attaching to a live run.
func (ss *session) attachedLocked(oldest int64) *agentdv1.RunEvent {
	a := &agentdv1.Attached{
		ThreadId: ss.thread, Agent: ss.entry.Name, State: agentdv1.RunState_RUN_STATE_RUNNING,
		LastSeq: ss.seq, OldestSeq: oldest, Usage: ss.usage, RequestId: ss.reqID,
	}
	switch {
	case ss.phase == phaseEnded:
		a.State = agentdv1.RunState_RUN_STATE_FINISHED
		a.Usage = ss.result.GetUsage()
	case ss.phase == phaseParked:
		a.State = agentdv1.RunState_RUN_STATE_PARKED
		a.PendingApprovals, a.PendingClientToolCallIds = ss.parked.approvals, ss.parked.clientCalls
	default:
		a.PendingApprovals = openSlots(ss.approvals, func(id string, s *answerSlot[runtime.Decision]) *agentdv1.ApprovalRequested { return s.event })
		a.PendingClientToolCallIds = openSlots(ss.clientCalls, func(id string, _ *answerSlot[runtime.Output]) string { return id })
		if len(a.PendingApprovals)+len(a.PendingClientToolCallIds) > 0 {
			a.State = agentdv1.RunState_RUN_STATE_WAITING
		}
	}
	return &agentdv1.RunEvent{RunId: ss.runID, Time: timestamppb.New(ss.srv.now()), Kind: &agentdv1.RunEvent_Attached{Attached: a}}
}

// storedAttached is the attached event of a stream attaching to a run the server does
// not run: what the store says of it, with the usage of its last step or its end.
func (s *Manager) storedAttached(ctx context.Context, rec store.Run, oldest int64) *agentdv1.RunEvent {
	a := &agentdv1.Attached{
		ThreadId: rec.ThreadID, Agent: rec.Agent, State: agentdv1.RunState_RUN_STATE_RUNNING,
		LastSeq: rec.LastSeq, OldestSeq: oldest, RequestId: rec.RequestID,
	}
	switch rec.Status {
	case store.Finished:
		a.State = agentdv1.RunState_RUN_STATE_FINISHED
	case store.Parked:
		// Parked in a store other replicas share: its checkpoint says what it waits for.
		a.State = agentdv1.RunState_RUN_STATE_PARKED
		cp := &continuationv1.RunCheckpoint{}
		if err := proto.Unmarshal(rec.Checkpoint, cp); err == nil {
			a.PendingApprovals, a.PendingClientToolCallIds = cp.GetPendingApprovals(), cp.GetPendingClientToolCallIds()
		}
	}
	if rec.LastSeq >= oldest {
		if fs, err := s.store.ReadEvents(ctx, rec.ID, rec.LastSeq-1, 1); err == nil && len(fs) == 1 {
			if ev, err := journal.EventOf(fs[0]); err == nil {
				a.Usage = cmp.Or(ev.GetRunFinished().GetUsage(), ev.GetStepFinished().GetUsage())
			}
		}
	}
	return &agentdv1.RunEvent{RunId: rec.ID, Time: timestamppb.New(s.now()), Kind: &agentdv1.RunEvent_Attached{Attached: a}}
}

// openSlots maps the slots that still take an answer, in the order the run opened them.
func openSlots[T, R any](slots map[string]*answerSlot[T], f func(id string, s *answerSlot[T]) R) []R {
	ids := make([]string, 0, len(slots))
	for id, s := range slots {
		if !s.answered && s.closed == "" {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(slots[a].order, slots[b].order) })
	out := make([]R, len(ids))
	for i, id := range ids {
		out[i] = f(id, slots[id])
	}
	return out
}

// createRun records a run that starts in the store: its record, and the spec it was
// started with, messages aside.
// It returns the start's outcome instead when the run was started already (a resume of
// a continuation another start resumed) or when the thread's active run takes the
// start's input (on_busy STEER): nil for a new run.
func (s *Manager) createRun(ctx context.Context, ss *session, spec *agentdv1.RunSpec) (*Started, error) {
	bare := proto.CloneOf(spec)
	bare.Messages, bare.Continuation = nil, nil
	if ss.threaded != nil {
		bare.Messages = ss.threaded.input // the new input, which the thread gets at the end
	}
	b, err := proto.Marshal(bare)
	if err != nil {
		return nil, statusError(Internal, reasonInternal, "encoding the run's start: "+err.Error(), nil)
	}
	var cp []byte
	if s.gated {
		// A store that outlives the process gets what recovering the run needs from
		// the start: its history, and the RPC that started it.
		if cp, err = proto.Marshal(&continuationv1.RunCheckpoint{Messages: ss.historyMsgs, History: int64(len(ss.historyMsgs)), Rpc: rpcOf(ss.mode)}); err != nil {
			return nil, statusError(Internal, reasonInternal, "encoding the run's start: "+err.Error(), nil)
		}
	}
	if ts := ss.threaded; ts != nil && ts.created {
		err := s.store.CreateThread(ctx, store.Thread{ID: ts.id, Owner: ss.owner, Agent: ss.entry.Name})
		if err != nil {
			return nil, storeStatus(err)
		}
	}
	err = s.store.CreateRun(ctx, store.Run{
		ID: ss.runID, ThreadID: ss.thread, Exclusive: ss.threaded != nil, Owner: ss.owner, Agent: ss.entry.Name, RequestID: ss.reqID,
		Status: store.Running, Spec: b, Holder: s.cfg.Replica,
		ParentRunID: ss.lineage.parent, ParentCallID: ss.lineage.parentCall, RootRunID: ss.lineage.root, Depth: ss.lineage.depth,
	}, s.cfg.LeaseTTL)
	ss.lease = store.Lease{RunID: ss.runID, Holder: s.cfg.Replica, Epoch: 1}
	if errors.Is(err, store.ErrExists) {
		return &Started{Outcome: ResumedBefore, RunID: ss.runID}, nil
	}
	if busy, ok := errors.AsType[*store.ThreadBusyError](err); ok {
		if spec.GetOnBusy() == agentdv1.OnBusy_ON_BUSY_STEER {
			return &Started{Outcome: SteeredInto, RunID: busy.RunID, steer: &threadSteer{thread: ss.thread, input: ss.threaded.input, text: spec.GetInput()}}, nil
		}
		return nil, threadBusy(ss.thread, busy.RunID)
	}
	if err == nil && cp != nil {
		err = s.store.UpdateRun(ctx, ss.lease, store.Update{Status: store.Running, Checkpoint: cp})
	}
	if err != nil {
		return nil, storeStatus(err)
	}
	return nil, nil
}

// resumedRunID is the id of the run that resumes a continuation: the same for every
// resume of it, on any replica.
func resumedRunID(continuation []byte) string {
	sum := sha256.Sum256(continuation)
	return "run_c" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:15]))
}

// Outcome is what a start came to.
type Outcome uint8

const (
	// StartedNew is a new run (a resume's too), which the caller starts.
	StartedNew Outcome = iota
	// ResumedBefore is a resume of a continuation a run resumed already: the start
	// attaches to that run, from its first event.
	ResumedBefore
	// SteeredInto is a start on a thread whose active run takes its input (on_busy
	// STEER): the start's stream attaches to that run from the acks of its steers.
	SteeredInto
)

// Started is what a start came to (Manager.Start), which Manager.Serve or
// Manager.Execute then serves.
type Started struct {
	Outcome Outcome
	// RunID is the run the start goes to: its new run, or the run it attaches to.
	RunID string
	ss    *session         // StartedNew: the run, which Serve or Execute starts with req
	req   *runtime.Request // StartedNew
	steer *threadSteer     // SteeredInto: what the start steers into that run
}

// rpcOf names the RPC of a mode in a checkpoint.
func rpcOf(m Mode) continuationv1.Rpc {
	switch m {
	case ModeRun:
		return continuationv1.Rpc_RPC_RUN
	case ModeStart:
		return continuationv1.Rpc_RPC_START_RUN
	case ModeChild:
		return continuationv1.Rpc_RPC_CHILD
	}
	return continuationv1.Rpc_RPC_EXECUTE_RUN
}

// finishRun records in the store that a run ended, once its last frames are there, and
// adds its messages to its thread before it frees the thread.
func (s *Manager) finishRun(ss *session) {
	ss.mu.Lock()
	moved := ss.moved
	ss.mu.Unlock()
	if moved {
		return // its new holder finishes it
	}
	if err := s.writer.Flush(ss); err != nil {
		if errors.Is(err, errRunMoved) {
			return // its new holder finishes it, from what the store has
		}
		s.log.Error("the run's last events could not be stored", "run_id", ss.runID, "error", err)
	}
	if ss.threaded != nil && ss.result != nil {
		err := s.keepTrying(ss, func(ctx context.Context) error { return s.addToThread(ctx, ss) })
		if err != nil {
			s.log.Error("adding the run's messages to its thread failed", "run_id", ss.runID, "thread_id", ss.thread, "error", err)
			if s.gated && (errors.Is(err, store.ErrFenced) || journal.Transient(err)) {
				return // let go: its new holder finishes it
			}
		}
	}
	err := s.keepTrying(ss, func(ctx context.Context) error {
		return s.store.UpdateRun(ctx, ss.heldLease(), store.Update{Status: store.Finished})
	})
	if err != nil {
		s.log.Error("recording the run's end in the store failed", "run_id", ss.runID, "error", err)
	}
}

// sweep lets the store drop what retention no longer keeps, every sweepInterval until
// the server shuts down.
func (s *Manager) sweep() {
	s.sweepMu.Lock()
	stopped := s.sweepStopped
	s.sweepMu.Unlock()
	if stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
	now := s.now()
	runs, threads, err := s.store.Sweep(ctx, now.Add(-s.cfg.RunRetention), now.Add(-s.cfg.ThreadRetention))
	cancel()
	switch {
	case err != nil:
		s.log.Warn("sweeping the store failed", "error", err)
	case runs+threads > 0:
		s.log.Debug("swept the store", "runs", runs, "threads", threads)
	}
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	if !s.sweepStopped {
		s.sweeper = time.AfterFunc(sweepInterval, s.sweep)
	}
}

// sweepInterval is how often the store is swept.
const sweepInterval = 5 * time.Minute
