package service

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// The server keeps every run it started, by id: a running run, for the streams that
// attach to it and the inputs SendRunInput brings, and a finished one's journal for
// Config.RunRetention, within Config.MaxRetainedJournalBytes over every finished run
// (the oldest finished go first).

// identity returns who owns what an RPC starts: Config.Identity's name for it.
func (s *Server) identity(ctx context.Context) string {
	if s.cfg.Identity != nil {
		return s.cfg.Identity(ctx)
	}
	if s.cfg.Caller != nil {
		return s.cfg.Caller(ctx)
	}
	return ""
}

// keep records a run the server has admitted.
func (s *Server) keep(ss *session) {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	s.kept[ss.runID] = ss
}

// retire records that a run has finished: its journal is kept for the retention time,
// unless the journals of finished runs hold more than their bound, when the oldest go.
func (s *Server) retire(ss *session) {
	size := int64(ss.journal.bytes())
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	s.finished = append(s.finished, ss)
	s.retainedBytes += size
	for s.retainedBytes > s.cfg.MaxRetainedJournalBytes && len(s.finished) > 0 {
		s.forgetLocked(s.finished[0])
	}
	time.AfterFunc(s.cfg.RunRetention, func() {
		s.keptMu.Lock()
		defer s.keptMu.Unlock()
		s.forgetLocked(ss)
	})
}

// forgetLocked drops a finished run, once.
func (s *Server) forgetLocked(ss *session) {
	if s.kept[ss.runID] != ss {
		return
	}
	delete(s.kept, ss.runID)
	s.retainedBytes -= int64(ss.journal.bytes())
	for i, f := range s.finished {
		if f == ss {
			s.finished = append(s.finished[:i], s.finished[i+1:]...)
			break
		}
	}
}

// lookup returns the run of id, if the caller may see it: the identity that started it
// or, for a run started anonymously, anyone. A run the caller may not see is not found.
func (s *Server) lookup(ctx context.Context, id string) (*session, error) {
	s.keptMu.Lock()
	ss := s.kept[id]
	s.keptMu.Unlock()
	if ss == nil || (ss.owner != "" && ss.owner != s.identity(ctx)) {
		return nil, statusError(codes.NotFound, reasonRunNotFound, "no run "+strconv.Quote(id)+" on this server: it never ran here, its journal is no longer kept, or another caller started it", map[string]string{"run_id": id})
	}
	return ss, nil
}

// attachedLocked is the attached event of a stream attaching to the run.
func (ss *session) attachedLocked() *agentdv1.RunEvent {
	oldest, _ := ss.journal.bounds()
	a := &agentdv1.Attached{
		ThreadId: ss.thread, Agent: ss.entry.Name, State: agentdv1.RunState_RUN_STATE_RUNNING,
		LastSeq: ss.seq, OldestSeq: oldest, Usage: ss.usage, RequestId: ss.reqID,
	}
	if ss.ended {
		a.State = agentdv1.RunState_RUN_STATE_FINISHED
		a.Usage = ss.result.GetUsage()
	} else {
		a.PendingApprovals = openSlots(ss.approvals, func(id string, s *answerSlot[runtime.Decision]) *agentdv1.ApprovalRequested { return s.event })
		a.PendingClientToolCallIds = openSlots(ss.clientCalls, func(id string, _ *answerSlot[runtime.Output]) string { return id })
		if len(a.PendingApprovals)+len(a.PendingClientToolCallIds) > 0 {
			a.State = agentdv1.RunState_RUN_STATE_WAITING
		}
	}
	return &agentdv1.RunEvent{RunId: ss.runID, Time: timestamppb.New(ss.srv.now()), Kind: &agentdv1.RunEvent_Attached{Attached: a}}
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
