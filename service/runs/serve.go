package runs

import (
	"context"
	"errors"
	"sync"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// Serve serves what a start came to on its RPC's stream, until the run ends or the
// stream goes: send carries the run's frames; recv, when the client can answer on the
// stream (a Run stream), reads its messages, and nil when it cannot (StartRun).
func (s *Manager) Serve(ctx context.Context, st *Started, send func(journal.Frame) error, recv func() (*agentdv1.RunRequest, error)) error {
	switch st.Outcome {
	case ResumedBefore:
		return s.AttachStream(ctx, st.RunID, 0, send, recv)
	case SteeredInto:
		ss, o, err := s.steerBusy(ctx, st.RunID, st.steer, send)
		if err != nil {
			return err
		}
		if recv != nil {
			o.Runs = true
			ss.addAnswerer()
			go ss.receive(recv, o, false)
		}
		return s.serveAttached(ctx, st.RunID, ss, o)
	}
	ss, req := st.ss, st.req
	o := ss.attachStarter(ctx, send)
	if recv != nil {
		o.Runs = true
		// Client messages are read once run_started is journaled, so that it stays the
		// first event and every ack follows it.
		ss.started = func() {
			ss.addAnswerer()
			go ss.receive(recv, o, true)
		}
	}
	ss.start(req)
	return ss.serveStarter(ctx, o)
}

// AttachStream attaches a stream to the run of id after seq after, and serves it until
// the run ends or the stream goes. A stream that can answer (recv not nil) answers the
// run, and wakes it if it is parked; with a store other replicas share, it first takes up
// a run that no replica holds (parked, or left by a replica that died).
func (s *Manager) AttachStream(ctx context.Context, id string, after int64, send func(journal.Frame) error, recv func() (*agentdv1.RunRequest, error)) error {
	if recv != nil && s.shared {
		if ref, err := s.lookup(ctx, id); err == nil && ref.ss == nil && ref.rec.Status != store.Finished {
			if _, err := s.takeUp(ctx, id); err != nil && !errors.Is(err, store.ErrHeld) && !errors.Is(err, store.ErrFinished) {
				return storeStatus(err)
			}
		}
	}
	ss, o, err := s.attach(ctx, id, after, send)
	if err != nil {
		return err
	}
	if ss != nil && recv != nil {
		// A stream that can answer wakes a parked run: the run waits for it.
		o.Runs = true
		ss.addAnswerer()
		go ss.receive(recv, o, false)
		ss.mu.Lock()
		ss.readyLocked() // wakes a run parked, or parking, for the stream that can answer
		ss.mu.Unlock()
	}
	return s.serveAttached(ctx, id, ss, o)
}

// Execute runs what an ExecuteRun's start came to, on the caller's goroutine and bound
// to ctx, and returns its outcome. A failed run's error carries the whole outcome as a
// detail, so nothing is lost.
func (s *Manager) Execute(ctx context.Context, st *Started) (*agentdv1.ExecuteRunResponse, error) {
	switch st.Outcome {
	case ResumedBefore:
		return s.executedAlready(ctx, st.RunID)
	case SteeredInto: // withThread refuses on_busy STEER for ExecuteRun
		return nil, statusError(Internal, reasonInternal, "ExecuteRun cannot steer into a thread's active run", nil)
	}
	ss := st.ss
	ss.own(st.req)
	if ss.result == nil {
		return nil, ss.status
	}
	resp := &agentdv1.ExecuteRunResponse{RunId: ss.runID, ThreadId: ss.thread, TraceId: ss.traceID, Result: ss.result}
	if err := runStatus(ss.result.GetError(), resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// executedAlready answers an ExecuteRun whose continuation a run resumed already: with
// that run's outcome, once it has one.
func (s *Manager) executedAlready(ctx context.Context, id string) (*agentdv1.ExecuteRunResponse, error) {
	resp := &agentdv1.ExecuteRunResponse{RunId: id}
	var mu sync.Mutex
	ss, o, err := s.attach(ctx, id, 0, func(f journal.Frame) error {
		ev, err := journal.EventOf(f)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.GetAttached() != nil:
			resp.ThreadId = ev.GetAttached().GetThreadId()
		case ev.GetRunStarted() != nil:
			resp.TraceId = ev.GetRunStarted().GetTraceId()
		case ev.GetRunFinished() != nil:
			resp.Result = ev.GetRunFinished()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.serveAttached(ctx, id, ss, o); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if err := runStatus(resp.GetResult().GetError(), resp); err != nil {
		return nil, err
	}
	return resp, nil
}
