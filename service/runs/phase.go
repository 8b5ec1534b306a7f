package runs

import (
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"testing"
)

// phase is where a run is in its life on this server. One field says it (session.phase,
// under mu), and one table says which phase may follow which (phaseNext):
// setPhaseLocked makes every change and refuses any other.
//
// Whether this server still holds the run is not a phase: a run in any phase may be let
// go of (session.moved), parked in a shared store as much as lost to another replica
// while it runs, and what it does next is that replica's.
type phase uint8

const (
	// phaseRunning: the run is this server's to run, from its start, a wake or a take-up,
	// until it parks or ends. A stretch of the loop runs, or is about to.
	phaseRunning phase = iota
	// phaseTakingUp: the store holds the run and this server takes it up (a run a
	// stopped process left, or another replica's): input waits for it to be ready
	// (session.ready), and it goes on running, parked or ended.
	phaseTakingUp
	// phaseParking: a wait found nobody who can answer, and the stretch unwinds to park
	// the run in the store (park.go). Input waits for the park to be over (parkDone).
	phaseParking
	// phaseParked: the run waits in the store with nothing of it running, for what
	// session.parked says; the next input wakes it, and its park timeout ends it.
	phaseParked
	// phaseEnded: run_finished is journaled, and nothing more is acked. No phase
	// follows.
	phaseEnded
)

var phaseNames = [...]string{"running", "taking up", "parking", "parked", "ended"}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// phaseNext says which phases may follow each.
var phaseNext = [...][]phase{
	// Parked without parking: a drain hands the run over to another replica.
	phaseRunning:  {phaseParking, phaseParked, phaseEnded},
	phaseTakingUp: {phaseRunning, phaseParked, phaseEnded},
	// Running again: the stretch ended without its end journaled (the run was let go
	// of, or refused before it started) while the park was prepared.
	phaseParking: {phaseParked, phaseEnded, phaseRunning},
	phaseParked:  {phaseRunning, phaseEnded},
	phaseEnded:   nil,
}

// phaseFault reports a change phaseNext does not allow, which setPhaseLocked then makes
// as asked. A server logs it. A test binary stops at once, with the stack: a panic would
// end no more than the run (runToEnd recovers), and so every test that runs the engine
// holds it to the table.
var phaseFault = faultReporter(testing.Testing())

func faultReporter(strict bool) func(ss *session, from, to phase) {
	return func(ss *session, from, to phase) {
		if strict {
			fmt.Fprintf(os.Stderr, "agentd: run %s: phase %s may not follow %s\n%s", ss.runID, to, from, debug.Stack())
			os.Exit(2)
		}
		ss.srv.log.Error("a run's phase changed in a way agentd does not expect", "run_id", ss.runID, "from", from.String(), "to", to.String())
	}
}

// setPhaseLocked moves the run to phase to; staying in a phase is no change. Called with
// mu held.
func (ss *session) setPhaseLocked(to phase) {
	from := ss.phase
	if from == to {
		return
	}
	if !slices.Contains(phaseNext[from], to) {
		phaseFault(ss, from, to)
	}
	ss.phase = to
	if ss.phaseCh != nil {
		close(ss.phaseCh)
		ss.phaseCh = nil
	}
}

// phaseChangedLocked returns a channel closed at the run's next change of phase.
func (ss *session) phaseChangedLocked() <-chan struct{} {
	if ss.phaseCh == nil {
		ss.phaseCh = make(chan struct{})
	}
	return ss.phaseCh
}
