//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// TestFleetStoreCost measures what paced runs cost PostgreSQL: one replica on a schema
// of its own runs AGENTD_STORE_COST_RUNS runs (100) of the medium workload at 50 deltas
// a second, AGENTD_STORE_COST_INFLIGHT (50) at a time, each read to its end by a
// StartRun client, and the test reports per run the transactions, the rows written and
// updated, the statements (when pg_stat_statements is loaded), the WAL written
// (cluster-wide: run it alone), and the runs table's size. A figure for the notes, not
// a check: set AGENTD_FLEET_BENCH=1 to run it.
func TestFleetStoreCost(t *testing.T) {
	if os.Getenv("AGENTD_FLEET_BENCH") != "1" {
		t.Skip("a load figure for the notes, not a check: set AGENTD_FLEET_BENCH=1 to run it")
	}
	runs := envInt(t, "AGENTD_STORE_COST_RUNS", 100)
	inflight := envInt(t, "AGENTD_STORE_COST_INFLIGHT", 50)
	dsn := pgtest.DSN(t)
	p := agentdtest.Start(t, agentdtest.Build(t, "."), agentdtest.Options{Args: []string{
		"--store", dsn, "--model", "workload:medium@50", "--replica-id", "cost-1", "--lease-ttl", "10s",
	}})
	client := agentdv1.NewAgentServiceClient(p.Dial(t))
	db, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var schema string
	if err := db.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	var statements bool
	db.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements')`).Scan(&statements)
	if !statements {
		if _, err := db.Exec(t.Context(), `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err == nil {
			statements = true
		}
	}
	if statements {
		if _, err := db.Exec(t.Context(), `SELECT pg_stat_statements_reset()`); err != nil {
			t.Logf("pg_stat_statements is not loaded (shared_preload_libraries): statements are not counted: %v", err)
			statements = false
		}
	}
	before := readStoreCounters(t, db, schema, statements)
	began := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, inflight)
	var mu sync.Mutex
	var events, failed int
	for i := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			st, err := client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: fmt.Sprintf("run %d", i)}})
			n := 0
			for err == nil {
				var resp *agentdv1.StartRunResponse
				if resp, err = st.Recv(); err == nil {
					n++
					if rf := resp.GetEvent().GetRunFinished(); rf != nil && rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
						err = fmt.Errorf("run ended %v", rf)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			events += n
			if !strings.Contains(err.Error(), "EOF") {
				failed++
				t.Errorf("run %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	time.Sleep(2 * time.Second) // the statistics of other backends are flushed within a second
	after := readStoreCounters(t, db, schema, statements)
	per := func(a, b int64) string { return fmt.Sprintf("%.1f", float64(a-b)/float64(runs)) }
	t.Logf("%d runs of workload:medium@50 (%d at a time) in %s, %.0f events per run read by their clients", runs, inflight, elapsed.Round(time.Millisecond), float64(events)/float64(runs))
	t.Logf("per run: transactions %s, statements %s, run_events rows inserted %s, runs rows updated %s (HOT %s), WAL %s bytes",
		per(after.xacts, before.xacts), per(after.statements, before.statements), per(after.eventRows, before.eventRows),
		per(after.runUpdates, before.runUpdates), per(after.runHOT, before.runHOT), per(after.wal, before.wal))
	t.Logf("the runs table after: %d KiB for %d rows (heap %d KiB, TOAST %d KiB, indexes %d KiB), %d dead tuples; run_events %d KiB",
		after.runsBytes/1024, after.runsRows, after.runsHeap/1024, after.runsToast/1024, after.runsIndexes/1024, after.runsDead, after.eventsBytes/1024)
	if !statements {
		t.Logf("statements not counted: load pg_stat_statements (shared_preload_libraries) to count them")
	}
}

// storeCounters are PostgreSQL's counters that TestFleetStoreCost reads.
type storeCounters struct {
	xacts, statements, eventRows, runUpdates, runHOT, wal int64
	runsBytes, runsRows, runsDead                         int64
	runsHeap, runsToast, runsIndexes, eventsBytes         int64
}

func readStoreCounters(t *testing.T, db *pgx.Conn, schema string, statements bool) storeCounters {
	t.Helper()
	var c storeCounters
	err := db.QueryRow(t.Context(), `SELECT
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
		(SELECT n_tup_ins FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'run_events'),
		(SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'runs'),
		(SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'runs'),
		(SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'runs'),
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
		pg_total_relation_size(quote_ident($1) || '.runs'),
		pg_relation_size(quote_ident($1) || '.runs'),
		pg_table_size(quote_ident($1) || '.runs') - pg_relation_size(quote_ident($1) || '.runs'),
		pg_indexes_size(quote_ident($1) || '.runs'),
		pg_total_relation_size(quote_ident($1) || '.run_events'),
		(SELECT count(*) FROM runs)`, schema).
		Scan(&c.xacts, &c.eventRows, &c.runUpdates, &c.runHOT, &c.runsDead, &c.wal, &c.runsBytes, &c.runsHeap, &c.runsToast, &c.runsIndexes, &c.eventsBytes, &c.runsRows)
	if err != nil {
		t.Fatal(err)
	}
	if statements {
		if err := db.QueryRow(t.Context(), `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat%'`).Scan(&c.statements); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
