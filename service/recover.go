package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/store"
)

// serverStopped says why what a stopped process left open was closed.
const serverStopped = "the server that ran it stopped"

// RecoverRuns takes up the runs a process that stopped left unfinished in the store,
// with a store that outlives processes (Config.Store other than memory): call it once,
// after New and before serving. A run parked stays parked, ready to wake, its park
// timeout counted from when it parked. A run that was going on goes on from its last
// checkpoint, on a goroutine of its own, as the same run: what its journal holds after
// that checkpoint is closed first (the step it was in ends abandoned, its open messages
// too, its approvals are cancelled and its tool calls, which may or may not have run,
// are cancelled), and its seq goes on. A run that no client can follow any more (one
// of ExecuteRun, or under ON_DISCONNECT_CANCEL) ends CANCELLED instead.
//
// ctx carries what the recovered runs run with, as an RPC's context would after the
// server's interceptors: hooks.NewContext for server-wide hooks. It returns how many
// runs it took up.
func (s *Server) RecoverRuns(ctx context.Context) (int, error) {
	if !s.gated {
		return 0, nil // a memory store starts empty
	}
	recs, err := s.store.UnfinishedRuns(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if err := s.recoverRun(ctx, rec); err != nil {
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
func (s *Server) recoverRun(ctx context.Context, rec store.Run) error {
	spec, cp := &agentdv1.RunSpec{}, &continuationv1.RunCheckpoint{}
	if err := errors.Join(proto.Unmarshal(rec.Spec, spec), proto.Unmarshal(rec.Checkpoint, cp)); err != nil {
		return fmt.Errorf("its record does not decode: %w", err)
	}
	entry, err := s.agents.Agent(rec.Agent)
	if err == nil && (entry == nil || entry.Runtime == nil) {
		err = fmt.Errorf("%w: %q", ErrAgentNotFound, rec.Agent)
	}
	ss := s.shell(rec, entry, spec, cp)
	s.keep(ss)
	if rec.Status == store.Running {
		if err := s.closeLeft(ctx, ss, cp.GetSeq(), cp.GetUsage()); err != nil {
			return err
		}
	}
	if err != nil {
		// Its agent is gone: nothing can take the run up.
		return s.endLeft(ss, cp, "its agent "+rec.Agent+" is no longer served")
	}
	if rec.Status == store.Parked {
		p := &parkedRun{approvals: cp.GetPendingApprovals(), clientCalls: cp.GetPendingClientToolCallIds(), continuation: cp.GetContinuation(), at: cp.GetParkedAt().AsTime()}
		ss.mu.Lock()
		ss.parked = p
		ss.mu.Unlock()
		s.parkTimers(ss, p, max(s.cfg.ParkTimeout-s.now().Sub(p.at), 0))
		return nil
	}
	if !ss.detach {
		return s.endLeft(ss, cp, "its client was gone with it")
	}
	var ct *continuation
	if len(cp.GetContinuation()) > 0 {
		if ct, err = s.codec.verify(cp.GetContinuation()); err != nil {
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
	if err := s.restart(ctx, ss, spec, ct, cp, &wakeFilter{approvals: map[string]bool{}}, nil); err != nil {
		return s.endLeft(ss, cp, "it could not go on: "+err.Error())
	}
	s.log.Info("run taken up from its last checkpoint", "run_id", ss.runID, "seq", cp.GetSeq(), "last_seq", rec.LastSeq)
	return nil
}

// shell is the session of a run the store holds and this server does not run yet: what
// attaching to it needs, and what restarting it fills in.
func (s *Server) shell(rec store.Run, entry *Agent, spec *agentdv1.RunSpec, cp *continuationv1.RunCheckpoint) *session {
	mode := modeRun
	switch cp.GetRpc() {
	case continuationv1.Rpc_RPC_START_RUN:
		mode = modeStart
	case continuationv1.Rpc_RPC_EXECUTE_RUN:
		mode = modeExecute
	}
	if entry == nil {
		entry = &Agent{Name: rec.Agent}
	}
	ss := s.baseSession(mode, entry, rec.ID, rec.ThreadID, rec.RequestID, spec.GetConfig().GetOnDisconnect())
	ss.ctx, ss.cancel = context.WithCancelCause(context.Background())
	ss.cancel(errors.New(serverStopped)) // until a stretch runs, input is refused
	ss.owner, ss.seq, ss.stopAfter, ss.wakeCtx = rec.Owner, rec.LastSeq, func() bool { return false }, context.Background()
	ss.inbox = newInbox(&s.cfg, nil)
	if rec.Exclusive {
		ss.threaded = &threadStart{id: rec.ThreadID, input: spec.GetMessages()}
	}
	hist := min(int(cp.GetHistory()), len(cp.GetMessages()))
	ss.historyMsgs, ss.priorNew, ss.priorUsage = cp.GetMessages()[:hist], cp.GetMessages()[hist:], cp.GetUsage()
	j := newJournal(s.olderFrames(rec.ID), s.gated)
	j.first = rec.LastSeq + 1
	j.last.Store(rec.LastSeq)
	j.stored.Store(rec.LastSeq)
	ss.journal = j
	return ss
}

// closeLeft closes what the run's journal left open after seq after, the checkpoint
// it goes on from: the stretch that opened them is lost, and is done again.
func (s *Server) closeLeft(ctx context.Context, ss *session, after int64, usage *agentdv1.Usage) error {
	type block struct {
		id   string
		role agentdv1.Role
		kind agentdv1.MessageKind
	}
	var blocks []block
	var calls, approvals []string
	approvalCall := map[string]string{}
	step := ""
	drop := func(list []string, id string) []string {
		for i, v := range list {
			if v == id {
				return append(list[:i], list[i+1:]...)
			}
		}
		return list
	}
	for cursor := after; ; {
		fs, err := s.store.ReadEvents(ctx, ss.runID, cursor, 256)
		if err != nil {
			return fmt.Errorf("reading its journal: %w", err)
		}
		if len(fs) == 0 {
			break
		}
		cursor += int64(len(fs))
		for _, f := range fs {
			ev, err := eventOf(f)
			if err != nil {
				return fmt.Errorf("its journal does not decode: %w", err)
			}
			switch k := ev.GetKind().(type) {
			case *agentdv1.RunEvent_StepStarted:
				step = k.StepStarted.GetStepId()
			case *agentdv1.RunEvent_StepFinished:
				step = ""
			case *agentdv1.RunEvent_MessageStarted:
				blocks = append(blocks, block{k.MessageStarted.GetMessageId(), k.MessageStarted.GetRole(), k.MessageStarted.GetKind()})
			case *agentdv1.RunEvent_MessageFinished:
				for i, b := range blocks {
					if b.id == k.MessageFinished.GetMessageId() {
						blocks = append(blocks[:i], blocks[i+1:]...)
						break
					}
				}
			case *agentdv1.RunEvent_ToolCallStarted:
				calls = append(calls, k.ToolCallStarted.GetToolCallId())
			case *agentdv1.RunEvent_ToolCallResult:
				calls = drop(calls, k.ToolCallResult.GetToolCallId())
			case *agentdv1.RunEvent_ToolCallsCancelled:
				for _, id := range k.ToolCallsCancelled.GetToolCallIds() {
					calls = drop(calls, id)
				}
			case *agentdv1.RunEvent_ApprovalRequested:
				approvals = append(approvals, k.ApprovalRequested.GetApprovalId())
				approvalCall[k.ApprovalRequested.GetApprovalId()] = k.ApprovalRequested.GetToolCallId()
			case *agentdv1.RunEvent_ApprovalResolved:
				approvals = drop(approvals, k.ApprovalResolved.GetApprovalId())
			}
		}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, id := range approvals {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
			ApprovalId: id, ToolCallId: approvalCall[id], Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED,
			DecidedBy: agentdv1.DecidedBy_DECIDED_BY_RUN_END, Reason: serverStopped,
		}}}, true)
	}
	for _, b := range blocks {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageFinished{MessageFinished: &agentdv1.MessageFinished{
			MessageId: b.id, Role: b.role, Kind: b.kind, Partial: true, Abandoned: true,
		}}}, true)
	}
	if len(calls) > 0 {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallsCancelled{ToolCallsCancelled: &agentdv1.ToolCallsCancelled{
			ToolCallIds: calls, Reason: serverStopped + "; whether a call that had started ran is not known",
		}}}, true)
	}
	if step != "" {
		ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepFinished{StepFinished: &agentdv1.StepFinished{
			StepId: step, Usage: usage, Abandoned: true,
		}}}, true)
	}
	return nil
}

// endLeft ends a run left by a stopped process that cannot go on: run_finished
// CANCELLED, with the messages and usage of its last checkpoint.
func (s *Server) endLeft(ss *session, cp *continuationv1.RunCheckpoint, why string) error {
	rf := &agentdv1.RunFinished{
		Reason:      agentdv1.RunEndReason_RUN_END_REASON_CANCELLED,
		Error:       &agentdv1.RunError{Code: int32(codes.Canceled), Reason: reasonCancelled, Message: protoString("the run was cancelled: " + serverStopped + ", and " + why)},
		NewMessages: ss.priorNew, Usage: cp.GetUsage(), Continuation: cp.GetContinuation(),
	}
	ss.mu.Lock()
	ss.ended, ss.result = true, rf
	ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunFinished{RunFinished: rf}}, true)
	ss.mu.Unlock()
	ss.journal.close()
	s.finishRun(ss)
	s.release(ss)
	close(ss.done)
	return nil
}
