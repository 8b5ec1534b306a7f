package service

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// keepAlive sends a heartbeat to the attached streams after each interval of silence,
// and journals go_away when the server starts draining, until the returned stop is
// called. It holds no goroutine while idle: a waiting run costs what its state costs,
// not a goroutine's stack.
func (ss *session) keepAlive() (stop func()) {
	interval := ss.srv.cfg.HeartbeatInterval
	stopped := false
	var t *time.Timer
	beat := func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if stopped || ss.ended {
			return
		}
		silent := ss.srv.now().Sub(ss.lastSent)
		if silent >= interval {
			ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_Heartbeat{Heartbeat: &agentdv1.Heartbeat{LastSeq: ss.seq}}}, false)
			silent = 0
		}
		t.Reset(interval - silent)
	}
	ss.mu.Lock()
	t = time.AfterFunc(interval, beat)
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
