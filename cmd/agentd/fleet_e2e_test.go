//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// The chaos test's settings; AGENTD_CHAOS_RUNS, AGENTD_CHAOS_REPLICAS,
// AGENTD_CHAOS_INFLIGHT and AGENTD_CHAOS_KILLS=0 change the first four.
const (
	chaosRuns     = 300
	chaosReplicas = 3
	chaosInflight = 30
	// chaosDelta is the model's pause before each delta: kills land mid-stream, and
	// the runs last long enough (about 30 s in all) for a dozen kills.
	chaosDelta = 40 * time.Millisecond
	// chaosKillEvery and chaosKillJitter space the kills: every 2 to 4 s.
	chaosKillEvery  = 2 * time.Second
	chaosKillJitter = 2 * time.Second
	// chaosRunTimeout bounds one run, takeovers included; chaosDeadline bounds them all.
	// Both are far beyond what a working fleet takes.
	chaosRunTimeout = time.Minute
	chaosDeadline   = 3 * time.Minute
	// chaosShownRuns is how many failing runs are shown in full.
	chaosShownRuns = 5
)

// TestFleetChaos runs a fleet of three agentd processes on one PostgreSQL schema, with
// short leases, and kills one with SIGKILL every 2 to 4 s (starting a new one in its
// place) while 300 runs go on, 30 at a time. Each run's client starts it on a Run
// stream (on_disconnect CONTINUE) of a replica at random, reads it there, or, for half
// the runs, drops that stream and attaches to a replica at random; it reattaches at
// random after the last seq it read when a stream breaks, and approves its
// ledger_write with SendRunInput on a replica at random, trying the same client key
// elsewhere until one answers. The model (fleetModel) and the tools (ledger) live in
// the test; the ledger is the oracle of what ran.
//
// Each run must complete, its client having read seq 1..N once each, the same bytes as
// the run's journal read afterwards from seq 0; the journal must keep the events'
// lifecycles; ledger_write must have run at most once per task, with the idempotency
// key <run_id>/<its call id> (call_w_N, or the new id agentd gave a call the model
// made again after its first stream was lost), and where it did not run, or its result
// was lost, the model must have been told its outcome is unknown; every ledger_read
// must carry its call's key the same way; each approval must have been asked once.
//
// It logs the takeover times (from a kill to the next event of each run the killed
// replica owned), the runs per second and the kills.
//
// With AGENTD_CHAOS_REPLICAS=1 AGENTD_CHAOS_KILLS=0 it checks the harness on one
// replica, which works while agentd has no fleet flags.
func TestFleetChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	runs := envInt(t, "AGENTD_CHAOS_RUNS", chaosRuns)
	replicas := envInt(t, "AGENTD_CHAOS_REPLICAS", chaosReplicas)
	inflight := envInt(t, "AGENTD_CHAOS_INFLIGHT", chaosInflight)
	kills := os.Getenv("AGENTD_CHAOS_KILLS") != "0"
	w := newFleetWorld(t, &fleetModel{delay: chaosDelta})
	switch {
	case !w.known && kills:
		t.Fatal("agentd has no --replica-id and --lease-ttl flags: without fleet mode no replica takes a killed replica's runs over (AGENTD_CHAOS_KILLS=0 runs without kills)")
	case !w.known:
		t.Logf("agentd has no --replica-id and --lease-ttl flags: %d replicas start without them", replicas)
	}
	fl := newFleet(t, w, "chaos", pgtest.DSN(t), replicas)
	fol := &follower{fl: fl, agent: "ledger", approve: true}

	ctx, cancel := context.WithTimeout(t.Context(), chaosDeadline)
	defer cancel()
	began := time.Now()
	done := make(chan struct{})
	var all []*fleetRun
	var elapsed time.Duration
	go func() {
		defer close(done)
		all = fol.runAll(ctx, runs, inflight, chaosRunTimeout)
		elapsed = time.Since(began)
	}()
	for waiting := true; waiting; {
		next := time.NewTimer(chaosKillEvery + rand.N(chaosKillJitter))
		select {
		case <-done:
			waiting = false
		case <-next.C:
			if kills {
				fl.replace()
			}
		}
		next.Stop()
	}

	stats := checkFleetRuns(t, fl, w, all, runs)
	if n, first := w.model.refused(); n > 0 {
		t.Errorf("the model was sent %d requests it could not answer; the first:\n%s", n, first)
	}
	takeovers := takeoverTimes(all, fl.kills)
	t.Logf("%d runs on %d replicas (%d at a time): %d completed in %s, %.1f runs/s; %d kills",
		runs, replicas, inflight, stats.completed, elapsed.Round(time.Millisecond), float64(stats.completed)/elapsed.Seconds(), len(fl.kills))
	if len(takeovers) > 0 {
		t.Logf("takeover, from a kill to the next event of a run the killed replica owned (%d runs): p50 %s, p99 %s, max %s",
			len(takeovers), percentile(takeovers, 50).Round(time.Millisecond), percentile(takeovers, 99).Round(time.Millisecond), percentile(takeovers, 100).Round(time.Millisecond))
	}
	t.Logf("%d reattachments in all; a Run start tried again for %d runs; %d decisions refused WAKE_FAILED and sent again; model requests: %d (%d tasks asked more than twice)",
		stats.reattached, stats.restarted, stats.wakeFailed, stats.modelCalls, stats.modelRedone)
	t.Logf("ledger_write: %d executions, %d outcomes unknown to the model (%d of them had run); ledger_read: %d executions, %d tasks read more than once",
		stats.writes, stats.unknown, stats.unknownRan, stats.reads, stats.readAgain)
}

// checkFleetRuns reads every run's whole journal from one replica and checks it, and
// what its client read, with chaosProblems; it reports the runs that fail, the worst
// first, and returns the figures.
func checkFleetRuns(t *testing.T, fl *fleet, w *fleetWorld, all []*fleetRun, runs int) chaosStats {
	t.Helper()
	// Every run's whole journal, from one replica, against what its client read.
	journals := make([][]*agentdv1.RunEvent, len(all))
	journalErrs := make([]error, len(all))
	reader := fl.pick()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, fr := range all {
		if fr == nil || fr.runID == "" {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// The journal of a run that did not finish is read as far as it goes.
			d := 30 * time.Second
			if fr.finish == nil {
				d = 2 * time.Second
			}
			rctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			journals[i], journalErrs[i] = readJournal(rctx, reader, fr.runID)
			if fr.finish == nil && rctx.Err() != nil {
				journalErrs[i] = nil
			}
		})
	}
	wg.Wait()

	var stats chaosStats
	type failure struct {
		fr    *fleetRun
		task  int
		probs []string
		rank  int // 0: the run did not complete; 1: other problems; 2: idempotency keys only
	}
	var fails []failure
	for i, fr := range all {
		if fr == nil {
			fails = append(fails, failure{task: i + 1, probs: []string{fmt.Sprintf("never started: the test's %s ran out first", chaosDeadline)}})
			continue
		}
		probs := chaosProblems(fr, w, journals[i], journalErrs[i], &stats)
		if len(probs) == 0 {
			continue
		}
		rank := 2
		switch {
		case fr.finish.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED:
			rank = 0
		case slices.ContainsFunc(probs, func(p string) bool { return !strings.Contains(p, "idempotency key") }):
			rank = 1
		}
		fails = append(fails, failure{fr: fr, task: fr.task, probs: probs, rank: rank})
	}
	if len(fails) > 0 {
		slices.SortStableFunc(fails, func(a, b failure) int { return a.rank - b.rank })
		type kind struct {
			runs    int
			example string
		}
		kinds := map[string]*kind{}
		for _, f := range fails {
			seen := map[string]bool{}
			for _, p := range f.probs {
				k := problemKind(p)
				if seen[k] {
					continue
				}
				seen[k] = true
				if kinds[k] == nil {
					kinds[k] = &kind{example: fmt.Sprintf("task %d: %s", f.task, p)}
				}
				kinds[k].runs++
			}
		}
		var summary []string
		for _, k := range slices.SortedFunc(maps.Keys(kinds), func(a, b string) int { return kinds[b].runs - kinds[a].runs }) {
			summary = append(summary, fmt.Sprintf("%d runs: %s\n\tfor one: %s", kinds[k].runs, k, kinds[k].example))
		}
		t.Errorf("%d runs of %d failed their checks; their problems, by how many runs had each:\n%s", len(fails), runs, strings.Join(summary, "\n"))
		for _, f := range fails[:min(len(fails), chaosShownRuns)] {
			if f.fr == nil {
				t.Errorf("task %d: %s", f.task, f.probs[0])
				continue
			}
			t.Errorf("task %d, run %s (%d streams, %d Run starts):\n\t%s", f.task, f.fr.runID, f.fr.streams, f.fr.starts, strings.Join(f.probs, "\n\t"))
		}
		if fr := fails[0].fr; fr != nil && fails[0].rank < 2 {
			t.Logf("the events of run %s (task %d) as its client read them:\n%s\nwhat the replicas logged about it:\n%s", fr.runID, fr.task, renderEvents(fr.evs), fl.logLines(fr.runID, 20))
		}
	}

	return stats
}

// chaosStats are the chaos test's figures.
type chaosStats struct {
	completed   int
	reattached  int
	wakeFailed  int
	restarted   int
	modelCalls  int
	modelRedone int
	writes      int
	unknown     int
	unknownRan  int
	reads       int
	readAgain   int
}

// chaosProblems checks one run of the chaos test: what its client read, its journal
// (or the error reading it), and the ledger's record of its task.
func chaosProblems(fr *fleetRun, w *fleetWorld, journal []*agentdv1.RunEvent, journalErr error, stats *chaosStats) []string {
	fr.mu.Lock()
	probs := slices.Clone(fr.problems)
	fr.mu.Unlock()
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	n := fmt.Sprint(fr.task)
	stats.reattached += max(fr.streams-1, 0)
	fr.mu.Lock()
	stats.wakeFailed += fr.wakeFailed
	fr.mu.Unlock()
	if fr.starts > 1 {
		stats.restarted++
	}
	calls := w.model.requests("task " + n)
	stats.modelCalls += calls
	if calls > 2 {
		stats.modelRedone++
	}
	if fr.runID == "" {
		return probs
	}
	switch {
	case fr.finish == nil:
		// follow said why.
	case fr.finish.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED:
		add("the run ended %v: %v", fr.finish.GetReason(), fr.finish.GetError())
	default:
		stats.completed++
	}
	for _, p := range journalProblems(fr.evs) {
		add("as read: %s", p)
	}
	if fr.finish == nil && int64(len(journal)) > fr.last {
		journal = journal[:fr.last] // what the client did not read is said above
	}
	if journalErr != nil {
		add("reading the journal from seq 0: %v", journalErr)
	} else {
		for _, p := range sameBytes(fr.raw, journal) {
			add("the journal and the client: %s", p)
		}
	}

	// The tool calls, as the events tell them. A call whose model stream was lost with
	// its replica ends cancelled, and the step asks the model again: agentd renames a
	// call the model gives an id the run used already, so the calls that ran are those
	// with a result.
	write, read := "call_w_"+n, "call_r_"+n
	for _, ev := range fr.evs {
		switch r := ev.GetToolCallResult(); r.GetName() {
		case "ledger_write":
			write = r.GetToolCallId()
		case "ledger_read":
			read = r.GetToolCallId()
		}
	}
	results := map[string]*agentdv1.ToolCallResult{}
	asked := 0
	for _, ev := range fr.evs {
		if r := ev.GetToolCallResult(); r != nil {
			results[r.GetToolCallId()] = r
		}
		if a := ev.GetApprovalRequested(); a != nil && a.GetToolCallId() == write {
			asked++
		}
		if a := ev.GetApprovalResolved(); a != nil && (a.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED || a.GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_CLIENT) {
			add("seq %d: the approval of %s resolved %v by %v, want APPROVED by the client", ev.GetSeq(), a.GetToolCallId(), a.GetOutcome(), a.GetDecidedBy())
		}
	}
	if asked == 0 && fr.finish != nil {
		add("no approval was asked for %s", write)
	}
	if r := results[read]; fr.finish != nil && (r == nil || r.GetIsError()) {
		add("the result of %s is %v, want the ledger's answer", read, r)
	}
	wr := results[write]
	unknown := wr != nil && wr.GetIsError() && strings.Contains(strings.ToLower(resultText(wr)), "unknown")
	if fr.finish != nil && wr == nil {
		add("no result for %s", write)
	}
	if wr != nil && wr.GetIsError() && !unknown {
		add("the result of %s is an error that does not say its outcome is unknown: %q", write, resultText(wr))
	}

	// The ledger: what ran.
	writes, reads := w.ledger.executions(n)
	stats.writes += len(writes)
	stats.reads += len(reads)
	if len(reads) > 1 {
		stats.readAgain++
	}
	if unknown {
		stats.unknown++
		if len(writes) > 0 {
			stats.unknownRan++
		}
	}
	if len(writes) > 1 {
		add("ledger_write ran %d times for task %s (keys %q): a tool that is not idempotent ran again", len(writes), n, entryKeys(writes))
	}
	if len(writes) == 0 && wr != nil && !unknown {
		add("ledger_write never ran for task %s, yet its result says %q", n, resultText(wr))
	}
	for _, e := range writes {
		if want := fr.runID + "/" + write; e.key != want {
			add("ledger_write ran with the idempotency key %q in _meta[%q], want %q", e.key, idempotencyMetaKey, want)
		}
	}
	for _, e := range reads {
		runID, _, _ := strings.Cut(e.key, "/")
		if e.key != "" && runID != fr.runID && fr.starts > 1 {
			// A Run start that broke before run_started may have left a run going that
			// no client follows; its calls carry its own run's id.
			continue
		}
		if want := fr.runID + "/" + read; e.key != want {
			add("ledger_read ran with the idempotency key %q in _meta[%q], want %q", e.key, idempotencyMetaKey, want)
		}
	}
	return probs
}

// entryKeys returns the idempotency keys of es.
func entryKeys(es []ledgerEntry) []string {
	var keys []string
	for _, e := range es {
		keys = append(keys, e.key)
	}
	return keys
}

// takeoverTimes returns, for each kill, how long each run the killed replica owned
// went without an event: the time from the kill to the run's next event, by the events'
// server times, for the runs that were neither finished nor waiting for a decision.
// Which replica owns a run, the client knows only in part: the replica that started
// it, or the one that took the decision that woke it after it parked, until that
// replica is killed. A run whose owner it does not know counts when its gap is longer
// than a run of a live replica stays silent (ledger_write takes at most 300ms).
func takeoverTimes(runs []*fleetRun, kills []fleetKill) []time.Duration {
	const silent = 500 * time.Millisecond
	var out []time.Duration
	for _, fr := range runs {
		if fr == nil || len(fr.evs) == 0 {
			continue
		}
		fr.mu.Lock()
		owners := slices.Clone(fr.owners)
		fr.mu.Unlock()
		slices.SortFunc(owners, func(a, b ownerAt) int { return a.at.Compare(b.at) })
		owner, next := "", 0
		for _, k := range kills {
			for next < len(owners) && !owners[next].at.After(k.at) {
				owner = owners[next].id
				next++
			}
			known, killed := owner != "", owner == k.id
			if killed {
				owner = "" // whoever takes the run over, the client does not know
			}
			var before, after *agentdv1.RunEvent
			for _, ev := range fr.evs {
				if ev.GetTime().AsTime().After(k.at) {
					after = ev
					break
				}
				before = ev
			}
			if before == nil || after == nil || before.GetApprovalRequested() != nil {
				continue
			}
			if gap := after.GetTime().AsTime().Sub(k.at); killed || !known && gap > silent {
				out = append(out, gap)
			}
		}
	}
	return out
}

// problemIDs matches what differs between runs in their problems: ids, numbers and
// quoted text.
var problemIDs = regexp.MustCompile(`"[^"]*"|\b(run|appr|step|msg|thread)_[a-z0-9]{8,}\b|\bcall_[wr]_\d+|\d+(\.\d+)?(ms|s)?`)

// problemKind returns p without what differs between runs, cut to its first line.
func problemKind(p string) string {
	k, _, _ := strings.Cut(problemIDs.ReplaceAllString(p, "…"), "\n")
	if len(k) > 110 {
		k = k[:110] + "…"
	}
	return k
}

// The fencing test's settings.
const (
	// fencingStoryWords and fencingStoryDelta make the run's model answer stream for
	// about 6 s, longer than a takeover takes.
	fencingStoryWords = 120
	fencingStoryDelta = 50 * time.Millisecond
	// fencingWait bounds each wait on the fleet; reaching one means it is broken.
	fencingWait = 30 * time.Second
	// fencingGrace is how long the paused replica's stream may go on after the run
	// finished before the test stops reading it.
	fencingGrace = 10 * time.Second
)

// TestFleetFencing pauses the replica that owns a run (SIGSTOP) while the model
// streams, past its lease, until the other replica has taken the run over, then lets it
// go on (SIGCONT). The paused owner must write nothing more to the run: the run's
// journal, read from the other replica once the run finished, is one gap-free seq
// sequence with one run_started and one run_finished, no event for an id after its
// lifecycle ended, and no event stamped before an earlier one (what the old owner
// stamped before the pause, written after it), and the text block and step the old
// owner left open closed as abandoned; what the old owner sent its client,
// before and after the pause, is in that journal, byte for byte, at the same seq.
func TestFleetFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	w := newFleetWorld(t, &fleetModel{delay: chaosDelta, storyDelay: fencingStoryDelta, storyWords: fencingStoryWords})
	if !w.known {
		t.Fatal("agentd has no --replica-id and --lease-ttl flags: fleet mode, whose fencing this test checks, is not there")
	}
	fl := newFleet(t, w, "fencing", pgtest.DSN(t), 2)
	a, b := fl.all[0], fl.all[1]

	started, err := a.client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{
		Agent: "ledger", Input: "story 1",
		Config: &agentdv1.RunConfig{OnDisconnect: agentdv1.OnDisconnect_ON_DISCONNECT_CONTINUE},
	}})
	if err != nil {
		t.Fatal(err)
	}
	onA := watchEvents(t, func() (*agentdv1.RunEvent, error) {
		resp, err := started.Recv()
		return resp.GetEvent(), err
	})
	runID := onA.until(t, "run_started on A", func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
	attached, err := b.client.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	onB := watchEvents(t, func() (*agentdv1.RunEvent, error) {
		resp, err := attached.Recv()
		return resp.GetEvent(), err
	})
	deltas := 0
	onA.until(t, "A streaming the model's answer", func(ev *agentdv1.RunEvent) bool {
		if ev.GetTextDelta() != nil {
			deltas++
		}
		return deltas == 5
	})

	// Whatever happens next, A does not stay stopped: this runs before the cleanup that
	// stops A, registered when A started.
	t.Cleanup(func() { syscall.Kill(a.p.Pid(), syscall.SIGCONT) })
	signalAgentd(t, a.p, syscall.SIGSTOP)
	waitStopped(t, a.p.Pid())
	stopped := time.Now()
	// Only another replica stamps an event after A stopped.
	took := onB.until(t, "B taking the run over", func(ev *agentdv1.RunEvent) bool {
		return ev.GetSeq() > 0 && ev.GetTime().AsTime().After(stopped)
	})
	takeover := took.GetTime().AsTime().Sub(stopped)
	signalAgentd(t, a.p, syscall.SIGCONT)
	resumed := time.Now()
	fin := onB.until(t, "the run's run_finished on B", func(ev *agentdv1.RunEvent) bool { return ev.GetRunFinished() != nil }).GetRunFinished()
	aEnded := onA.wait(fencingGrace)

	journal, err := readJournal(t.Context(), b, runID)
	if err != nil {
		t.Fatal(err)
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Errorf("the run ended %v: %v", fin.GetReason(), fin.GetError())
	}
	for _, p := range journalProblems(journal) {
		t.Errorf("the journal: %s", p)
	}
	// What A stamped before it stopped and wrote after it went on would come after the
	// events of B, stamped later.
	for i := 1; i < len(journal); i++ {
		if prev, ev := journal[i-1], journal[i]; ev.GetTime().AsTime().Before(prev.GetTime().AsTime()) {
			t.Errorf("seq %d was stamped %s before seq %d, which precedes it: %v", ev.GetSeq(), prev.GetTime().AsTime().Sub(ev.GetTime().AsTime()), prev.GetSeq(), ev)
		}
	}
	var abandonedBlock, abandonedStep bool
	for _, ev := range journal {
		if !ev.GetTime().AsTime().After(stopped) {
			continue
		}
		abandonedBlock = abandonedBlock || ev.GetMessageFinished().GetAbandoned()
		abandonedStep = abandonedStep || ev.GetStepFinished().GetAbandoned()
	}
	if !abandonedBlock || !abandonedStep {
		t.Errorf("after A stopped, message_finished{abandoned} %t, step_finished{abandoned} %t: want the text block and the step A left open closed as abandoned", abandonedBlock, abandonedStep)
	}
	bEvs, _ := onB.events()
	for _, p := range sameBytes(rawBySeq(t, "B's client", bEvs), journal) {
		t.Errorf("B's client and the journal: %s", p)
	}
	aEvs, aErr := onA.events()
	sentAfter := 0
	for _, ev := range aEvs {
		switch {
		case ev.GetSeq() < 1 || ev.GetSeq() > int64(len(journal)):
			t.Errorf("A sent seq %d, which the journal of %d events does not have: %v", ev.GetSeq(), len(journal), ev)
		case !bytes.Equal(marshalEvent(ev), marshalEvent(journal[ev.GetSeq()-1])):
			t.Errorf("A sent seq %d as\n  %v\nthe journal has\n  %v", ev.GetSeq(), ev, journal[ev.GetSeq()-1])
		}
		if ev.GetTime().AsTime().After(stopped) {
			sentAfter++
		}
	}
	rawBySeq(t, "A's client", aEvs)
	if n, first := w.model.refused(); n > 0 {
		t.Errorf("the model was sent %d requests it could not answer; the first:\n%s", n, first)
	}
	if t.Failed() {
		t.Logf("the journal:\n%s\nwhat A sent:\n%s\nwhat the replicas logged about the run:\n%s", renderEvents(journal), renderEvents(aEvs), fl.logLines(runID, 30))
	}
	aEnd := "was still open " + fencingGrace.String() + " after the run finished"
	if aEnded {
		aEnd = fmt.Sprintf("ended: %v", aErr)
	}
	t.Logf("B took the run over %s after A stopped (lease %s); A went on %s later; A's stream sent %d events stamped after the stop and %s; %d events in the journal; the model was asked the story %d times",
		takeover.Round(time.Millisecond), fleetLeaseTTL, resumed.Sub(stopped).Round(time.Millisecond), sentAfter, aEnd, len(journal), w.model.requests("story 1"))
}

// rawBySeq returns the bytes of a client's numbered events by seq, failing t where the
// client read a seq twice or out of order.
func rawBySeq(t *testing.T, who string, evs []*agentdv1.RunEvent) map[int64][]byte {
	t.Helper()
	raw := map[int64][]byte{}
	last := int64(0)
	for _, ev := range evs {
		if ev.GetSeq() <= last {
			t.Errorf("%s read seq %d after seq %d", who, ev.GetSeq(), last)
		}
		last = ev.GetSeq()
		raw[ev.GetSeq()] = marshalEvent(ev)
	}
	return raw
}

// waitStopped waits until the process pid is stopped, where /proc says so; elsewhere it
// returns at once.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(fencingWait); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		// The state follows the command's name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop: %s", pid, b)
		}
	}
}

// eventWatch reads a stream of a run's events on a goroutine of its own, keeping them, so
// that the test can wait for one while it does other things. Its methods are safe for
// concurrent use.
type eventWatch struct {
	mu   sync.Mutex
	evs  []*agentdv1.RunEvent // numbered events only
	err  error                // how the stream ended
	more chan struct{}        // receives, without blocking, after each event
	done chan struct{}        // closed once the stream has ended
}

// watchEvents reads recv until it fails. The stream must end with the test (a stream of
// t.Context()); the test waits for the goroutine when it ends.
func watchEvents(t *testing.T, recv func() (*agentdv1.RunEvent, error)) *eventWatch {
	w := &eventWatch{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			ev, err := recv()
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			if ev.GetSeq() > 0 {
				w.evs = append(w.evs, ev)
			}
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { <-w.done })
	return w
}

// until returns the first event that matches, waiting for it at most fencingWait; the
// stream ending first, or the wait running out, fails t. match sees each event once.
func (w *eventWatch) until(t *testing.T, what string, match func(*agentdv1.RunEvent) bool) *agentdv1.RunEvent {
	t.Helper()
	timer := time.NewTimer(fencingWait)
	defer timer.Stop()
	for seen := 0; ; {
		w.mu.Lock()
		evs, err := w.evs[seen:], w.err
		w.mu.Unlock()
		for _, ev := range evs {
			seen++
			if match(ev) {
				return ev
			}
		}
		if err != nil {
			t.Fatalf("waiting for %s: the stream ended %v after %d events", what, err, seen)
		}
		select {
		case <-w.more:
		case <-w.done:
		case <-timer.C:
			t.Fatalf("no %s within %s (%d events so far)", what, fencingWait, seen)
		}
	}
}

// wait waits at most d for the stream to end, and reports whether it did.
func (w *eventWatch) wait(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-w.done:
		return true
	case <-timer.C:
		return false
	}
}

// events returns the numbered events read so far and how the stream ended (nil while
// it is open).
func (w *eventWatch) events() ([]*agentdv1.RunEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.evs), w.err
}

// TestFleetThroughput measures, for the notes, the runs per second a fleet of three
// replicas completes against one replica, on the same workload (the agent without
// approvals, the model and tools without pauses, 60 runs at a time), and logs both and
// their ratio. It is a load figure, not a check: it runs only with
// AGENTD_FLEET_BENCH=1 (AGENTD_FLEET_BENCH_RUNS sets the runs, 1000 by default).
func TestFleetThroughput(t *testing.T) {
	if os.Getenv("AGENTD_FLEET_BENCH") != "1" {
		t.Skip("a load figure for the notes, not a check: set AGENTD_FLEET_BENCH=1 to run it")
	}
	runs := envInt(t, "AGENTD_FLEET_BENCH_RUNS", 1000)
	inflight := envInt(t, "AGENTD_FLEET_BENCH_INFLIGHT", 60)
	w := newFleetWorld(t, &fleetModel{})
	w.ledger.writeDelay = func(string) time.Duration { return 0 }
	rate := map[int]float64{}
	for _, replicas := range []int{1, 3} {
		fl := newFleet(t, w, fmt.Sprintf("bench%d", replicas), pgtest.DSN(t), replicas)
		fol := &follower{fl: fl, agent: "ledger-auto"}
		began := time.Now()
		all := fol.runAll(t.Context(), runs, inflight, time.Minute)
		elapsed := time.Since(began)
		completed, failed := 0, 0
		for i, fr := range all {
			switch {
			case fr != nil && fr.finish.GetReason() == agentdv1.RunEndReason_RUN_END_REASON_COMPLETED:
				completed++
			case fr == nil:
				failed++
				t.Errorf("%d replicas, task %d: never started", replicas, i+1)
			default:
				if failed++; failed <= chaosShownRuns {
					fr.mu.Lock()
					t.Errorf("%d replicas, task %d, run %s: ended %v: %q", replicas, fr.task, fr.runID, fr.finish, fr.problems)
					fr.mu.Unlock()
				}
			}
		}
		rate[replicas] = float64(completed) / elapsed.Seconds()
		t.Logf("replicas: %d; %d of %d runs completed in %s: %.1f runs/s", replicas, completed, runs, elapsed.Round(time.Millisecond), rate[replicas])
		for _, r := range fl.all {
			if err := r.p.Terminate(e2eStopWithin); err != nil {
				t.Errorf("%s: %v", r.id, err)
			}
		}
	}
	t.Logf("runs per second: %.1f on one replica, %.1f on three: ×%.2f", rate[1], rate[3], rate[3]/rate[1])
}
