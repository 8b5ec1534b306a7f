package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// runAttach is `agentctl attach`: it attaches a Run stream to a run that goes on on the
// server (or that finished and is kept), shows its events from after --after as run
// shows its own, asks its pending approvals, and sends what the person types.
func runAttach(ctx context.Context, client agentdv1.AgentServiceClient, cfg attachConfig, e env) int {
	var lines *lineReader
	if !cfg.json {
		lines = newLineReader(e.stdin)
	}
	defer lines.stop()
	s := newSession(runConfig{json: cfg.json}, e, lines)
	s.att = &attachment{runID: cfg.runID, after: cfg.after, shown: map[string]bool{}}
	s.lastSeq = cfg.after
	// Every stream of a run sees every input_ack, each naming only its message's
	// client_seq: numbering from a random point keeps the acks of the stream that started
	// the run, which counts from 1, from being taken for this stream's.
	s.clientSeq = rand.Int64N(1 << 52)
	return s.serve(ctx, client, &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Attach{Attach: &agentdv1.Attach{RunId: cfg.runID, AfterSeq: cfg.after}}})
}

// attachment is what an attached session knows of the run it attached to.
type attachment struct {
	runID string
	after int64
	snap  *agentdv1.Attached // the attached event, once it came
	// caughtUp says the events shown reached snap.last_seq: what comes after is live. Until
	// then an approval_requested is history (its outcome follows it) unless snap lists it
	// as pending.
	caughtUp bool
	shown    map[string]bool // pending approvals whose approval_requested the replay showed
}

// endedBefore reports whether the run had finished when the stream attached, with nothing
// after the cursor: agentd then ends the stream after attached, without run_finished.
func (a *attachment) endedBefore() bool {
	return a.snap != nil && a.snap.GetState() == agentdv1.RunState_RUN_STATE_FINISHED && a.after >= a.snap.GetLastSeq()
}

// onAttached shows where the run stands, and asks its pending approvals once the events
// shown have caught up with it.
func (s *session) onAttached(runID string, a *agentdv1.Attached) {
	s.att.snap = a
	if runID != "" {
		s.att.runID = runID
	}
	state := "running"
	switch a.GetState() {
	case agentdv1.RunState_RUN_STATE_WAITING, agentdv1.RunState_RUN_STATE_PARKED:
		// A parked run holds nothing on the server until an answer, or an attached
		// stream, takes it up again: to the person it waits all the same.
		state = "waiting"
		if a.GetState() == agentdv1.RunState_RUN_STATE_PARKED {
			state = "parked, waiting"
		}
		if w := waitList(a.GetPendingApprovals(), a.GetPendingClientToolCallIds()); w != "" {
			state += " for " + w
		}
	case agentdv1.RunState_RUN_STATE_FINISHED:
		state = "finished"
	}
	sc := s.scr
	sc.line(sc.dim(fmt.Sprintf("● attached to run %s · agent %s · thread %s · %s · last seq %d", s.att.runID, a.GetAgent(), a.GetThreadId(), state, a.GetLastSeq())))
	if a.GetLastSeq() <= s.att.after {
		s.catchUp()
	}
}

// replayedApproval shows an approval_requested from before the run's state the attached
// event gave: a pending one is asked once the replay has caught up, the others were
// decided, as the events after it show.
func (s *session) replayedApproval(a *agentdv1.ApprovalRequested) {
	id := a.GetApprovalId()
	s.requested[id] = a
	for _, p := range s.att.snap.GetPendingApprovals() {
		if p.GetApprovalId() == id {
			s.att.shown[id] = true
		}
	}
	s.printApproval(a, s.att.shown[id])
}

// catchUp asks the approvals the run waits for, as a live approval_requested would: those
// whose request the replay did not show (it was before --after) are shown first.
func (s *session) catchUp() {
	s.att.caughtUp = true
	for _, a := range s.att.snap.GetPendingApprovals() {
		id := a.GetApprovalId()
		if s.answeredIDs[id] {
			continue
		}
		if !s.att.shown[id] {
			s.printApproval(a, true)
		}
		if s.requested[id] == nil {
			s.requested[id] = a
		}
		s.askApproval(a)
	}
}

// finishedEarlier shows the end of a run that had finished before agentctl attached after
// its last event: it reads the run's run_finished alone, with an AttachRun from the event
// before it, so that the exit code says how the run ended.
func (s *session) finishedEarlier(ctx context.Context, client agentdv1.AgentServiceClient) int {
	last := s.att.snap.GetLastSeq()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: s.att.runID, AfterSeq: max(last-1, 0)})
	if err != nil {
		return s.broken(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return s.broken(err)
		}
		ev := resp.GetEvent()
		if ev.GetRunFinished() == nil {
			continue // attached again, said already
		}
		if s.cfg.json {
			code, _ := s.onEventJSON(ev)
			return code
		}
		code, _ := s.onEvent(ctx, ev)
		return code
	}
}
