package runs

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// keepAlive journals go_away when the server starts draining, until the returned stop
// is called. Heartbeats are each stream's own (outbox.startHeartbeats).
func (ss *session) keepAlive() (stop func()) {
	stopped := false
	stopDrain := context.AfterFunc(ss.srv.drainCtx, func() {
		left := max(ss.srv.drainDeadline().Sub(ss.srv.now()), 0)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if !stopped && ss.phase != phaseEnded {
			ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_GoAway{GoAway: &agentdv1.GoAway{TimeLeft: durationpb.New(left)}}})
		}
	})
	return func() {
		ss.mu.Lock()
		stopped = true
		ss.mu.Unlock()
		stopDrain()
	}
}
