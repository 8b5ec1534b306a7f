package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// A run whose starting stream went away (ON_DISCONNECT_CONTINUE) goes on until it waits
// for a client, and then, when no Run stream that can answer is attached, parks: the
// runtime ends the step it waits in (AWAITING_INPUT), and instead of run_finished the
// session writes a checkpoint to the store (the transcript, the sealed continuation,
// what the run waits for) and lets go of its goroutine, its admission and everything
// heavy. What stays in memory is the parked session itself: its journal (emptied, for
// the streams attached to it), its identity, and what attached says of it.
//
// Any input for it (SendRunInput) and any Run stream attaching to it wakes it: the
// session plans a resume from the checkpoint, as a client resuming a continuation would,
// and runs it on a new goroutine as the same run, its seq going on, its run_started and
// the re-announced step and approvals left out of the journal, which has them. A run
// parked for Config.ParkTimeout ends EXPIRED.

// errParked is what execute returns for a run that parked in the store.
var errParked = errors.New("the run parked")

// parkedRun is what a parked run keeps in memory.
type parkedRun struct {
	approvals    []*agentdv1.ApprovalRequested
	clientCalls  []string
	continuation []byte
	at           time.Time
	expiry       *time.Timer // the park timeout
	// approvalsDue wakes the run when its approvals expire (approval_timeout), so that
	// they expire as they would have had it waited live; nil when none expires.
	approvalsDue *time.Timer
	// stopBeat stops journaling go_away for the parked run (keepAlive).
	stopBeat func()
	// mu guards the three timers, which parkTimers sets as stop may read them.
	mu sync.Mutex
}

// stop stops the parked run's timers, those started so far.
func (p *parkedRun) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expiry != nil {
		p.expiry.Stop()
	}
	if p.approvalsDue != nil {
		p.approvalsDue.Stop()
	}
	if p.stopBeat != nil {
		p.stopBeat()
	}
}

// wakeFilter is what a woken run's runtime reports again that its journal has.
type wakeFilter struct {
	stepID    string
	approvals map[string]bool
}

// canParkLocked reports whether a wait for the client parks the run in the store: a
// Run run whose client went away (not half-closed), with no Run stream attached to
// answer.
func (ss *session) canParkLocked() bool {
	if ss.mode == ModeChild {
		return ss.answerers == 0 && ss.treeParksLocked()
	}
	return ss.mode == ModeRun && ss.detach && ss.answerers == 0 && !ss.inputDone
}

// treeParksLocked reports whether a child's wait parks it, its tree with it: when no
// Run stream that can answer is attached to its root, and the store is this process's
// alone (children.go). Called with the child's mu held; the root's is taken under it.
func (ss *session) treeParksLocked() bool {
	root := ss.tree
	if root == nil || ss.srv.shared {
		return false
	}
	root.mu.Lock()
	defer root.mu.Unlock()
	return root.rootParksLocked()
}

// rootParksLocked reports whether the tree below ss, a root, parks when a run of it
// waits for a client: a Run run that outlives its stream, with no Run stream attached
// that can answer. A root's client that half-closed answers nothing more either: where
// the root's own wait then ends it AWAITING_INPUT with its continuation, a child's parks,
// and SendRunInput answers it.
func (ss *session) rootParksLocked() bool {
	return ss.mode == ModeRun && ss.detach && ss.answerers == 0
}

// canParkAttachedLocked reports whether a wait for the client parks the run after
// ParkAfter, a stream that can answer attached or not.
func (ss *session) canParkAttachedLocked() bool {
	return ss.mode == ModeRun && ss.detach && !ss.inputDone && ss.srv.cfg.ParkAfter > 0
}

// startParkingLocked records that the run parks: input that comes meanwhile waits for
// the park to be over, and then wakes the run (readyLocked).
func (ss *session) startParkingLocked() {
	ss.setPhaseLocked(phaseParking)
	if ss.parkDone == nil {
		ss.parkDone = make(chan struct{})
	}
}

// endParkingLocked records that a park in progress is over, the run parked or not.
func (ss *session) endParkingLocked() {
	if ss.phase == phaseParking {
		ss.setPhaseLocked(phaseRunning)
	}
	if ss.parkDone != nil {
		close(ss.parkDone)
		ss.parkDone = nil
	}
}

// readyLocked makes sure the run takes input now: it waits out a park in progress, and
// wakes a parked run. An answer given meanwhile would go to a run that no longer waits
// for it. Called, and returns, with mu held; it lets go of mu while it waits.
//
// A woken run can park again before mu is taken back (its wait parks after ParkAfter,
// a stream attached or not), and then has no slot for the input: it is woken again, up
// to wakeTries times, before the input is refused.
func (ss *session) readyLocked() {
	if ss.ready != nil {
		ch := ss.ready
		ss.mu.Unlock()
		<-ch
		ss.mu.Lock()
	}
	for try := 0; ; try++ {
		for ss.parkDone != nil {
			ch := ss.parkDone
			ss.mu.Unlock()
			<-ch
			ss.mu.Lock()
		}
		if ss.phase != phaseParked {
			return
		}
		if try == wakeTries {
			ss.wakeErr = errParkedAgain
			return
		}
		ctx := ss.wakeCtx
		ss.mu.Unlock()
		err := ss.srv.wake(ctx, ss)
		if err != nil {
			ss.srv.log.Warn("waking a parked run for its input failed", "run_id", ss.runID, "error", err)
		}
		ss.mu.Lock()
		if ss.wakeErr = err; err != nil {
			return
		}
	}
}

// wakeTries bounds how often readyLocked wakes a run that parks again before its input
// reaches it.
const wakeTries = 3

// errParkedAgain is why an input is refused whose run parked again each time it was
// woken for it.
var errParkedAgain = errors.New("it parked again each time it was woken, before the input reached it")

// addAnswerer counts a Run stream attached that can answer the run.
func (ss *session) addAnswerer() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.answerers++
	if ss.nobody == nil {
		ss.nobody = make(chan struct{})
	}
}

// dropAnswerer uncounts one: with none left, what waits for the client parks the run.
func (ss *session) dropAnswerer() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.answerers--
	if ss.answerers == 0 && ss.nobody != nil {
		close(ss.nobody)
		ss.nobody = nil
	}
}

// park writes a run that waits for a client to the store and lets it go: fin is the
// runtime's end of the step it waits in. It returns an error when the store would not
// take the run: the run then ends AWAITING_INPUT with its continuation, as it would
// have before runs outlived their streams.
func (ss *session) park(fin *runtime.RunFinished) error {
	s := ss.srv
	rf := ss.finished(fin)
	p := &parkedRun{clientCalls: rf.GetPendingClientToolCallIds(), continuation: rf.GetContinuation(), at: s.now()}
	ss.mu.Lock()
	for _, a := range rf.GetPendingApprovals() {
		// As the client was told of it, when it was.
		if slot := ss.approvals[a.GetApprovalId()]; slot != nil && slot.event != nil {
			a = slot.event
		}
		p.approvals = append(p.approvals, a)
	}
	history, seq := ss.historyMsgs, ss.seq
	ss.mu.Unlock()
	if len(p.continuation) == 0 {
		return errors.New("no continuation was sealed")
	}
	cp := &continuationv1.RunCheckpoint{
		Seq: seq, Messages: append(append([]*agentdv1.Message(nil), history...), rf.GetNewMessages()...), History: int64(len(history)),
		Continuation: p.continuation, Usage: rf.GetUsage(), ParkedAt: timestamppb.New(p.at),
		PendingApprovals: p.approvals, PendingClientToolCallIds: p.clientCalls, Rpc: rpcOf(ss.mode),
	}
	b, err := proto.Marshal(cp)
	if err != nil {
		return err
	}
	// A run handed over on drain is let go of as soon as it parks, and refusing it would
	// end it SHUTDOWN instead of going on elsewhere: no cap applies to it.
	if !ss.handOver {
		if err := s.holdPark(ss, int64(len(b)), false); err != nil {
			return err
		}
	}
	stored := false
	defer func() {
		if !stored {
			ss.mu.Lock()
			ss.dropParkLocked()
			ss.mu.Unlock()
		}
	}()
	if err := s.writer.Flush(ss); err != nil {
		return err
	}
	// A parked run is held by no replica: whichever an input for it reaches takes it up,
	// or, when its first approval expires or its park times out (WakeAt), any.
	wakeAt := p.at.Add(s.cfg.ParkTimeout)
	for _, a := range p.approvals {
		if exp := a.GetExpiresAt(); exp != nil && exp.AsTime().Before(wakeAt) {
			wakeAt = exp.AsTime()
		}
	}
	if ss.handOver {
		wakeAt = p.at // drained: another replica takes it up at once
	}
	err = s.keepTrying(ss, func(ctx context.Context) error {
		return s.store.UpdateRun(ctx, ss.heldLease(), store.Update{Status: store.Parked, Checkpoint: b, Release: true, WakeAt: wakeAt})
	})
	if err != nil {
		return err
	}
	stored = true
	ss.mu.Lock()
	ss.toPark, ss.parkedNew, ss.parkedUsage = p, rf.GetNewMessages(), rf.GetUsage()
	ss.mu.Unlock()
	return nil
}

// publishPark makes the park that park prepared the run's state, once the stretch that
// parked has unwound (its runtime returned, its admission let go): only then may an
// input wake the run, so that two stretches never run at once.
func (ss *session) publishPark() {
	s := ss.srv
	ss.mu.Lock()
	p := ss.toPark
	ss.toPark = nil
	ss.setPhaseLocked(phaseParked)
	ss.parked, ss.woken, ss.approvalDue = p, nil, nil
	ss.priorNew, ss.priorUsage = ss.parkedNew, ss.parkedUsage
	// Everything heavy goes: the store has what waking needs.
	ss.tools, ss.transcript, ss.history, ss.historyMsgs = runTools{}, nil, nil, nil
	ss.approvals, ss.clientCalls = map[string]*answerSlot[runtime.Decision]{}, map[string]*answerSlot[runtime.Output]{}
	ss.preDecisions, ss.preResults = nil, nil
	ss.journal.Release()
	ss.endParkingLocked()
	ss.mu.Unlock()
	if s.shared {
		// Nothing of it stays here: whichever replica an input for it reaches takes it
		// up, and any does when it is due (WakeAt).
		s.letGo(ss, errRunMoved)
		s.log.Info("run parked in the shared store: it waits for a client with nothing running", "run_id", ss.runID, "approvals", len(p.approvals), "client_tool_calls", len(p.clientCalls), "handed_over", ss.handOver)
		return
	}
	s.parkTimers(ss, p, s.cfg.ParkTimeout)
	s.log.Info("run parked: it waits for a client with nothing running", "run_id", ss.runID, "approvals", len(p.approvals), "client_tool_calls", len(p.clientCalls), "expires_in", s.cfg.ParkTimeout.String())
}

// parkTimers starts a parked run's timers: its end after left, its approvals' expiry,
// go_away when the server drains. A run woken in the meantime has them stopped.
func (s *Manager) parkTimers(ss *session, p *parkedRun, left time.Duration) {
	expiry := time.AfterFunc(left, func() { s.expire(ss) })
	due := s.wakeWhenDue(ss, p.approvals)
	beat := ss.keepAlive()
	p.mu.Lock()
	p.expiry, p.approvalsDue, p.stopBeat = expiry, due, beat
	p.mu.Unlock()
	ss.mu.Lock()
	woken := ss.parked != p
	ss.mu.Unlock()
	if woken {
		p.stop()
	}
}

// wakeWhenDue returns a timer that wakes a parked run when the first of its approvals
// expires, or nil when none does.
func (s *Manager) wakeWhenDue(ss *session, approvals []*agentdv1.ApprovalRequested) *time.Timer {
	var due time.Time
	for _, a := range approvals {
		if exp := a.GetExpiresAt(); exp != nil && (due.IsZero() || exp.AsTime().Before(due)) {
			due = exp.AsTime()
		}
	}
	if due.IsZero() {
		return nil
	}
	return time.AfterFunc(max(due.Sub(s.now()), 0), func() {
		ss.mu.Lock()
		ctx := ss.wakeCtx
		ss.mu.Unlock()
		if err := s.wake(ctx, ss); err != nil {
			s.log.Warn("waking a parked run whose approval expired failed", "run_id", ss.runID, "error", err)
		}
	})
}

// wake takes a parked run up again, on ctx's behalf (the RPC that brings its input or
// attaches to it: its hooks and caller are the woken run's). It returns at once for a
// run that is not parked. The caller counts as an answerer (addAnswerer) before it
// wakes the run, so that the run waits for what it brings instead of parking again.
func (s *Manager) wake(ctx context.Context, ss *session) error {
	ss.wakeMu.Lock()
	defer ss.wakeMu.Unlock()
	ss.mu.Lock()
	p, moved := ss.parked, ss.moved
	ss.mu.Unlock()
	if moved {
		// This server let the run go (it parked in a shared store, or another replica
		// took it): it runs it no more, whatever still holds this session.
		return movedStatus(ss.journal.Last())
	}
	if p == nil {
		return nil
	}
	// The run is nobody's while parked: this server claims it before it runs it again.
	rec, err := s.store.Claim(ctx, ss.runID, s.cfg.Replica, s.cfg.LeaseTTL, false)
	if err == nil && s.shared && rec.LastSeq != ss.journal.Last() {
		// Another replica ran it meanwhile: this server's is stale. Without replicas
		// sharing the store there is no other: the journal here is the run's.
		err = store.ErrHeld
	}
	if errors.Is(err, store.ErrHeld) || errors.Is(err, store.ErrFinished) {
		// Another replica took it up, for an input that reached it.
		s.lostRun(ss)
		return movedStatus(ss.journal.Last())
	}
	if err != nil {
		return storeStatus(err)
	}
	lease := store.Lease{RunID: ss.runID, Holder: s.cfg.Replica, Epoch: rec.Epoch}
	ss.mu.Lock()
	ss.lease = lease
	ss.mu.Unlock()
	// Running again: should this server be lost, another takes the run up.
	if err := s.store.UpdateRun(ctx, lease, store.Update{Status: store.Running}); err != nil {
		return storeStatus(err)
	}
	spec, cp := &agentdv1.RunSpec{}, &continuationv1.RunCheckpoint{}
	if err := errors.Join(proto.Unmarshal(rec.Spec, spec), proto.Unmarshal(rec.Checkpoint, cp)); err != nil {
		return statusError(Internal, reasonInternal, "the parked run's checkpoint does not decode: "+err.Error(), nil)
	}
	ct, err := s.verifyContinuation(cp.GetContinuation())
	if err != nil {
		return statusError(Internal, reasonInternal, "the parked run's continuation does not open: "+err.Error(), nil)
	}
	spec.Messages, spec.Continuation, spec.Input = cp.GetMessages(), cp.GetContinuation(), ""
	filter := &wakeFilter{stepID: ct.Pending.StepID, approvals: map[string]bool{}}
	if err := s.restart(ctx, ss, spec, ct, cp, filter, p); err != nil {
		return err
	}
	s.log.Info("parked run woken", "run_id", ss.runID, "parked_for", s.now().Sub(p.at).String())
	return nil
}

// restart runs the next stretch of a run the server keeps with nothing of it running:
// a parked run that wakes (p is what it waits for), or one a stopped process left. spec
// is the start to plan it from: the run's own, with the checkpoint's transcript and
// continuation (ct, nil to start over); filter is what the runtime will report again
// that the journal has.
func (s *Manager) restart(ctx context.Context, ss *session, spec *agentdv1.RunSpec, ct *opened, cp *continuationv1.RunCheckpoint, filter *wakeFilter, p *parkedRun) error {
	spec.ThreadId = ss.thread
	spec.History, spec.OnBusy, spec.Decisions, spec.ToolResults = agentdv1.History_HISTORY_UNSPECIFIED, agentdv1.OnBusy_ON_BUSY_UNSPECIFIED, nil, nil
	plan, err := planStart(ctx, startInput{spec: spec, ct: ct, agent: ss.entry, limits: &s.cfg, mode: ss.mode})
	if err != nil {
		return err
	}
	caller := ""
	if s.cfg.Caller != nil {
		caller = s.cfg.Caller(ctx)
	}
	counted, err := s.admit(caller)
	if err != nil {
		return err
	}
	hist := min(int(cp.GetHistory()), len(cp.GetMessages()))
	ss.mu.Lock()
	ss.approvalDue = map[string]time.Time{}
	if p != nil {
		defer p.stop() // once mu is let go: keepAlive's go_away takes it
		for _, a := range p.approvals {
			if exp := a.GetExpiresAt(); exp != nil {
				ss.approvalDue[a.GetApprovalId()] = exp.AsTime()
			}
		}
	}
	ss.setPhaseLocked(phaseRunning)
	ss.parked = nil
	ss.dropParkLocked()
	if ct != nil {
		// The continuation's, and those a run taken up found in its journal after it.
		grants := slices.Clone(ct.Grants)
		for _, g := range ss.grants {
			if !slices.ContainsFunc(grants, func(h *agentdv1.Grant) bool { return h.GetGrantId() == g.GetGrantId() }) {
				grants = append(grants, g)
			}
		}
		ss.grants = grants
	}
	ss.wakeCtx = context.WithoutCancel(ctx)
	ss.caller, ss.callerName = counted, caller
	ss.policy, ss.tools, ss.transcript, ss.history = plan.policy, plan.tools, plan.transcript, plan.history
	ss.historyMsgs, ss.priorNew, ss.priorUsage, ss.newSoFar = cp.GetMessages()[:hist], cp.GetMessages()[hist:], cp.GetUsage(), nil
	ss.preDecisions, ss.preResults, ss.preScopes = plan.preDecisions, plan.preResults, plan.preScopes
	ss.setInbox(&s.cfg, plan.steers, plan.req.Resume)
	ss.done = make(chan struct{})
	ss.woken = filter
	if p != nil {
		for i, a := range p.approvals {
			slot := newAnswerSlot[runtime.Decision](a.GetToolName(), a.GetArgumentsJson(), i)
			slot.event = a
			ss.approvals[a.GetApprovalId()] = slot
			filter.approvals[a.GetApprovalId()] = true
		}
		for i, id := range p.clientCalls {
			ss.clientCalls[id] = newAnswerSlot[runtime.Output]("", "", i)
		}
	}
	req := ss.request(plan, caller)
	if hs := hooks.FromContext(ctx); len(hs) > 0 {
		req.Hooks = runtime.Chain(s.log, hs...)
	}
	runCtx, links := s.traceContext(context.WithoutCancel(ctx))
	req.SpanLinks = links
	var cancel context.CancelCauseFunc
	ss.ctx, cancel = context.WithCancelCause(runCtx)
	ss.cancel = cancel
	ss.stopAfter = context.AfterFunc(s.stopRuns, func() { cancel(context.Cause(s.stopRuns)) })
	ss.mu.Unlock()
	ss.start(req)
	return nil
}

// expire ends a run that stayed parked for the park timeout: its approvals expire, its
// calls are cancelled, and run_finished says EXPIRED, with the run's messages and a
// continuation that still resumes it while it has not expired itself.
func (s *Manager) expire(ss *session) {
	ss.wakeMu.Lock()
	defer ss.wakeMu.Unlock()
	ss.mu.Lock()
	p := ss.parked
	ss.mu.Unlock()
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
	rec, err := s.store.Claim(ctx, ss.runID, s.cfg.Replica, s.cfg.LeaseTTL, false)
	cancel()
	if err == nil && rec.LastSeq != ss.journal.Last() {
		err = store.ErrHeld
	}
	if err != nil {
		if errors.Is(err, store.ErrHeld) || errors.Is(err, store.ErrFinished) {
			s.lostRun(ss) // another replica has it
			return
		}
		s.log.Warn("a parked run's park timed out, but claiming it to end it failed: the next look tries again", "run_id", ss.runID, "error", err)
		p.mu.Lock()
		p.expiry = time.AfterFunc(takeoverInterval, func() { s.expire(ss) })
		p.mu.Unlock()
		return
	}
	ss.mu.Lock()
	ss.lease = store.Lease{RunID: ss.runID, Holder: s.cfg.Replica, Epoch: rec.Epoch}
	if ss.parked != p {
		ss.mu.Unlock()
		return
	}
	ss.parked = nil
	ss.dropParkLocked()
	defer p.stop() // once mu is let go: keepAlive's go_away takes it
	var cancelled []string
	for _, a := range p.approvals {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
			ApprovalId: a.GetApprovalId(), ToolCallId: a.GetToolCallId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED,
			DecidedBy: agentdv1.DecidedBy_DECIDED_BY_TIMEOUT, ArgumentsJson: a.GetArgumentsJson(), Reason: "the run stayed parked for the server's park timeout",
		}}})
		cancelled = append(cancelled, a.GetToolCallId())
	}
	cancelled = append(cancelled, p.clientCalls...)
	if len(cancelled) > 0 {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallsCancelled{ToolCallsCancelled: &agentdv1.ToolCallsCancelled{
			ToolCallIds: cancelled, Reason: "the run stayed parked for the server's park timeout",
		}}})
	}
	rf := &agentdv1.RunFinished{
		Reason: agentdv1.RunEndReason_RUN_END_REASON_EXPIRED,
		Error: &agentdv1.RunError{Code: int32(DeadlineExceeded), Reason: reasonParkExpired,
			Message: wire.ProtoString(fmt.Sprintf("the run waited, parked, for %s without the input it needed", s.cfg.ParkTimeout))},
		NewMessages: ss.priorNew, Usage: ss.priorUsage, Continuation: p.continuation,
	}
	ss.setPhaseLocked(phaseEnded)
	ss.result, ss.status = rf, runStatus(rf.GetError())
	ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunFinished{RunFinished: rf}})
	ss.mu.Unlock()
	s.log.Info("parked run expired", "run_id", ss.runID, "parked_for", s.now().Sub(p.at).String())
	ss.journal.Close()
	s.finishRun(ss)
	s.release(ss)
	s.wakeParent(ss)
	s.endKids(ss)
}

// addUsage returns a and b added up; either may be nil.
func addUsage(a, b *agentdv1.Usage) *agentdv1.Usage {
	if a == nil || b == nil {
		if a == nil {
			return b
		}
		return a
	}
	return &agentdv1.Usage{
		InputTokens: a.GetInputTokens() + b.GetInputTokens(), OutputTokens: a.GetOutputTokens() + b.GetOutputTokens(),
		ReasoningTokens: a.GetReasoningTokens() + b.GetReasoningTokens(), CacheReadInputTokens: a.GetCacheReadInputTokens() + b.GetCacheReadInputTokens(),
		CacheCreationInputTokens: a.GetCacheCreationInputTokens() + b.GetCacheCreationInputTokens(),
		ModelCalls:               a.GetModelCalls() + b.GetModelCalls(), ToolCalls: a.GetToolCalls() + b.GetToolCalls(),
	}
}
