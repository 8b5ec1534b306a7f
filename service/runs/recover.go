package runs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/continuation"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// serverStopped says why what a stopped process left open was closed.
const serverStopped = "the server that ran it stopped"

// RecoverRuns takes up the runs a stopped process left in the store, or, with a
// shared store, starts taking up those that need a replica; Server.RecoverRuns says
// the rest.
func (s *Manager) RecoverRuns(ctx context.Context) (int, error) {
	if !s.gated {
		return 0, nil // a memory store starts empty
	}
	if s.shared {
		s.startTakeover(ctx)
		return 0, nil
	}
	recs, err := s.store.UnfinishedRuns(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		// The store is this process's alone: what it holds, the one before it held.
		rec, err := s.store.Claim(ctx, rec.ID, s.cfg.Replica, s.cfg.LeaseTTL, true)
		if err == nil {
			err = s.recoverRun(ctx, rec)
		}
		if err != nil {
			s.log.Error("recovering a run left by a stopped server failed", "run_id", rec.ID, "error", err)
			continue
		}
		n++
	}
	if n > 0 {
		s.log.Info("recovered the runs a stopped server left", "runs", n)
	}
	return n, nil
}

// recoverRun takes up one run left by a stopped process.
func (s *Manager) recoverRun(ctx context.Context, rec store.Run) error {
	spec, cp := &agentdv1.RunSpec{}, &continuationv1.RunCheckpoint{}
	if err := errors.Join(proto.Unmarshal(rec.Spec, spec), proto.Unmarshal(rec.Checkpoint, cp)); err != nil {
		return fmt.Errorf("its record does not decode: %w", err)
	}
	entry, err := s.agents.Agent(rec.Agent)
	if err == nil && (entry == nil || entry.Runtime == nil) {
		err = fmt.Errorf("%w: %q", ErrAgentNotFound, rec.Agent)
	}
	ss := s.shell(rec, entry, spec, cp)
	// Input that comes while the run is taken up waits for it to be ready.
	defer close(ss.ready)
	s.keep(ss)
	var left *leftOver
	if rec.Status == store.Running {
		var lerr error
		if left, lerr = s.readLeft(ctx, ss, cp, err); lerr != nil {
			s.release(ss)
			return lerr
		}
		if left.finished != nil {
			// It ended before its process was lost, which did not record the end.
			s.endedLeft(ss, left.finished)
			return nil
		}
		cp = left.cp
		ss.reservedCalls, ss.grants = left.seenCalls, left.grants
		if rf := left.completed(cp); rf != nil && err == nil && entry.Runtime.OutputSchema() == nil && spec.GetConfig().GetOutputSchema() == nil {
			// Its last step was its last: it ends as it would have, the model not asked
			// again. Not a typed run's: its answer is a call, never a step's text, and one
			// that ended in text failed or goes on corrected, so it runs again from its
			// checkpoint.
			ss.mu.Lock()
			ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunFinished{RunFinished: rf}})
			ss.mu.Unlock()
			s.endedLeft(ss, rf)
			return nil
		}
	}
	if err != nil {
		// Its agent is gone: nothing can take the run up.
		left.closeAll(ss, cp.GetUsage())
		return s.endLeft(ss, cp, "its agent "+rec.Agent+" is no longer served")
	}
	if rec.Status == store.Parked {
		p := &parkedRun{approvals: cp.GetPendingApprovals(), clientCalls: cp.GetPendingClientToolCallIds(), continuation: cp.GetContinuation(), at: cp.GetParkedAt().AsTime()}
		ss.mu.Lock()
		ss.setPhaseLocked(phaseParked)
		ss.parked = p
		ss.mu.Unlock()
		// Parked already: it counts against the caps, which refuse the next park instead.
		s.holdPark(ss, int64(len(rec.Checkpoint)), true)
		s.parkTimers(ss, p, max(s.cfg.ParkTimeout-s.now().Sub(p.at), 0))
		return nil
	}
	if !ss.detach {
		left.closeAll(ss, cp.GetUsage())
		return s.endLeft(ss, cp, "its client was gone with it")
	}
	var ct *opened
	if len(cp.GetContinuation()) > 0 {
		if ct, err = s.verifyContinuation(cp.GetContinuation()); err != nil {
			return fmt.Errorf("its checkpoint's continuation does not open: %w", err)
		}
		spec.Messages, spec.Continuation, spec.Input = cp.GetMessages(), cp.GetContinuation(), ""
	} else {
		// No step finished: the run starts over from its history and input.
		spec.Messages, spec.Continuation = cp.GetMessages(), nil
		if ss.threaded != nil {
			spec.Messages = append(spec.Messages, ss.threaded.input...)
		}
	}
	filter := &wakeFilter{approvals: map[string]bool{}}
	var waits *parkedRun
	if ct != nil && ct.Pending != nil && len(ct.Pending.Calls) > 0 {
		// Lost while its step's calls ran: they go on where they stood.
		filter.stepID = ct.Pending.StepID
		if err := s.storeUncut(ctx, ss, cp); err != nil {
			s.release(ss)
			return err
		}
		waits = left.takeCalls(ss, ct.Pending, entry)
	} else {
		left.closeAll(ss, cp.GetUsage())
	}
	var acks []replayedInput
	if left != nil && len(left.acks) > 0 {
		acks = s.ackedBefore(ctx, ss, left.acks, cp.GetSeq())
	}
	if len(acks) > 0 {
		// The run waits for what the lost stretch was told, rather than park for want of
		// a client (replayInputs).
		ss.addAnswerer()
	}
	if err := s.restart(ctx, ss, spec, ct, cp, filter, waits); err != nil {
		if len(acks) > 0 {
			ss.dropAnswerer()
		}
		if ct != nil {
			s.logMismatch(ss, ct, rec, cp, spec.GetMessages())
		}
		return s.endLeft(ss, cp, "it could not go on: "+err.Error())
	}
	if len(acks) > 0 {
		go s.replayInputs(ss, ss.ready, acks)
	}
	s.log.Info("run taken up from its last checkpoint", "run_id", ss.runID, "seq", cp.GetSeq(), "last_seq", rec.LastSeq)
	return nil
}

// storeUncut stores, for a run taken up in a step's calls from the checkpoint cp taken
// as they started, cp as a checkpoint of this stretch: the step's end this stretch will
// journal carries only the step's assistant message and results, not the messages the
// step began with (steers), which cp holds past its step_messages. A replica that takes
// the run up after this one reads the step's end onto all of cp's messages.
func (s *Manager) storeUncut(ctx context.Context, ss *session, cp *continuationv1.RunCheckpoint) error {
	if stepStart(cp) == len(cp.GetMessages()) {
		return nil
	}
	next := proto.CloneOf(cp)
	next.StepMessages, next.StepInput = 0, 0
	b, err := proto.Marshal(next)
	if err != nil {
		return err
	}
	if err := s.store.UpdateRun(ctx, ss.heldLease(), store.Update{Status: store.Running, Checkpoint: b}); err != nil {
		return fmt.Errorf("storing the checkpoint it goes on from: %w", err)
	}
	return nil
}

// ackedBefore reads back from the store the inputs that the lost stretch of ss acked
// (acks): their client was told they were taken, and their effect may not have been
// journaled before the process was lost (a decision acked, its approval not yet
// resolved). It returns the inputs to act on again (replayInputs): every one but a
// steer acked before the checkpoint the run goes on from (at seq from), which the
// checkpoint's transcript, or the steers it carries, hold already. An input of
// SendRunInput is known to the run from here on by its key, answered with the ack the
// lost stretch gave, so that a retry gets that ack and does not act again; its ack is
// stored as the key's answer too, where the lost stretch did not store it, for a retry
// that comes after the run has finished. An input of a Run stream is read back from
// where keepStreamInput kept it.
func (s *Manager) ackedBefore(ctx context.Context, ss *session, acks []ackedInput, from int64) []replayedInput {
	var out []replayedInput
	for _, a := range acks {
		key := a.ack.GetClientKey()
		stream := key == ""
		if stream {
			key = streamInputKey(a.ack.GetAttachmentId(), a.ack.GetClientSeq())
		}
		in, err := s.store.GetInput(ctx, ss.runID, key)
		req := &agentdv1.RunRequest{}
		if err == nil {
			err = proto.Unmarshal(in.Request, req)
		}
		if err != nil {
			s.log.Warn("reading back an input the run acked before it was taken up failed: it is not acted on again", "run_id", ss.runID, "client_key", a.ack.GetClientKey(), "client_seq", a.ack.GetClientSeq(), "error", err)
			continue
		}
		again := req.GetSteer() == nil || a.seq > from
		if stream {
			if again {
				out = append(out, replayedInput{input{seq: a.ack.GetClientSeq(), stream: a.ack.GetAttachmentId(), replay: &a}, req})
			}
			continue
		}
		var digest [sha256.Size]byte
		copy(digest[:], in.Digest)
		if in.Answer == nil {
			// The lost stretch acked it but never stored its answer: a retry that comes
			// once the run has finished here finds it in the store.
			s.keepAnswer(ss.runID, key, &agentdv1.SendRunInputResponse{Ack: a.ack, Seq: a.seq}, nil)
		}
		ss.mu.Lock()
		if ss.keyed.byKey[key] == nil {
			ss.keyed.begin(key, digest)
			ss.keyed.answered(key, a.ack, a.seq)
			if again {
				out = append(out, replayedInput{input{key: key, replay: &a}, req})
			}
		}
		ss.mu.Unlock()
	}
	return out
}

// replayedInput is an input a run acked before it was taken up, to act on again.
type replayedInput struct {
	in  input
	req *agentdv1.RunRequest
}

// replayInputs acts again, once the run taken up is ready, on the inputs the lost
// stretch acked (ackedBefore), as it did then but without a second ack: one that no
// longer applies (its approval resolved, or closed by the takeover) changes nothing.
func (s *Manager) replayInputs(ss *session, ready <-chan struct{}, replays []replayedInput) {
	defer ss.dropAnswerer()
	<-ready
	for _, r := range replays {
		ss.mu.Lock()
		if ss.phase == phaseEnded || ss.moved {
			ss.mu.Unlock()
			return
		}
		ss.actLocked(r.in, r.req)
		ss.mu.Unlock()
	}
}

// stepStart returns how many of cp's messages are the transcript as of the step end
// before it: all of them, but for a checkpoint taken as a step's calls start, whose
// last messages are the input the step began with (which that step's end repeats).
func stepStart(cp *continuationv1.RunCheckpoint) int {
	n := len(cp.GetMessages())
	switch in, at := cp.GetStepInput(), cp.GetStepMessages(); {
	case in > 0 && in <= int64(n):
		return n - int(in)
	case in == 0 && at > 0 && at <= int64(n):
		return int(at) // an earlier release's checkpoint
	}
	return n
}

// shell is the session of a run the store holds and this server does not run yet: what
// attaching to it needs, and what restarting it fills in.
func (s *Manager) shell(rec store.Run, entry *Agent, spec *agentdv1.RunSpec, cp *continuationv1.RunCheckpoint) *session {
	mode := ModeRun
	switch cp.GetRpc() {
	case continuationv1.Rpc_RPC_START_RUN:
		mode = ModeStart
	case continuationv1.Rpc_RPC_EXECUTE_RUN:
		mode = ModeExecute
	case continuationv1.Rpc_RPC_CHILD:
		mode = ModeChild
	}
	if entry == nil {
		entry = &Agent{Name: rec.Agent}
	}
	ss := s.baseSession(mode, entry, rec.ID, rec.ThreadID, rec.RequestID, spec.GetConfig().GetOnDisconnect())
	ss.ctx, ss.cancel = context.WithCancelCause(context.Background())
	ss.cancel(errors.New(serverStopped)) // until a stretch runs, input is refused
	ss.owner, ss.seq, ss.stopAfter, ss.wakeCtx = rec.Owner, rec.LastSeq, func() bool { return false }, context.Background()
	ss.lineage = lineage{parent: rec.ParentRunID, parentCall: rec.ParentCallID, root: rec.RootRunID, depth: rec.Depth}
	ss.lease = store.Lease{RunID: rec.ID, Holder: s.cfg.Replica, Epoch: rec.Epoch}
	ss.setInbox(&s.cfg, nil, nil)
	ss.phase, ss.ready = phaseTakingUp, make(chan struct{})
	if rec.Exclusive {
		ss.threaded = &threadStart{id: rec.ThreadID, input: spec.GetMessages()}
	}
	hist := min(int(cp.GetHistory()), len(cp.GetMessages()))
	ss.historyMsgs, ss.priorNew, ss.priorUsage = cp.GetMessages()[:hist], cp.GetMessages()[hist:], cp.GetUsage()
	ss.journal = journal.FromStore(s.olderFrames(rec.ID), s.gated, rec.LastSeq)
	return ss
}

// leftOver is what a run's journal holds after the checkpoint it goes on from: the
// stretch that wrote it was lost with its process.
type leftOver struct {
	// cp is the checkpoint to go on from: the store's, or a later one the journal holds
	// (a step's end whose checkpoint the store did not get).
	cp        *continuationv1.RunCheckpoint
	blocks    []leftBlock
	step      string
	calls     []string // tool calls the model made, not ended
	approvals []*agentdv1.ApprovalRequested
	resolved  map[string]*agentdv1.ApprovalResolved     // by call id
	started   map[string]*agentdv1.ToolExecutionStarted // by call id
	results   map[string]*agentdv1.ToolCallResult       // by call id
	cancelled map[string]string                         // call id → why
	// seenCalls are the ids of every call the journal started after the checkpoint.
	seenCalls []string
	// acks are the inputs the lost stretch acked, accepted (of SendRunInput, and of Run
	// streams, kept by keepStreamInput): their effect (a decision's approval_resolved, a
	// steer entering the transcript) may not have been journaled, or may be past the
	// checkpoint the run goes on from.
	acks []ackedInput
	// finished is the run's end, when the lost stretch journaled it.
	finished *agentdv1.RunFinished
	// lastStep is the last step's end, when no step started after it.
	lastStep *agentdv1.StepFinished
	// grants are the RUN grants client decisions made after the checkpoint, which it
	// does not carry.
	grants []*agentdv1.Grant
	asked  map[string]*agentdv1.ApprovalRequested // every approval asked, by id
}

type leftBlock struct {
	id   string
	role agentdv1.Role
	kind agentdv1.MessageKind
}

// readLeft reads the journal of a run left by a lost process from its checkpoint cp on.
// With agentErr set (the run cannot go on) it reads from cp all the same, to close what
// is open.
func (s *Manager) readLeft(ctx context.Context, ss *session, cp *continuationv1.RunCheckpoint, agentErr error) (*leftOver, error) {
	l := &leftOver{cp: cp, asked: map[string]*agentdv1.ApprovalRequested{}}
	l.reset()
	// A later checkpoint in the journal follows the transcript as of the last step's end.
	msgs := slices.Clone(cp.GetMessages())
	msgs = msgs[:stepStart(cp)]
	usage := cp.GetUsage()
	if seq := cp.GetSeq(); seq >= 2 {
		// A checkpoint at a step's end is its checkpoint event, which follows the step's
		// step_finished: that says whether the step was the run's last. (A checkpoint
		// taken as a step's calls start follows other events.)
		if fs, err := s.store.ReadEvents(ctx, ss.runID, seq-2, 2); err == nil && len(fs) == 2 {
			sf, err1 := journal.EventOf(fs[0])
			ck, err2 := journal.EventOf(fs[1])
			if err1 == nil && err2 == nil && ck.GetCheckpoint() != nil {
				l.lastStep = sf.GetStepFinished()
			}
		}
	}
	for cursor := cp.GetSeq(); ; {
		fs, err := s.store.ReadEvents(ctx, ss.runID, cursor, 256)
		if err != nil {
			return nil, fmt.Errorf("reading its journal: %w", err)
		}
		if len(fs) == 0 {
			break
		}
		cursor += int64(len(fs))
		for _, f := range fs {
			ev, err := journal.EventOf(f)
			if err != nil {
				return nil, fmt.Errorf("its journal does not decode: %w", err)
			}
			switch k := ev.GetKind().(type) {
			case *agentdv1.RunEvent_StepStarted:
				l.step, l.lastStep = k.StepStarted.GetStepId(), nil
			case *agentdv1.RunEvent_StepFinished:
				l.step, l.lastStep = "", k.StepFinished
				msgs = append(msgs, k.StepFinished.GetNewMessages()...)
				usage = k.StepFinished.GetUsage()
			case *agentdv1.RunEvent_Checkpoint:
				if agentErr == nil {
					// The step before it ended: the run goes on from here.
					next := proto.CloneOf(cp)
					next.Seq, next.Messages, next.Usage, next.Continuation = ev.GetSeq(), slices.Clone(msgs), usage, k.Checkpoint.GetContinuation()
					next.StepMessages, next.StepInput, next.PendingApprovals, next.PendingClientToolCallIds = 0, 0, nil, nil
					l.cp = next
					l.reset()
				}
			case *agentdv1.RunEvent_MessageStarted:
				l.blocks = append(l.blocks, leftBlock{k.MessageStarted.GetMessageId(), k.MessageStarted.GetRole(), k.MessageStarted.GetKind()})
			case *agentdv1.RunEvent_MessageFinished:
				l.blocks = slices.DeleteFunc(l.blocks, func(b leftBlock) bool { return b.id == k.MessageFinished.GetMessageId() })
			case *agentdv1.RunEvent_ToolCallStarted:
				l.calls = append(l.calls, k.ToolCallStarted.GetToolCallId())
				l.seenCalls = append(l.seenCalls, k.ToolCallStarted.GetToolCallId())
			case *agentdv1.RunEvent_RunFinished:
				l.finished = k.RunFinished
			case *agentdv1.RunEvent_InputAck:
				if a := k.InputAck; a.GetAccepted() && (a.GetClientKey() != "" || a.GetClientSeq() > 0) {
					l.acks = append(l.acks, ackedInput{a, ev.GetSeq()})
				}
			case *agentdv1.RunEvent_ToolExecutionStarted:
				l.started[k.ToolExecutionStarted.GetToolCallId()] = k.ToolExecutionStarted
			case *agentdv1.RunEvent_ToolCallResult:
				id := k.ToolCallResult.GetToolCallId()
				l.calls = slices.DeleteFunc(l.calls, func(c string) bool { return c == id })
				l.results[id] = k.ToolCallResult
			case *agentdv1.RunEvent_ToolCallsCancelled:
				for _, id := range k.ToolCallsCancelled.GetToolCallIds() {
					l.calls = slices.DeleteFunc(l.calls, func(c string) bool { return c == id })
					l.cancelled[id] = k.ToolCallsCancelled.GetReason()
				}
			case *agentdv1.RunEvent_ApprovalRequested:
				l.approvals = append(l.approvals, k.ApprovalRequested)
				l.asked[k.ApprovalRequested.GetApprovalId()] = k.ApprovalRequested
			case *agentdv1.RunEvent_ApprovalResolved:
				r := k.ApprovalResolved
				l.approvals = slices.DeleteFunc(l.approvals, func(a *agentdv1.ApprovalRequested) bool { return a.GetApprovalId() == r.GetApprovalId() })
				l.resolved[r.GetToolCallId()] = r
				if a := l.asked[r.GetApprovalId()]; a != nil && r.GetScope() == agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN && r.GetGrantId() != "" && r.GetDecidedBy() == agentdv1.DecidedBy_DECIDED_BY_CLIENT {
					g := &agentdv1.Grant{
						GrantId: r.GetGrantId(), Scope: r.GetScope(), Agent: ss.entry.Name, ToolName: a.GetToolName(), AnyArguments: a.GetAnyArguments(),
						RunId: ss.runID, ApprovalId: r.GetApprovalId(), CreatedAt: ev.GetTime(),
					}
					if !g.GetAnyArguments() {
						g.ArgumentsJson = r.GetArgumentsJson()
					}
					l.grants = append(l.grants, g)
				}
			}
		}
	}
	return l, nil
}

// completed returns the end of a run whose last step, which the journal has up to the
// checkpoint cp after it, ended the run: a step whose model answered with no call (and
// did not fail, and was not interrupted) completes it. Nil for any other run.
func (l *leftOver) completed(cp *continuationv1.RunCheckpoint) *agentdv1.RunFinished {
	sf := l.lastStep
	if sf == nil || l.step != "" {
		return nil
	}
	switch sf.GetFinishReason() {
	case agentdv1.FinishReason_FINISH_REASON_TOOL_CALLS, agentdv1.FinishReason_FINISH_REASON_INTERRUPTED, agentdv1.FinishReason_FINISH_REASON_ERROR:
		return nil
	}
	msgs := sf.GetNewMessages()
	if len(msgs) == 0 {
		return nil
	}
	last := msgs[len(msgs)-1]
	var text strings.Builder
	for _, p := range last.GetParts() {
		if p.GetToolCall() != nil {
			return nil
		}
		text.WriteString(p.GetText())
	}
	if last.GetRole() != agentdv1.Role_ROLE_ASSISTANT {
		return nil
	}
	hist := min(int(cp.GetHistory()), len(cp.GetMessages()))
	return &agentdv1.RunFinished{
		Reason: agentdv1.RunEndReason_RUN_END_REASON_COMPLETED, NewMessages: cp.GetMessages()[hist:],
		Usage: sf.GetUsage(), FinalText: wire.ProtoString(text.String()),
	}
}

// reset forgets what the journal said of the calls and approvals before a checkpoint.
func (l *leftOver) reset() {
	l.calls, l.approvals, l.grants = nil, nil, nil
	l.resolved = map[string]*agentdv1.ApprovalResolved{}
	l.started = map[string]*agentdv1.ToolExecutionStarted{}
	l.results = map[string]*agentdv1.ToolCallResult{}
	l.cancelled = map[string]string{}
}

// closeAll closes everything the lost stretch left open, for a run that does its step
// again from the checkpoint, or ends: its approvals are cancelled, its open messages
// and step end abandoned, its calls cancelled (whether one that had started ran is not
// known: it is not run again).
func (l *leftOver) closeAll(ss *session, usage *agentdv1.Usage) {
	if l == nil {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, a := range l.approvals {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
			ApprovalId: a.GetApprovalId(), ToolCallId: a.GetToolCallId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED,
			DecidedBy: agentdv1.DecidedBy_DECIDED_BY_RUN_END, Reason: serverStopped,
		}}})
	}
	l.closeBlocksLocked(ss)
	if len(l.calls) > 0 {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallsCancelled{ToolCallsCancelled: &agentdv1.ToolCallsCancelled{
			ToolCallIds: l.calls, Reason: serverStopped + "; whether a call that had started ran is not known",
		}}})
	}
	if l.step != "" {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepFinished{StepFinished: &agentdv1.StepFinished{
			StepId: l.step, Usage: usage, Abandoned: true,
		}}})
	}
}

// closeBlocksLocked ends the messages the lost stretch left open, abandoned.
func (l *leftOver) closeBlocksLocked(ss *session) {
	for _, b := range l.blocks {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageFinished{MessageFinished: &agentdv1.MessageFinished{
			MessageId: b.id, Role: b.role, Kind: b.kind, Partial: true, Abandoned: true,
		}}})
	}
}

// outcomeUnknown is the result of a call that started on a process that was lost
// before it ended, of a tool not declared idempotent: it may have had its effect, so it
// is not run again.
const outcomeUnknown = "outcome unknown: the server running this call was lost while it ran, and the tool is not declared idempotent, so it was not run again; it may or may not have taken effect. Check before calling it again."

// takeCalls sets the calls of the step the run was lost in (p, its checkpoint's) where
// the journal says they stood, for the run to go on with them: a call with a result
// keeps it; one approved runs without asking again; one whose approval was asked waits
// for the same decision; one that started runs again if its tool is idempotent (with
// the same idempotency key) and otherwise gets an outcome-unknown error result, which
// is journaled now. It returns what the run waits for (approvals asked, client calls).
func (l *leftOver) takeCalls(ss *session, p *runtime.Pending, entry *Agent) *parkedRun {
	idempotent := map[string]bool{}
	client := map[string]bool{}
	for _, spec := range entry.Runtime.Tools() {
		idempotent[spec.Name], client[spec.Name] = spec.Idempotent, spec.Executor == runtime.ExecutorClient
	}
	// The approvals asked and not decided: those of the checkpoint (a park's), then
	// those the journal asked after it.
	asked := map[string]*agentdv1.ApprovalRequested{}
	for _, a := range append(slices.Clone(l.cp.GetPendingApprovals()), l.approvals...) {
		asked[a.GetToolCallId()] = a
	}
	for id := range l.resolved {
		delete(asked, id)
	}
	waits := &parkedRun{}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	l.closeBlocksLocked(ss)
	for i := range p.Calls {
		c := &p.Calls[i]
		id := c.Call.ID
		r, started := l.resolved[id], l.started[id]
		if r != nil && r.GetOutcome() == agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
			c.Approved = true
			if args := r.GetArgumentsJson(); args != "" {
				c.Call.Arguments = args
			}
		}
		switch {
		case l.results[id] != nil:
			res := l.results[id]
			out, err := wire.OutputFromProto(res.GetText(), res.GetJson(), res.GetIsError(), res.GetMedia())
			if err != nil {
				out = runtime.ErrorOutput("the call's result could not be read back: " + err.Error())
			}
			c.State, c.Result = runtime.CallDone, out
		case l.cancelled[id] != "" || r != nil && r.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED:
			why := l.cancelled[id]
			if why == "" {
				why = "the call was " + strings.ToLower(strings.TrimPrefix(r.GetOutcome().String(), "APPROVAL_OUTCOME_")) + ": " + r.GetReason()
			}
			c.State, c.Result = runtime.CallDone, runtime.ErrorOutput(why)
			ss.sendLocked(resultEvent(c))
		case started != nil && client[c.Call.Name]:
			c.State = runtime.CallReady // the client's result may still come
			waits.clientCalls = append(waits.clientCalls, id)
		case started != nil && idempotent[c.Call.Name]:
			c.State, c.Approved, c.Call.Arguments = runtime.CallReady, true, started.GetArgumentsJson()
		case started != nil:
			c.State, c.Result = runtime.CallDone, runtime.ErrorOutput(outcomeUnknown)
			ss.sendLocked(resultEvent(c))
		case asked[id] != nil:
			c.State, c.ApprovalID, c.Reason = runtime.CallAwaitingApproval, asked[id].GetApprovalId(), asked[id].GetReason()
			waits.approvals = append(waits.approvals, asked[id])
		case c.State == runtime.CallAwaitingApproval:
			c.State = runtime.CallReady // its request is not known: it is asked again
		case c.State == runtime.CallReady && client[c.Call.Name] && slices.Contains(l.cp.GetPendingClientToolCallIds(), id):
			waits.clientCalls = append(waits.clientCalls, id) // a park's, waiting for the client
		}
		// Any other call stays as the checkpoint has it: done, or ready to be prepared
		// (and run) as the run goes on.
	}
	return waits
}

// resultEvent is the tool_call_result of a call settled as a run is taken up.
func resultEvent(c *runtime.PendingCall) *agentdv1.RunEvent {
	return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallResult{ToolCallResult: &agentdv1.ToolCallResult{
		ToolCallId: c.Call.ID, Name: c.Call.Name, Output: &agentdv1.ToolCallResult_Text{Text: c.Result.Text}, IsError: c.Result.IsError,
	}}}
}

// endedLeft records the end of a run whose journal has its run_finished.
func (s *Manager) endedLeft(ss *session, rf *agentdv1.RunFinished) {
	ss.mu.Lock()
	ss.setPhaseLocked(phaseEnded)
	ss.result = rf
	ss.mu.Unlock()
	ss.journal.Close()
	s.finishRun(ss)
	s.release(ss)
	close(ss.done)
}

// endLeft ends a run left by a stopped process that cannot go on: run_finished
// CANCELLED, with the messages and usage of its last checkpoint.
func (s *Manager) endLeft(ss *session, cp *continuationv1.RunCheckpoint, why string) error {
	rf := &agentdv1.RunFinished{
		Reason:      agentdv1.RunEndReason_RUN_END_REASON_CANCELLED,
		Error:       &agentdv1.RunError{Code: int32(Canceled), Reason: reasonCancelled, Message: wire.ProtoString("the run was cancelled: " + serverStopped + ", and " + why)},
		NewMessages: ss.priorNew, Usage: cp.GetUsage(), Continuation: cp.GetContinuation(),
	}
	ss.mu.Lock()
	ss.setPhaseLocked(phaseEnded)
	ss.result = rf
	ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunFinished{RunFinished: rf}})
	ss.mu.Unlock()
	ss.journal.Close()
	s.finishRun(ss)
	s.release(ss)
	close(ss.done)
	return nil
}

// logMismatch logs, for a run taken up whose checkpoint's continuation was not sealed
// over the messages it goes on from, what the two were: a bug, which this names.
func (s *Manager) logMismatch(ss *session, ct *opened, rec store.Run, cp *continuationv1.RunCheckpoint, msgs []*agentdv1.Message) {
	d, err := continuation.Digest(msgs)
	if err != nil || slices.Equal(d, ct.Digest) {
		return
	}
	stored := &continuationv1.RunCheckpoint{}
	_ = proto.Unmarshal(rec.Checkpoint, stored)
	sealedOver := -1 // the prefix of msgs the digest is of, if one is
	for k := len(msgs); k >= 0 && sealedOver < 0; k-- {
		if d, err := continuation.Digest(msgs[:k]); err == nil && slices.Equal(d, ct.Digest) {
			sealedOver = k
		}
	}
	brief := func(ms []*agentdv1.Message) string {
		var b strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&b, "%s:%s(%d) ", strings.TrimPrefix(m.GetRole().String(), "ROLE_"), m.GetId(), len(m.GetParts()))
		}
		return b.String()
	}
	s.log.Error("a run taken up does not go on from the transcript its checkpoint was sealed over",
		"run_id", ss.runID, "checkpoint_seq", cp.GetSeq(), "stored_seq", stored.GetSeq(), "stored_step_messages", stored.GetStepMessages(),
		"stored_parked", stored.GetParkedAt() != nil, "status", rec.Status, "sealed_over_prefix", sealedOver,
		"messages", brief(msgs), "stored_messages", brief(stored.GetMessages()))
}
