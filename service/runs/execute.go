package runs

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
)

// execute runs the loop to its end, journaling every event, and returns run_finished
// and the status the RPC that started the run ends with.
func (ss *session) execute(req *runtime.Request) (*agentdv1.RunFinished, error) {
	ctx, cancel := ss.runCtx()
	defer cancel(nil)
	ctx = context.WithValue(ctx, sessionKey{}, ss) // for the calls of its sub-agents
	var rf *agentdv1.RunFinished
	for ev, err := range ss.entry.Runtime.Run(ctx, req) {
		if err != nil {
			// Refused before it started: nothing was journaled.
			return nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "start", Description: err.Error()}})
		}
		if fin, ok := ev.(*runtime.RunFinished); ok {
			if fin.Reason == runtime.EndShutdown && ss.handsOver(fin) {
				// Drained with a store other replicas share: the run parks, due at once,
				// and another replica goes on with it.
				if err := ss.park(fin); err == nil {
					return nil, errParked
				}
				ss.srv.log.Error("handing the run over failed: it ends SHUTDOWN with its continuation", "run_id", ss.runID)
			}
			if fin.Reason == runtime.EndAwaitingInput && ss.isParking() {
				err := ss.park(fin)
				if err == nil {
					return nil, errParked
				}
				// Input waiting for the park goes on once run_finished is out (runToEnd),
				// and is refused then: an answer acked now would be lost.
				if capped, ok := errors.AsType[*parkLimitError](err); ok {
					ss.srv.log.Warn("the run did not park, as that would pass a cap on parked runs: it ends AWAITING_INPUT with its continuation", "run_id", ss.runID, "limit", capped.limit, "max", capped.max)
				} else {
					ss.srv.log.Error("parking the run in the store failed: it ends AWAITING_INPUT with its continuation", "run_id", ss.runID, "error", err)
				}
			}
			rf = ss.finished(fin)
			if err := ss.sendFinished(rf); err != nil {
				return rf, sendStatus(err)
			}
			continue
		}
		if err := ss.emit(ev); err != nil {
			return nil, sendStatus(err)
		}
	}
	if rf == nil {
		return nil, statusError(Internal, reasonInternal, "the run ended without run_finished", nil)
	}
	return rf, nil
}

// own runs the session to its end with heartbeats and go_away, on whichever goroutine
// calls it, then closes its journal and records its end in the store; a run that parks
// only lets go of its goroutine and its admission (an input on any stream attached to
// it wakes it). A panic in the run ends it INTERNAL instead of the process.
func (ss *session) own(req *runtime.Request) {
	if ss.runToEnd(req) {
		ss.publishPark()
	}
}

// runToEnd runs one stretch of the run, from its start or a wake to its end or its
// park, and reports whether it parked. What this stretch holds (its context, its
// admission, its done channel) is taken at its start: a wake may set the next
// stretch's before this one has unwound.
func (ss *session) runToEnd(req *runtime.Request) (parked bool) {
	ss.mu.Lock()
	stopAfter, cancel, caller, done := ss.stopAfter, ss.cancel, ss.caller, ss.done
	ss.mu.Unlock()
	// The stretch lets go of what it holds before done closes: whoever waits for the
	// run's end finds its admission free.
	var once sync.Once
	letGo := func() {
		once.Do(func() {
			stopAfter()
			cancel(nil)
			ss.srv.unadmit(caller)
		})
	}
	defer letGo()
	stop := ss.keepAlive()
	defer func() {
		stop() // a panic in the run too: the timer must not re-arm for ever
		if p := recover(); p != nil {
			ss.srv.log.Error("the run panicked", "run_id", ss.runID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			re := &agentdv1.RunError{Code: int32(Internal), Reason: reasonInternal, Message: wire.ProtoString("the run failed: a fault in agentd")}
			ss.mu.Lock()
			ended := ss.phase == phaseEnded
			ss.mu.Unlock()
			if !ended {
				ss.result = &agentdv1.RunFinished{Reason: agentdv1.RunEndReason_RUN_END_REASON_FAILED, Error: re}
				ss.sendFinished(ss.result)
			}
			ss.status = statusError(Internal, reasonInternal, re.GetMessage(), nil)
			parked = false
		}
		if parked {
			letGo()
			close(done)
			return
		}
		ss.mu.Lock()
		ss.endParkingLocked() // a park the run's end overtook
		moved := ss.moved
		ss.mu.Unlock()
		if !moved {
			ss.journal.Close() // else it follows the run from the store
		}
		ss.srv.finishRun(ss)
		ss.srv.release(ss)
		letGo()
		close(done)
		ss.srv.wakeParent(ss)
		ss.srv.endKids(ss)
	}()
	rf, err := ss.execute(req)
	if errors.Is(err, errParked) {
		return true
	}
	if err == nil {
		err = runStatus(rf.GetError())
	}
	ss.mu.Lock()
	ss.status = err
	if ss.result == nil {
		ss.result = rf // sendFinished set it, unless run_finished could not be sent
	}
	ss.mu.Unlock()
	return false
}

// handsOver reports whether a run the server shuts down is handed over to another
// replica rather than ended: with a store other replicas share, a run its client does
// not hold to this server (not ExecuteRun's, not under ON_DISCONNECT_CANCEL).
func (ss *session) handsOver(fin *runtime.RunFinished) bool {
	if !ss.srv.shared || fin.Pending == nil || ss.mode == ModeExecute || !ss.detach {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.handOver = true
	return true
}

// isParking reports whether a wait found nobody to answer, so that the run's end of
// the step it waits in parks it in the store.
func (ss *session) isParking() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.phase == phaseParking
}

// start runs the session on a goroutine of its own: the run belongs to the server, and
// outlives the RPC that started it unless its on_disconnect says CANCEL.
func (ss *session) start(req *runtime.Request) {
	go ss.own(req)
}

// attachStarter attaches the stream that started the run, from its first event: the
// run waits for it while it stays attached.
func (ss *session) attachStarter(ctx context.Context, send func(journal.Frame) error) *journal.Outbox {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	o := journal.NewOutbox(ctx, ss.journal, 0, nil, send, func(error) {})
	o.StartHeartbeats(ss.srv.cfg.HeartbeatInterval, ss.runID, ss.srv.now)
	ss.outs[o] = struct{}{}
	ss.primary = o
	return o
}

// detachOut lets a stream go: its outbox sends nothing more, and the run no longer waits
// for it.
func (ss *session) detachOut(o *journal.Outbox) {
	ss.mu.Lock()
	delete(ss.outs, o)
	if ss.primary == o {
		ss.primary = nil
	}
	ss.mu.Unlock()
	o.Abandon()
}

// serveStarter sends the run's events on the stream that started it, and returns the
// status its RPC ends with: the run's, once every event went out. A stream that goes
// away first (its client cancelled, its connection lost, a send failed, or its client
// read nothing for the stall timeout) is detached and the run goes on, or, under
// ON_DISCONNECT_CANCEL, the run is cancelled and the status carries its outcome: a
// stalled client gets RESOURCE_EXHAUSTED (CLIENT_STALLED) with the run's run_finished,
// transcript included, as a status detail.
func (ss *session) serveStarter(ctx context.Context, o *journal.Outbox) error {
	stall := ss.srv.cfg.StallTimeout
	if o.Flush(ctx, stall) {
		// The journal closed: the run's last stretch has ended, or ends now.
		ss.mu.Lock()
		done := ss.done
		ss.mu.Unlock()
		<-done
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return ss.status
	}
	ss.detachOut(o)
	sendErr := o.Failed()
	switch {
	case errors.Is(sendErr, errRunMoved):
		return movedStatus(o.Cursor())
	case errors.Is(sendErr, errStoreLost):
		return storeLostStatus(o.Cursor())
	}
	if ss.detach {
		ss.srv.log.Debug("the stream that started the run went away: the run goes on", "run_id", ss.runID, "error", sendErr)
		return goneStatus(ctx, sendErr, stall, o.Cursor())
	}
	cause := journal.ErrClientStalled
	switch {
	case sendErr != nil:
		cause = sendErr
	case ctx.Err() != nil:
		cause = context.Cause(ctx)
	default:
		ss.srv.log.Warn("the client read nothing for the stall timeout: ending its run", "run_id", ss.runID, "stall_timeout", stall.String())
	}
	ss.mu.Lock()
	done, cancel := ss.done, ss.cancel
	ss.mu.Unlock()
	cancel(cause)
	<-done
	switch {
	case cause == journal.ErrClientStalled:
		re := stalledError(stall)
		return statusError(ResourceExhausted, re.GetReason(), re.GetMessage(), nil, ss.result)
	case sendErr != nil:
		return sendStatus(sendErr)
	}
	return contextError(ctx.Err())
}

// serveAttached sends a run's events on a stream that attached to it (ss, nil for a run
// read from the store), and returns the status its RPC ends with: OK once run_finished
// went out.
func (s *Manager) serveAttached(ctx context.Context, id string, ss *session, o *journal.Outbox) error {
	if o.Release != nil {
		defer o.Release()
	}
	if ss != nil {
		defer ss.detachOut(o)
	} else {
		defer o.Abandon()
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer context.AfterFunc(s.streamsCtx, func() { stop(context.Cause(s.streamsCtx)) })()
	stall := s.cfg.StallTimeout
	if o.Flush(ctx, stall) {
		return nil
	}
	if errors.Is(context.Cause(ctx), errShuttingDown) {
		sent := o.Cursor()
		return statusError(Unavailable, reasonDraining,
			fmt.Sprintf("the server is shutting down: attach again, to another replica, with after_seq %d", sent),
			map[string]string{"last_seq_sent": strconv.FormatInt(sent, 10)})
	}
	err := o.Failed()
	if errors.Is(err, journal.ErrEventsExpired) {
		oldest, _, _ := s.store.EventBounds(ctx, id)
		return expiredStatus(oldest)
	}
	return goneStatus(ctx, err, stall, o.Cursor())
}

// goneStatus is the status of a stream let go while its run goes on: it went away, a
// send failed, or its client read nothing for stall, having been sent the events up to
// seq sent.
func goneStatus(ctx context.Context, sendErr error, stall time.Duration, sent int64) error {
	switch {
	case errors.Is(sendErr, errRunMoved):
		return movedStatus(sent)
	case errors.Is(sendErr, errStoreLost):
		return storeLostStatus(sent)
	case sendErr != nil:
		return sendStatus(sendErr)
	case ctx.Err() != nil:
		return contextError(ctx.Err())
	}
	return statusError(ResourceExhausted, reasonClientStalled,
		fmt.Sprintf("the client read nothing for %s while events waited for it, so this stream was let go; the run goes on: attach again with after_seq %d", stall, sent),
		map[string]string{"last_seq_sent": strconv.FormatInt(sent, 10)})
}

// movedStatus ends a Run stream whose run another replica took over, having sent it
// the events up to seq sent.
func movedStatus(sent int64) error {
	return statusError(Unavailable, reasonRunMoved,
		fmt.Sprintf("another replica runs the run now: attach again, on any replica, with after_seq %d", sent),
		map[string]string{"last_seq_sent": strconv.FormatInt(sent, 10)})
}

// storeLostStatus ends a stream whose run this replica let go, its store having failed
// the run for a lease, having sent it the events up to seq sent.
func storeLostStatus(sent int64) error {
	return statusError(Unavailable, reasonStoreUnavailable,
		fmt.Sprintf("this replica's store did not answer for a lease, so it let the run go; the run goes on from the store: attach again, on any replica, with after_seq %d", sent),
		map[string]string{"last_seq_sent": strconv.FormatInt(sent, 10)})
}

// expiredStatus refuses a cursor below what the journal keeps.
func expiredStatus(oldest int64) error {
	return statusError(OutOfRange, reasonEventsExpired,
		fmt.Sprintf("the run's journal keeps its events from seq %d on: attach with after_seq %d or more", oldest, oldest-1),
		map[string]string{"oldest_seq": strconv.FormatInt(oldest, 10)})
}

// stalledError is the RunError of a run whose client read nothing for the stall timeout.
func stalledError(stall time.Duration) *agentdv1.RunError {
	return &agentdv1.RunError{
		Code:    int32(ResourceExhausted),
		Reason:  reasonClientStalled,
		Message: wire.ProtoString(fmt.Sprintf("the client read nothing for %s while events waited for it, so the run ended; its outcome and transcript are in the status details", stall)),
	}
}

// sendStatus is the status of an RPC whose stream broke.
func sendStatus(err error) error {
	return statusError(Unavailable, reasonStreamBroken, "sending to the client failed: "+err.Error(), nil)
}
