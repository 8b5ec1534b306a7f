package service

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// keepAlive sends a heartbeat after each interval of silence, and go_away when the server
// starts draining, until the returned stop is called; it also ends the run of a client
// that read nothing for the stall timeout. It holds no goroutine while idle: a parked run
// costs what its state costs, not a goroutine's stack.
func (ss *session) keepAlive() (stop func()) {
	interval := ss.srv.cfg.HeartbeatInterval
	stallCheck := ss.srv.cfg.StallTimeout / 4
	stopped := false
	var t *time.Timer
	beat := func() {
		if ss.out.stalledFor() >= ss.srv.cfg.StallTimeout {
			ss.stall()
			return
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if stopped || ss.ended {
			return
		}
		silent := ss.srv.now().Sub(ss.lastSent)
		if silent >= interval {
			// Behind events the client has not read yet, a heartbeat says nothing.
			if !ss.out.pending() {
				ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_Heartbeat{Heartbeat: &agentdv1.Heartbeat{LastSeq: ss.seq}}}, false)
			}
			silent = 0
		}
		t.Reset(min(interval-silent, stallCheck))
	}
	ss.mu.Lock()
	t = time.AfterFunc(min(interval, stallCheck), beat)
	ss.mu.Unlock()
	stopDrain := context.AfterFunc(ss.srv.drainCtx, func() {
		left := max(ss.srv.drainDeadline().Sub(ss.srv.now()), 0)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if !stopped && !ss.ended {
			ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_GoAway{GoAway: &agentdv1.GoAway{TimeLeft: durationpb.New(left)}}}, true)
		}
	})
	return func() {
		ss.mu.Lock()
		stopped = true
		ss.mu.Unlock()
		t.Stop()
		stopDrain()
	}
}

// stall ends the run of a client that has read nothing for the stall timeout: what is
// queued for it is dropped, and the run ends FAILED (CLIENT_STALLED) with its transcript,
// which the RPC's status carries.
func (ss *session) stall() {
	ss.srv.log.Warn("the client read nothing for the stall timeout: ending its run", "run_id", ss.runID, "stall_timeout", ss.srv.cfg.StallTimeout.String())
	ss.out.abandon()
	ss.cancel(errClientStalled)
}
