package runs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// With a store several replicas share, SendRunInput's input reaches whichever replica
// the client's connection lands on. The input is stored first (PutInput), with its
// request; the replica holding the run finds it there, woken by the store's word that
// the run changed or by its own look every pumpInterval (pumpInputs), acts on it as it
// would on its own, and stores the answer (AnswerInput), which the replica the input
// reached returns (relay). A run that no replica holds (parked, or its replica died) is
// taken up by the replica the input reached, which then acts on it itself.

// relay answers SendRunInput's input of key for run rec, which this server does not
// run: it waits for the answer the run's holder stores, taking the run up itself when
// no replica holds it.
func (s *Manager) relay(ctx context.Context, rec store.Run, key string, digest [sha256.Size]byte, req *agentdv1.RunRequest) (*agentdv1.SendRunInputResponse, error) {
	var finished time.Time // when the run was first seen finished
	giveUp := time.Now().Add(s.cfg.InputAnswerTimeout)
	for {
		if time.Now().After(giveUp) {
			// The input is stored: the run's holder acts on it when it can. The client
			// learns so in bounded time, and a retry of the same key gets its answer.
			return nil, statusError(Unavailable, reasonInputUnanswered,
				fmt.Sprintf("the input is stored, but the replica running the run did not answer it within %s: send it again with the same client_key", s.cfg.InputAnswerTimeout),
				map[string]string{"run_id": rec.ID})
		}
		in, err := s.store.GetInput(ctx, rec.ID, key)
		if err != nil {
			return nil, storeStatus(err)
		}
		if in.Answer != nil {
			return decodeAnswer(in.Answer)
		}
		wait := s.nudges.after(rec.ID, relayPoll)
		ss, err := s.takeUp(ctx, rec.ID)
		if err == nil {
			resp, err := s.inputHere(ctx, ss, key, digest, req)
			if !isMoved(err) {
				wait.fire()
				return resp, err
			}
			// Another replica took the run meanwhile: it answers.
		}
		switch {
		case err == nil, errors.Is(err, store.ErrHeld), isMoved(err):
		case errors.Is(err, store.ErrFinished):
			// The run ended, maybe for this very input (a cancel): its holder stores the
			// answer as it acks, a moment after. An input it never took is refused.
			if finished.IsZero() {
				finished = time.Now()
			}
			if time.Since(finished) > relayAnswerWait {
				wait.fire()
				return nil, finishedStatus(rec.ID)
			}
		default:
			wait.fire()
			return nil, storeStatus(err)
		}
		select {
		case <-wait.ch:
		case <-ctx.Done():
			return nil, contextError(ctx.Err())
		}
	}
}

// relayPoll is how often a replica relaying an input looks for its answer when the
// store says nothing of the run; relayAnswerWait how long it waits for the answer to an
// input of a run that finished.
const (
	relayPoll       = 500 * time.Millisecond
	relayAnswerWait = 2 * time.Second
)

// inputHere acts on SendRunInput's input of key for ss, a run this server runs, and
// stores its answer.
func (s *Manager) inputHere(ctx context.Context, ss *session, key string, digest [sha256.Size]byte, req *agentdv1.RunRequest) (*agentdv1.SendRunInputResponse, error) {
	// The input is an answer the run waits for from here on: a parked run wakes for it
	// (takeKeyed), and waits for it instead of parking again.
	ss.addAnswerer()
	ki, err := ss.takeKeyed(key, digest, req)
	ss.dropAnswerer()
	if err != nil {
		if !isMoved(err) { // else another replica took the run meanwhile: it answers
			s.keepAnswer(ss.runID, key, nil, err)
		}
		return nil, err
	}
	select {
	case <-ki.done:
	case <-ctx.Done():
		return nil, contextError(ctx.Err())
	}
	if ki.ack == nil {
		// Orphaned: the run left this server before it acked the input.
		return nil, errRunMoved
	}
	if err := s.ackStored(ss, ki); err != nil {
		return nil, err
	}
	resp := &agentdv1.SendRunInputResponse{Ack: ki.ack, Seq: ki.seq}
	s.keepAnswer(ss.runID, key, resp, nil)
	return resp, nil
}

// ackStored returns once the journal holds, in the store, the ack of an input the run
// took: an answer kept, or returned, before that could outlive the ack (this process
// lost), and the input would be lost with it, its client told it was taken. With an
// error nothing is kept: a retry, or the replica that takes the run up, acts on it.
func (s *Manager) ackStored(ss *session, ki *keyedInput) error {
	if !s.gated || ki.seq == 0 {
		return nil
	}
	err := s.writer.StoredThrough(ss, ki.seq)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errRunMoved):
		return errRunMoved
	}
	return statusError(Unavailable, reasonStoreUnavailable, "the input was taken, but storing it failed: send it again (the same client_key)", map[string]string{"run_id": ss.runID})
}

// isMoved reports whether err says the run moved to another replica.
func isMoved(err error) bool {
	if errors.Is(err, errRunMoved) {
		return true
	}
	e, ok := errors.AsType[*Error](err)
	return ok && e.Reason == reasonRunMoved
}

// keepAnswer stores the answer to an input, the response or the refusal, so that a
// retry, on any replica, gets it.
func (s *Manager) keepAnswer(runID, key string, resp *agentdv1.SendRunInputResponse, refusal error) {
	a := &continuationv1.InputAnswer{Ack: resp.GetAck(), Seq: resp.GetSeq()}
	if refusal != nil {
		e, ok := errors.AsType[*Error](refusal)
		if !ok {
			e = &Error{Code: Unknown, Message: refusal.Error()}
		}
		a.Code, a.Message, a.Reason, a.Metadata = int32(e.Code), e.Message, e.Reason, e.Meta
	}
	b, err := proto.Marshal(a)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
		err = s.store.AnswerInput(ctx, runID, key, b)
		cancel()
	}
	if err != nil {
		s.log.Warn("keeping an input's answer failed: a retry of it will be acted on again, or refused", "run_id", runID, "error", err)
	}
}

// decodeAnswer returns the response, or the refusal, a stored answer holds.
func decodeAnswer(b []byte) (*agentdv1.SendRunInputResponse, error) {
	a := &continuationv1.InputAnswer{}
	if err := proto.Unmarshal(b, a); err != nil {
		return nil, statusError(Internal, reasonInternal, "decoding a kept answer: "+err.Error(), nil)
	}
	if a.GetCode() != 0 {
		return nil, statusError(Code(a.GetCode()), a.GetReason(), a.GetMessage(), a.GetMetadata())
	}
	return &agentdv1.SendRunInputResponse{Ack: a.GetAck(), Seq: a.GetSeq()}, nil
}

// pumpInterval is how often a replica looks for inputs stored for the runs it runs,
// behind the store's word that they changed.
const pumpInterval = 2 * time.Second

// pumpInputs acts on the inputs other replicas stored for runs this server runs, each
// run's in the order they came, one look per run at a time (a look asked for meanwhile
// follows it).
func (s *Manager) pumpInputs(runs []*session) {
	var mine []*session
	s.pumpMu.Lock()
	if s.pumping == nil {
		s.pumping = map[string]bool{}
	}
	for _, ss := range runs {
		if _, busy := s.pumping[ss.runID]; busy {
			s.pumping[ss.runID] = true // look again when done
			continue
		}
		s.pumping[ss.runID] = false
		mine = append(mine, ss)
	}
	s.pumpMu.Unlock()
	for len(mine) > 0 {
		ids := make([]string, len(mine))
		byID := make(map[string]*session, len(mine))
		for i, ss := range mine {
			ids[i], byID[ss.runID] = ss.runID, ss
		}
		ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
		ins, err := s.store.PendingInputs(ctx, ids)
		cancel()
		if err != nil {
			s.log.Warn("looking for stored inputs failed", "runs", len(ids), "error", err)
		}
		for _, in := range ins {
			ss := byID[in.RunID]
			if ss == nil || ss.knowsKey(in.Key) {
				continue
			}
			s.actStored(ss, in)
		}
		// Runs asked for again while this look went on are looked at once more.
		var again []*session
		s.pumpMu.Lock()
		for _, ss := range mine {
			if s.pumping[ss.runID] {
				s.pumping[ss.runID] = false
				again = append(again, ss)
			} else {
				delete(s.pumping, ss.runID)
			}
		}
		s.pumpMu.Unlock()
		mine = again
	}
}

// knowsKey reports whether the run took an input of key already.
func (ss *session) knowsKey(key string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.keyed.byKey[key] != nil
}

// actStored acts on an input another replica stored for ss, and stores its answer once
// the run acked it.
func (s *Manager) actStored(ss *session, in store.Input) {
	req := &agentdv1.RunRequest{}
	if err := proto.Unmarshal(in.Request, req); err != nil {
		s.keepAnswer(ss.runID, in.Key, nil, statusError(Internal, reasonInternal, "decoding a stored input: "+err.Error(), nil))
		return
	}
	var digest [sha256.Size]byte
	copy(digest[:], in.Digest)
	ss.addAnswerer()
	ki, err := ss.takeKeyed(in.Key, digest, req)
	ss.dropAnswerer()
	if err != nil {
		if !isMoved(err) {
			s.keepAnswer(ss.runID, in.Key, nil, err)
		}
		return
	}
	go func() {
		t := time.NewTimer(journal.StoreTimeout)
		defer t.Stop()
		select {
		case <-ki.done:
			// Orphaned (no ack: the run left this server), the input is its next
			// holder's to act on.
			if ki.ack != nil && s.ackStored(ss, ki) == nil {
				s.keepAnswer(ss.runID, in.Key, &agentdv1.SendRunInputResponse{Ack: ki.ack, Seq: ki.seq}, nil)
			}
		case <-t.C:
		}
	}()
}

// kickPump asks pumpLoop to look for the stored inputs of runs now.
func (s *Manager) kickPump(runs []*session) {
	s.pumpMu.Lock()
	if s.kicked == nil {
		s.kicked = map[*session]struct{}{}
	}
	for _, ss := range runs {
		s.kicked[ss] = struct{}{}
	}
	s.pumpMu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // a kick is pending: it takes these too
	}
}

// pumpLoop looks for stored inputs of the runs going on here when the store says they
// changed (kickPump), and of them all every pumpInterval: what the store's word would
// have brought, were it lost.
func (s *Manager) pumpLoop(ctx context.Context) {
	t := time.NewTicker(pumpInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			s.pumpMu.Lock()
			runs := make([]*session, 0, len(s.kicked))
			for ss := range s.kicked {
				runs = append(runs, ss)
			}
			clear(s.kicked)
			s.pumpMu.Unlock()
			s.pumpInputs(runs)
			continue
		case <-t.C:
		}
		var runs []*session
		for _, ss := range s.liveRuns() {
			ss.mu.Lock()
			running := !ss.moved && ss.phase != phaseEnded
			ss.mu.Unlock()
			if running {
				runs = append(runs, ss)
			}
		}
		if len(runs) > 0 {
			s.pumpInputs(runs)
		}
	}
}
