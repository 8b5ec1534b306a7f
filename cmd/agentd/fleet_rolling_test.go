//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// TestFleetRollingRestart replaces a fleet of three replicas one at a time, as a rolling
// update does (a new replica started, then an old one sent SIGTERM and waited for),
// while 30 long runs go on, and counts how many times each run was handed over: a
// drained replica parks its runs due at once for another to take up, and a run that
// goes to the next old replica to drain moves again. Every run must complete. It logs
// how often the runs moved. A figure for the notes, not a check: set
// AGENTD_FLEET_BENCH=1 to run it.
func TestFleetRollingRestart(t *testing.T) {
	if os.Getenv("AGENTD_FLEET_BENCH") != "1" {
		t.Skip("a figure for the notes, not a check: set AGENTD_FLEET_BENCH=1 to run it")
	}
	const runs = 30
	w := newFleetWorld(t, &fleetModel{storyDelay: 40 * time.Millisecond, storyWords: 800})
	if !w.known {
		t.Skip("agentd has no fleet flags")
	}
	fl := newFleet(t, w, "rolling", pgtest.DSN(t), 3)
	old := slices.Clone(fl.all)
	ids := make([]string, runs)
	for i := range runs {
		r := old[i%len(old)]
		st, err := r.client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{
			Agent: "ledger-auto", Input: fmt.Sprintf("story %d", i+1),
		}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = resp.GetEvent().GetRunId()
	}
	began := time.Now()
	for _, r := range old {
		fl.start()
		fl.retire(r)
		if err := r.p.Terminate(e2eStopWithin); err != nil {
			t.Fatalf("%s: %v", r.id, err)
		}
	}
	t.Logf("three replicas replaced in %s", time.Since(began).Round(time.Millisecond))
	reader := fl.pick()
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			evs, err := readJournal(ctx, reader, id)
			if err != nil {
				t.Errorf("story %d, run %s: %v", i+1, id, err)
				return
			}
			if rf := evs[len(evs)-1].GetRunFinished(); rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Errorf("story %d, run %s ended %v", i+1, id, rf)
			}
		})
	}
	wg.Wait()
	moves := map[string]int{}
	for _, r := range fl.all {
		for line := range strings.Lines(r.p.Log()) {
			if !strings.Contains(line, `"parked run taken up"`) {
				continue
			}
			for _, id := range ids {
				if strings.Contains(line, id) {
					moves[id]++
				}
			}
		}
	}
	hist := map[int]int{}
	most, total := 0, 0
	for _, id := range ids {
		hist[moves[id]]++
		most, total = max(most, moves[id]), total+moves[id]
	}
	var parts []string
	for n := 0; n <= most; n++ {
		parts = append(parts, fmt.Sprintf("%d runs moved %d times", hist[n], n))
	}
	t.Logf("a rolling restart of 3 replicas with %d runs going on: %d moves in all, at most %d for a run (%s)", runs, total, most, strings.Join(parts, ", "))
}
