package runs

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// emit takes one runtime event through the run's pipeline: every run, ExecuteRun's too,
// may have streams attached, so every event goes to the journal.
//
//	observe   what the session must know of it (observe), and whether a woken run
//	          reports it again (rereported): then it goes no further
//	delta     a delta merges into the journal's open tail, unconverted (sendDelta)
//	convert   the wire's event (wire.EventToProto)
//	decorate  what the run adds to it: grants and scopes, the request id, usage across
//	          parks, the transcript's digest (decorate)
//	journal   numbered, journaled, and what must be durable first is (journalEvent)
func (ss *session) emit(ev runtime.Event) error {
	if sc, ok := ev.(*runtime.StepCalls); ok {
		// Nothing goes to clients: a store on disk keeps where the step's calls start.
		if ss.srv.gated {
			ss.storeStepCalls(sc)
		}
		return nil
	}
	ss.observe(ev)
	if ss.rereported(ev) {
		return nil
	}
	if handled, err := ss.sendDelta(ev); handled {
		return err
	}
	pe := wire.EventToProto(ev)
	ss.decorate(ev, pe)
	return ss.journalEvent(ev, pe)
}

// decorate adds to pe, the wire's event of ev, what the run knows and the runtime does
// not: the scopes an approval may be granted for, the grant that decided one, the
// request id, the usage of the stretches before a park; a step's new messages join the
// transcript the run's checkpoints are digested from.
func (ss *session) decorate(ev runtime.Event, pe *agentdv1.RunEvent) {
	switch e := ev.(type) {
	case *runtime.ApprovalRequested:
		ar := pe.GetApprovalRequested()
		ar.AllowedScopes, ar.AnyArguments = ss.allowedScopes(e.ToolName, e.AutoApprovable)
		ss.mu.Lock()
		if slot := ss.approvals[e.ApprovalID]; slot != nil {
			slot.event = ar
		}
		ss.mu.Unlock()
	case *runtime.ApprovalResolved:
		ss.mu.Lock()
		r := pe.GetApprovalResolved()
		r.GrantId, r.Scope = ss.grantOf[e.ApprovalID], ss.scopeOf[e.ApprovalID]
		ss.mu.Unlock()
	case *runtime.RunStarted:
		rs := pe.GetRunStarted()
		rs.RequestId = ss.reqID
		rs.ParentRunId, rs.RootRunId, rs.ParentToolCallId, rs.Depth = ss.lineage.parent, ss.lineage.root, ss.lineage.parentCall, int32(ss.lineage.depth)
	case *runtime.ToolExecutionStarted:
		if ss.entry.subagent(e.Name) {
			pe.GetToolExecutionStarted().ChildRunId = childRunID(ss.thread, e.CallID)
		}
	case *runtime.StepFinished:
		sf := pe.GetStepFinished()
		for _, m := range sf.GetNewMessages() {
			ss.transcript.Add(m)
		}
		if ss.srv.gated {
			ss.newSoFar = append(ss.newSoFar, sf.GetNewMessages()...)
		}
		ss.mu.Lock()
		sf.Usage = addUsage(sf.GetUsage(), ss.priorUsage)
		ss.usage = sf.GetUsage()
		ss.mu.Unlock()
	}
}

// journalEvent journals pe, the event of ev, and holds the run back until what must be
// durable before the run goes on is: a step's end with its checkpoint, and a tool's
// start, which a store on disk must have before the tool runs.
func (ss *session) journalEvent(ev runtime.Event, pe *agentdv1.RunEvent) error {
	switch e := ev.(type) {
	case *runtime.RunStarted:
		if err := ss.sendEvent(pe); err != nil {
			return err
		}
		if ss.started != nil {
			ss.started()
		}
		return nil
	case *runtime.StepFinished:
		return ss.finishStep(e, pe)
	case *runtime.ToolExecutionStarted:
		if err := ss.sendEvent(pe); err != nil || !ss.srv.gated {
			return err
		}
		// The durable record of the call's start: in the store before the tool runs, so
		// that a replica taking the run up never runs it twice unknowingly. A store that
		// will not take it stops the run before the tool runs.
		return ss.srv.writer.Flush(ss)
	}
	return ss.sendEvent(pe)
}

// sendDelta journals a delta, merging it into the journal's open tail (the delta of its
// block that no stream has taken yet) when it can, before any wire event is made of it:
// most deltas of a client that is behind go no further. It reports whether ev was a delta
// it handled, and then what sendEvent would have returned.
func (ss *session) sendDelta(ev runtime.Event) (bool, error) {
	kind, id, text, ok := runtimeDelta(ev)
	if !ok || ss.srv.cfg.ExactDeltas || !utf8.ValidString(text) {
		return false, nil
	}
	ss.mu.Lock()
	var err error
	switch {
	case ss.moved:
		err = errRunMoved
	case !ss.journal.MergeDelta(kind, id, text):
		// The journal's new open tail, marshaled when first taken (journal.openDelta).
		pe := wire.EventToProto(ev)
		ss.stampLocked(pe)
		ss.journal.OpenDelta(pe, kind, id, text)
		ss.srv.writer.Mark(ss)
	}
	if err == nil && ss.forward != nil {
		// The delta as its own event, of the frame it joined.
		pe := wire.EventToProto(ev)
		pe.Seq, pe.RunId, pe.Time = ss.seq, ss.runID, timestamppb.New(ss.srv.now())
		ss.forward(pe)
	}
	primary, ctx := ss.primary, ss.ctx
	ss.mu.Unlock()
	if err == nil && primary != nil {
		err = primary.Wait(ctx)
	}
	return true, err
}

// finishStep journals step_finished and, right behind it, the checkpoint the run can
// resume from after the step, in one go: the journal writer stores both or neither, so
// that a journal holding a step's end holds the continuation after it.
func (ss *session) finishStep(e *runtime.StepFinished, pe *agentdv1.RunEvent) error {
	b := ss.checkpoint()
	ss.mu.Lock()
	err := ss.sendLocked(pe)
	if err == nil && b != nil {
		err = ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_Checkpoint{Checkpoint: &agentdv1.Checkpoint{Continuation: b, StepId: e.StepID}}})
	}
	primary, ctx := ss.primary, ss.ctx
	ss.mu.Unlock()
	if err == nil && primary != nil {
		err = primary.Wait(ctx)
	}
	if err != nil {
		return err
	}
	if ss.srv.gated && b != nil {
		ss.mu.Lock()
		added := ss.newSoFar
		ss.mu.Unlock()
		ss.storeCheckpoint(b, nil, added)
	}
	return nil
}

// rereported reports whether ev is what a woken run's runtime reports again, and its
// journal has: the run's start, the step it parked in, the approvals it asked then.
func (ss *session) rereported(ev runtime.Event) bool {
	w := ss.woken
	if w == nil {
		return false
	}
	switch e := ev.(type) {
	case *runtime.RunStarted:
		return true
	case *runtime.StepStarted:
		return e.StepID == w.stepID
	case *runtime.ApprovalRequested:
		return w.approvals[e.ApprovalID]
	}
	return false
}

// observe records what the session must know of an event before it goes out: the run's
// trace id, the step a checkpoint resumes after, and the approvals and client tool calls
// the client may answer, which take an answer from the moment their event is queued.
func (ss *session) observe(ev runtime.Event) {
	switch e := ev.(type) {
	case *runtime.RunStarted:
		ss.traceID = e.TraceID
	case *runtime.StepStarted:
		ss.mu.Lock()
		ss.step = *e
		ss.mu.Unlock()
	case *runtime.ApprovalRequested:
		ss.mu.Lock()
		// A woken run asks again what it parked on: the slot, and any answer in it,
		// stays.
		if ss.approvals[e.ApprovalID] == nil {
			ss.approvals[e.ApprovalID] = newAnswerSlot[runtime.Decision](e.ToolName, e.Arguments, len(ss.approvals))
		}
		ss.mu.Unlock()
	case *runtime.SteerApplied:
		// Applied or dropped, in the order the steers came.
		ss.mu.Lock()
		if len(ss.steers) > 0 {
			ss.steers = ss.steers[1:]
		}
		ss.mu.Unlock()
	case *runtime.ApprovalResolved:
		// However the run resolved it (an interrupting steer cancels approvals it never
		// asked the client about), the approval takes no decision from now on.
		ss.mu.Lock()
		ss.approvals[e.ApprovalID].closeLocked(resolvedWhy(e))
		ss.mu.Unlock()
	case *runtime.ToolExecutionStarted:
		if e.Executor == runtime.ExecutorClient {
			ss.mu.Lock()
			if _, pre := ss.preResults[e.CallID]; !pre && ss.clientCalls[e.CallID] == nil {
				ss.clientCalls[e.CallID] = newAnswerSlot[runtime.Output]("", "", len(ss.clientCalls))
			}
			ss.mu.Unlock()
		}
	}
}

// resolvedWhy says in words how the run resolved an approval.
func resolvedWhy(e *runtime.ApprovalResolved) string {
	var why string
	switch e.Outcome {
	case runtime.OutcomeExpired:
		why = "it expired"
	case runtime.OutcomeCancelled:
		why = "it was cancelled"
	default:
		why = "it was " + e.Outcome.String() + " by " + e.DecidedBy.String()
	}
	if e.Reason != "" {
		why += " (" + e.Reason + ")"
	}
	return why
}

// checkpoint seals a continuation from which the run can resume after the step that
// just finished; nil when sealing failed.
func (ss *session) checkpoint() []byte {
	ss.mu.Lock()
	st := ss.step
	steers := slices.Clone(ss.steers)
	ss.mu.Unlock()
	b, err := ss.seal(ss.transcript.Sum(), &runtime.Pending{Step: st.Index + 1, Turn: st.Turn, StepInTurn: st.IndexInTurn + 1, Steers: steers})
	if err != nil {
		ss.srv.log.Error("sealing a checkpoint failed", "run_id", ss.runID, "error", err)
		return nil
	}
	return b
}

// storeStepCalls writes to a store on disk where a step's calls start, before the first
// is prepared: a replica that takes the run up after this process is lost goes on with
// them (what the journal says of each: asked, decided, started, done) instead of asking
// the model again. The journal is stored up to here first, so that the checkpoint's seq
// is in the store.
func (ss *session) storeStepCalls(sc *runtime.StepCalls) {
	added := wire.MessagesToProto(sc.NewMessages, wire.Options{})
	digest, err := ss.history.DigestWith(added)
	// The steers that came since the step began wait for the next: the checkpoint
	// carries them.
	p := *sc.Pending
	ss.mu.Lock()
	p.Steers = slices.Clone(ss.steers)
	ss.mu.Unlock()
	var b []byte
	if err == nil {
		b, err = ss.seal(digest, &p)
	}
	if err != nil {
		ss.srv.log.Error("sealing a checkpoint failed", "run_id", ss.runID, "error", err)
		return
	}
	ss.mu.Lock()
	usage := addUsage(wire.UsageToProto(sc.Usage), ss.priorUsage)
	ss.mu.Unlock()
	ss.storeCheckpoint(b, usage, added)
}

// storeCheckpoint writes to a store on disk what recovering the run from a checkpoint
// needs, should this process stop: the transcript so far (the stretch's new messages
// being added), the continuation, the usage (nil: as of the last step). The journal is
// stored up to the checkpoint first.
func (ss *session) storeCheckpoint(continuation []byte, usage *agentdv1.Usage, added []*agentdv1.Message) {
	if err := ss.srv.writer.Flush(ss); err != nil {
		ss.srv.log.Warn("storing the run's events failed: its checkpoint is not stored", "run_id", ss.runID, "error", err)
		return
	}
	ss.mu.Lock()
	cp := &continuationv1.RunCheckpoint{
		Seq: ss.seq, History: int64(len(ss.historyMsgs)), Continuation: continuation, Usage: cmp.Or(usage, ss.usage), Rpc: rpcOf(ss.mode),
		Messages:     append(append(append([]*agentdv1.Message(nil), ss.historyMsgs...), ss.priorNew...), added...),
		StepMessages: int64(len(ss.historyMsgs) + len(ss.priorNew) + len(ss.newSoFar)),
		StepInput:    int64(max(len(added)-len(ss.newSoFar), 0)),
	}
	ss.mu.Unlock()
	b, err := proto.Marshal(cp)
	if err == nil {
		// Tried while the lease lasts, then the run is let go: its step's calls must not
		// run unless a replica taking it up would know of them.
		err = ss.srv.keepTrying(ss, func(ctx context.Context) error {
			return ss.srv.store.UpdateRun(ctx, ss.heldLease(), store.Update{Status: store.Running, Checkpoint: b})
		})
	}
	if err != nil && !errors.Is(err, store.ErrFenced) {
		ss.srv.log.Warn("storing the run's checkpoint failed: were this process to stop, the run would go on from an older one", "run_id", ss.runID, "error", err)
	}
}

// finished builds run_finished from the runtime's RunFinished.
func (ss *session) finished(fin *runtime.RunFinished) *agentdv1.RunFinished {
	ss.mu.Lock()
	clientCancelled := ss.clientCancelled && errors.Is(fin.Err, errClientCancel)
	ss.mu.Unlock()
	rf := &agentdv1.RunFinished{
		Reason:      wire.EndReasonToProto(fin.Reason),
		Error:       runError(fin, clientCancelled),
		NewMessages: wire.MessagesToProto(fin.NewMessages, wire.Options{}),
		Usage:       wire.UsageToProto(fin.Usage),
		FinalText:   wire.ProtoString(fin.FinalText),
		Output:      wire.OutputToProto(fin.Output),
	}
	switch {
	case fin.Reason == runtime.EndCancelled && errors.Is(fin.Err, journal.ErrClientStalled):
		rf.Reason = agentdv1.RunEndReason_RUN_END_REASON_FAILED
		rf.Error = stalledError(ss.srv.cfg.StallTimeout)
	case fin.Reason == runtime.EndCancelled && errors.Is(fin.Err, errStoreFailed):
		rf.Reason = agentdv1.RunEndReason_RUN_END_REASON_FAILED
		rf.Error = &agentdv1.RunError{Code: int32(Unavailable), Reason: reasonStoreUnavailable, Message: wire.ProtoString(fin.Err.Error()), Retryable: true}
	}
	if p := fin.Pending; p != nil {
		// The parked step's assistant message travels in Pending, not in NewMessages, so
		// the digest is the history's and NewMessages', not the running transcript's.
		digest, err := ss.history.DigestWith(rf.NewMessages)
		if err == nil {
			rf.Continuation, err = ss.seal(digest, p)
		}
		if err != nil {
			ss.srv.log.Error("sealing a continuation failed", "run_id", ss.runID, "error", err)
		}
		for _, c := range p.Calls {
			switch {
			case c.State == runtime.CallAwaitingApproval:
				rf.PendingApprovals = append(rf.PendingApprovals, &agentdv1.ApprovalRequested{
					ApprovalId: c.ApprovalID, ToolCallId: c.Call.ID, ToolName: c.Call.Name,
					ArgumentsJson: wire.ProtoString(c.Call.Arguments), Editable: true, Reason: c.Reason,
				})
			case c.State == runtime.CallReady && ss.tools.specs[c.Call.Name].Executor == runtime.ExecutorClient:
				rf.PendingClientToolCallIds = append(rf.PendingClientToolCallIds, c.Call.ID)
			}
		}
	}
	// A run woken from the store reports everything it did, before it parked too.
	ss.mu.Lock()
	if len(ss.priorNew) > 0 {
		rf.NewMessages = append(append([]*agentdv1.Message(nil), ss.priorNew...), rf.NewMessages...)
	}
	rf.Usage = addUsage(rf.Usage, ss.priorUsage)
	ss.mu.Unlock()
	return rf
}

// sendFinished sends run_finished, the run's last event: nothing is acked after it.
func (ss *session) sendFinished(rf *agentdv1.RunFinished) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.setPhaseLocked(phaseEnded)
	ss.treeUsageLocked(rf)
	ss.result = rf
	return ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunFinished{RunFinished: rf}})
}

// runtimeDelta is journal.DeltaOf for a runtime event, before it is made an event of the wire.
func runtimeDelta(ev runtime.Event) (kind journal.DeltaKind, id, text string, ok bool) {
	switch e := ev.(type) {
	case *runtime.TextDelta:
		return journal.TextDelta, e.MessageID, e.Delta, true
	case *runtime.ReasoningDelta:
		return journal.ReasoningDelta, e.MessageID, e.Delta, true
	case *runtime.ToolCallArgsDelta:
		return journal.ArgsDelta, e.CallID, e.Delta, true
	}
	return 0, "", "", false
}
