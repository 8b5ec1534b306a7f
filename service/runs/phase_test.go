package runs

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/logtest"
)

// TestPhaseTable walks phaseNext: every phase is reached from the phases a run begins in
// (running from a start, taking up from the store), every phase but ended can still
// end, and ended is the last.
func TestPhaseTable(t *testing.T) {
	all := []phase{phaseRunning, phaseTakingUp, phaseParking, phaseParked, phaseEnded}
	if len(all) != len(phaseNext) {
		t.Fatalf("phaseNext has %d rows, for %d phases", len(phaseNext), len(all))
	}
	for _, p := range all {
		if strings.HasPrefix(p.String(), "phase(") {
			t.Errorf("%s has no name", p)
		}
	}
	reach := func(from ...phase) map[phase]bool {
		seen := map[phase]bool{}
		todo := slices.Clone(from)
		for len(todo) > 0 {
			p := todo[0]
			todo = todo[1:]
			if seen[p] {
				continue
			}
			seen[p] = true
			todo = append(todo, phaseNext[p]...)
		}
		return seen
	}
	begun := reach(phaseRunning, phaseTakingUp)
	for _, p := range all {
		if !begun[p] {
			t.Errorf("no run reaches %s", p)
		}
		if slices.Contains(phaseNext[p], p) {
			t.Errorf("%s lists itself: staying is no change", p)
		}
		if p != phaseEnded && !reach(p)[phaseEnded] {
			t.Errorf("a run %s can never end", p)
		}
		if slices.Contains(phaseNext[p], phaseTakingUp) {
			t.Errorf("%s leads to taking up, which only a run the store holds begins in", p)
		}
	}
	if len(phaseNext[phaseEnded]) > 0 {
		t.Errorf("phases follow ended: %v", phaseNext[phaseEnded])
	}
}

// TestSetPhase: every change the table lists is made, staying is no change, and any
// other change is reported as a fault (and made).
func TestSetPhase(t *testing.T) {
	var faults []string
	defer func(f func(*session, phase, phase)) { phaseFault = f }(phaseFault)
	phaseFault = func(_ *session, from, to phase) { faults = append(faults, fmt.Sprintf("%s to %s", from, to)) }
	for from := range phase(len(phaseNext)) {
		for to := range phase(len(phaseNext)) {
			faults = nil
			ss := &session{runID: "run_1", phase: from}
			ss.setPhaseLocked(to)
			allowed := from == to || slices.Contains(phaseNext[from], to)
			if ss.phase != to {
				t.Errorf("%s to %s: phase %s", from, to, ss.phase)
			}
			if allowed != (len(faults) == 0) {
				t.Errorf("%s to %s: faults %q, allowed by the table: %v", from, to, faults, allowed)
			}
		}
	}
}

// TestPhaseFault_Logged: a server logs a change the table does not allow, rather than
// failing the process.
func TestPhaseFault_Logged(t *testing.T) {
	var logs logtest.Buffer
	ss := &session{srv: &Manager{log: slog.New(slog.NewJSONHandler(&logs, nil))}, runID: "run_1"}
	faultReporter(false)(ss, phaseEnded, phaseRunning)
	if out := logs.String(); !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, `"from":"ended"`) || !strings.Contains(out, `"to":"running"`) {
		t.Fatalf("logged %q; want the change logged as an error", out)
	}
}
