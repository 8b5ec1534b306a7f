package service

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// execute runs the loop to its end, sending every event (if the RPC has a stream), and
// returns run_finished and the status the RPC ends with.
func (ss *session) execute(req *runtime.Request) (*agentdv1.RunFinished, error) {
	defer ss.cancel(nil)
	var rf *agentdv1.RunFinished
	for ev, err := range ss.entry.Runtime.Run(ss.ctx, req) {
		if err != nil {
			// Refused before it started: nothing was sent.
			return nil, invalidArgument(reasonInvalidArgument, fieldErrors{{Field: "start", Description: err.Error()}})
		}
		if fin, ok := ev.(*runtime.RunFinished); ok {
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
		return nil, statusError(codes.Internal, reasonInternal, "the run ended without run_finished", nil)
	}
	return rf, nil
}

// executeStreaming runs the session with heartbeats and go_away, and returns the status
// the RPC ends with once every event went out. A client that reads nothing for the stall
// timeout, during the run or after it, is let go: the RPC ends RESOURCE_EXHAUSTED
// (CLIENT_STALLED) with the run's outcome, transcript included, as a status detail.
func (ss *session) executeStreaming(req *runtime.Request) error {
	stop := ss.keepAlive()
	defer stop() // a panic in the run too: the timer must not re-arm for ever
	flushed := false
	defer func() {
		if !flushed {
			ss.out.abandon() // a panic: the sender goroutine ends now
		}
	}()
	rf, err := ss.execute(req)
	stop()
	flushed = true
	if !ss.out.flush(ss.srv.cfg.StallTimeout) && err == nil {
		if sendErr := ss.out.failed(); sendErr != nil {
			return sendStatus(sendErr)
		}
		re := stalledError(ss.srv.cfg.StallTimeout)
		return statusError(codes.ResourceExhausted, re.GetReason(), re.GetMessage(), nil, rf)
	}
	if err != nil {
		return err
	}
	return runStatus(rf.GetError())
}

// stalledError is the RunError of a run whose client read nothing for the stall timeout.
func stalledError(stall time.Duration) *agentdv1.RunError {
	return &agentdv1.RunError{
		Code:    int32(codes.ResourceExhausted),
		Reason:  reasonClientStalled,
		Message: protoString(fmt.Sprintf("the client read nothing for %s while events waited for it, so the run ended; its outcome and transcript are in the status details", stall)),
	}
}

// sendStatus is the status of an RPC whose stream broke.
func sendStatus(err error) error {
	return statusError(codes.Unavailable, reasonStreamBroken, "sending to the client failed: "+err.Error(), nil)
}
