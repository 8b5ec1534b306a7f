//go:build unix

package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// takeoverRuns is how many runs TestFleetMassTakeover has a replica hold when it dies;
// AGENTD_TAKEOVER_RUNS changes it (1,000 for the figure the README gives).
const takeoverRuns = 150

// TestFleetMassTakeover has one replica hold many runs, each inside a slow tool call
// (ledger_write), starts two more, kills the first with SIGKILL, and measures, for each
// run, the time from the kill to its first event journaled by another replica: the
// leases run out after --lease-ttl, then the survivors claim the runs in batches and
// take them up. Every run must then complete, ledger_write having run once for each
// (the survivors tell the model its outcome is unknown; they do not run it again).
//
// It logs the takeover times against the lease; the figure is not checked against a
// bound, which a busy machine would break.
func TestFleetMassTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	n := envInt(t, "AGENTD_TAKEOVER_RUNS", takeoverRuns)
	w := newFleetWorld(t, &fleetModel{})
	if !w.known {
		t.Skip("agentd has no fleet flags")
	}
	// Every ledger_write waits until the test ends: its replica dies first, and a
	// request of a process killed is not always seen to end.
	w.ledger.writeDelay = func(string) time.Duration { return 10 * time.Minute }
	w.ledger.halt = make(chan struct{})
	t.Cleanup(func() { close(w.ledger.halt) })
	dsn := pgtest.DSN(t)
	fl := newFleet(t, w, "takeover", dsn, 0)
	doomed := fl.startWith("--max-runs", fmt.Sprint(2*n))

	// n runs on the doomed replica, each left inside its ledger_write.
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	began := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ids[i] = startIntoTool(t, doomed, i+1)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d runs started on %s and in their ledger_write in %s", n, doomed.id, time.Since(began).Round(time.Millisecond))
	fl.start()
	fl.start()

	db, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	before := lastSeqs(t, db, ids)
	// When the last of the doomed replica's leases runs out, by the database's clock.
	var leftSeconds float64
	if err := db.QueryRow(t.Context(), `SELECT extract(epoch FROM max(lease_until) - now())::float8 FROM runs WHERE id = ANY($1)`, ids).Scan(&leftSeconds); err != nil {
		t.Fatal(err)
	}
	leaseLeft := time.Duration(leftSeconds * float64(time.Second))
	killed := time.Now()
	fl.kill(doomed)

	// From the kill to each run's first event after it.
	took := map[string]time.Duration{}
	deadline := killed.Add(fleetLeaseTTL + 2*time.Minute)
	for len(took) < n && time.Now().Before(deadline) {
		now := lastSeqs(t, db, ids)
		at := time.Since(killed)
		for id, seq := range now {
			if _, done := took[id]; !done && seq > before[id] {
				took[id] = at
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(took) < n {
		t.Fatalf("%d of %d runs went on within %s of the kill", len(took), n, deadline.Sub(killed))
	}
	times := slices.Collect(func(yield func(time.Duration) bool) {
		for _, d := range took {
			if !yield(d) {
				return
			}
		}
	})
	last := percentile(times, 100)
	t.Logf("mass takeover of %d runs (lease %s, 2 survivors): the leases ran out %s after the kill; the first run went on %s after the kill, p50 %s, p99 %s, the last %s: its lease + %s",
		n, fleetLeaseTTL, leaseLeft.Round(time.Millisecond), percentile(times, 0).Round(time.Millisecond), percentile(times, 50).Round(time.Millisecond),
		percentile(times, 99).Round(time.Millisecond), last.Round(time.Millisecond), (last - leaseLeft).Round(time.Millisecond))

	// Every run completes, its write run once.
	reader := fl.pick()
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			evs, err := readJournal(ctx, reader, id)
			if err != nil {
				t.Errorf("task %d, run %s: reading its journal: %v\nthe events read:\n%s\nwhat the replicas logged about it:\n%s", i+1, id, err, renderEvents(evs), fl.logLines(id, 20))
				return
			}
			if rf := evs[len(evs)-1].GetRunFinished(); rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Errorf("task %d, run %s ended %v", i+1, id, rf)
			}
			if writes, _ := w.ledger.executions(fmt.Sprint(i + 1)); len(writes) != 1 {
				t.Errorf("task %d, run %s: ledger_write ran %d times, want once", i+1, id, len(writes))
			}
		})
	}
	wg.Wait()
}

// startIntoTool starts task n on r with StartRun, reads until its ledger_write has
// started, and leaves the run to go on without a client. It returns the run's id.
func startIntoTool(t *testing.T, r *replica, n int) string {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := r.client.StartRun(ctx, &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{
		Agent: "ledger-auto", RequestId: fmt.Sprintf("task-%d", n), Input: fmt.Sprintf("task %d", n),
	}})
	if err != nil {
		t.Errorf("task %d: StartRun: %v", n, err)
		return ""
	}
	var id string
	for {
		resp, err := st.Recv()
		if err != nil {
			t.Errorf("task %d: StartRun ended %v before ledger_write started", n, err)
			return id
		}
		ev := resp.GetEvent()
		id = ev.GetRunId()
		if ev.GetToolExecutionStarted().GetToolCallId() == fmt.Sprintf("call_w_%d", n) {
			return id
		}
	}
}

// lastSeqs reads the last seq the store has of each run of ids.
func lastSeqs(t *testing.T, db *pgx.Conn, ids []string) map[string]int64 {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT run_id, max(last_seq) FROM run_events WHERE run_id = ANY($1) GROUP BY run_id`, ids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	var id string
	var seq int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error { out[id] = seq; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
