package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/service/servicetest"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// e2eKey is the continuation key of the end-to-end runs that outlive a process: a run
// taken up after a restart resumes from a continuation the first process sealed.
const e2eKey = "AGENTD_CONTINUATION_KEY=a continuation key for the end-to-end tests, 32+ bytes"

// storeArgs are the store flags of each store the end-to-end tests run on: the default
// (memory), and PostgreSQL in a schema of the test's own.
func storeArgs(t *testing.T) map[string][]string {
	dsn, schema := pgtest.NewSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return map[string][]string{
		"memory":   nil,
		"postgres": {"--store", dsn + "&search_path=" + schema},
	}
}

// openRun starts spec on a Run stream of a connection of its own, which kill ends.
func openRun(t *testing.T, p *agentdtest.Process, spec *agentdv1.RunSpec) (s *servicetest.Stream, kill func()) {
	t.Helper()
	conn := p.Dial(t)
	ctx, cancel := context.WithCancel(t.Context())
	rc, err := agentdv1.NewAgentServiceClient(conn).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s = servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
	return s, func() { cancel(); conn.Close() }
}

// readAll reads an AttachRun stream to its end.
func readAll(t *testing.T, stream grpc.ServerStreamingClient[agentdv1.AttachRunResponse]) []*agentdv1.RunEvent {
	t.Helper()
	var evs []*agentdv1.RunEvent
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("AttachRun ended %v after %d events", err, len(evs))
		}
		evs = append(evs, resp.GetEvent())
	}
}

// upTo returns the numbered events of evs up to seq last.
func upTo(evs []*agentdv1.RunEvent, last int64) []*agentdv1.RunEvent {
	var out []*agentdv1.RunEvent
	for _, ev := range servicetest.Numbered(evs) {
		if ev.GetSeq() <= last {
			out = append(out, ev)
		}
	}
	return out
}

// Runs outlive their streams, on the real binary, on the default store and on
// PostgreSQL: a client killed while the model streams, and one killed while an approval
// waits, are followed by a client that attaches from the last seq it saw, and the two
// together saw the run a watcher attached from the start saw, event for event; the
// approval is re-sent in attached and decided with SendRunInput from another connection.
func TestEndToEndRunsOutliveTheirStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	for name, args := range storeArgs(t) {
		t.Run(name, func(t *testing.T) {
			p := startAgentd(t, append([]string{"--demo-delay", "30ms"}, args...))
			c := agentdv1.NewAgentServiceClient(p.Dial(t))

			t.Run("killed while the model streams", func(t *testing.T) {
				first, kill := openRun(t, p, &agentdv1.RunSpec{Input: "what time is it?"})
				runID := first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
				watcher, err := c.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: runID})
				if err != nil {
					t.Fatal(err)
				}
				last := first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetTextDelta() != nil }).GetSeq()
				kill()
				second := servicetest.Attach(t, c, runID, last)
				if a := second.Next().GetAttached(); a == nil || a.GetLastSeq() < last {
					t.Fatalf("the attachment's first event: %v", second.Events())
				}
				for second.Next() != nil {
				}
				if err := second.Err(); err != nil {
					t.Fatalf("the attached stream ended %v\n%s", err, p.Log())
				}
				whole := append(upTo(first.Events(), last), servicetest.Numbered(second.Events())...)
				servicetest.CheckEvents(t, whole)
				if r := whole[len(whole)-1].GetRunFinished(); r.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
					t.Fatalf("the run ended %v", r)
				}
				sameRun(t, servicetest.Numbered(readAll(t, watcher)), whole)
			})

			t.Run("killed while an approval waits", func(t *testing.T) {
				first, kill := openRun(t, p, &agentdv1.RunSpec{Input: "save a note: buy milk"})
				asked := first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
				runID, last := asked.GetRunId(), asked.GetSeq()
				kill()
				var a *agentdv1.Attached
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					stream, err := c.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: runID, AfterSeq: last})
					if err != nil {
						t.Fatal(err)
					}
					resp, err := stream.Recv()
					if err != nil {
						t.Fatal(err)
					}
					if a = resp.GetEvent().GetAttached(); a.GetState() == agentdv1.RunState_RUN_STATE_PARKED || time.Now().After(deadline) {
						break
					}
				}
				if a.GetState() != agentdv1.RunState_RUN_STATE_PARKED || len(a.GetPendingApprovals()) != 1 || !proto.Equal(a.GetPendingApprovals()[0], asked.GetApprovalRequested()) {
					t.Fatalf("attached %v, want PARKED with the approval re-sent as asked", a)
				}
				watcher, err := c.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: runID, AfterSeq: last})
				if err != nil {
					t.Fatal(err)
				}
				other := agentdv1.NewAgentServiceClient(p.Dial(t))
				resp, err := other.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: "approve-1",
					Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
						ApprovalId: asked.GetApprovalRequested().GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
					}}})
				if err != nil || !resp.GetAck().GetAccepted() {
					t.Fatalf("SendRunInput: %v, %v\n%s", resp, err, p.Log())
				}
				rest := servicetest.Numbered(readAll(t, watcher))
				whole := append(upTo(first.Events(), last), rest...)
				servicetest.CheckEvents(t, whole)
				fin := whole[len(whole)-1].GetRunFinished()
				if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetUsage().GetToolCalls() != 1 {
					t.Fatalf("the run ended %v", fin)
				}
				replay, err := c.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: runID})
				if err != nil {
					t.Fatal(err)
				}
				sameRun(t, servicetest.Numbered(readAll(t, replay)), whole)
			})

			t.Run("a thread of three runs", func(t *testing.T) {
				thread := ""
				for i, in := range []string{"what is 2*3?", "what is 4*5?", "what is 6*7?"} {
					resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{ThreadId: thread, Input: in, History: agentdv1.History_HISTORY_THREAD}})
					if err != nil {
						t.Fatalf("run %d: %v", i+1, err)
					}
					thread = resp.GetThreadId()
				}
				got, err := c.GetThread(t.Context(), &agentdv1.GetThreadRequest{ThreadId: thread})
				if err != nil {
					t.Fatal(err)
				}
				// Each turn: the question, the calculate call, its result, the answer.
				if n := got.GetThread().GetMessageCount(); n != 12 || len(got.GetMessages()) != 12 {
					t.Fatalf("the thread holds %d messages (%d returned), want 12", n, len(got.GetMessages()))
				}
				if first := got.GetMessages()[0].GetParts()[0].GetText(); first != "what is 2*3?" {
					t.Errorf("the thread starts with %q", first)
				}
			})
		})
	}
}

// sameRun fails t unless a and b are the same events.
func sameRun(t *testing.T, a, b []*agentdv1.RunEvent) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d events and %d:\n%s\n---\n%s", len(a), len(b), servicetest.Render(a), servicetest.Render(b))
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("event %d differs:\n%v\n%v", i, a[i], b[i])
		}
	}
}

// A SQLite-backed agentd killed with SIGKILL while a run streams, and started again on
// the same file, takes the run up from its last checkpoint: a client attaching from the
// last seq it saw gets the open block and step closed as abandoned, then the step done
// again, and the run completes, one seq sequence from start to end.
func TestEndToEndSQLiteRestartResumesTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	args := []string{"--demo-delay", "100ms", "--store", "sqlite:" + filepath.Join(t.TempDir(), "agentd.db")}
	p := startAgentd(t, args, e2eKey)
	first, kill := openRun(t, p, &agentdv1.RunSpec{Input: "what time is it?"})
	defer kill()
	// The tool step is done and checkpointed; the answer streams.
	first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetCheckpoint() != nil })
	last := first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetTextDelta() != nil }).GetSeq()
	runID := first.Events()[0].GetRunId()
	p.Kill()

	p = startAgentd(t, args, e2eKey)
	c := agentdv1.NewAgentServiceClient(p.Dial(t))
	stream, err := c.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: runID, AfterSeq: last})
	if err != nil {
		t.Fatalf("attaching after the restart: %v\n%s", err, p.Log())
	}
	rest := servicetest.Numbered(readAll(t, stream))
	whole := append(upTo(first.Events(), last), rest...)
	servicetest.CheckEvents(t, whole)
	abandoned := 0
	for _, ev := range rest {
		if ev.GetMessageFinished().GetAbandoned() || ev.GetStepFinished().GetAbandoned() {
			abandoned++
		}
	}
	if abandoned != 2 {
		t.Errorf("%d abandoned markers after the restart, want the open text block's and the step's:\n%s", abandoned, servicetest.Render(rest))
	}
	fin := whole[len(whole)-1].GetRunFinished()
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() == "" {
		t.Fatalf("the run ended %v\n%s", fin, p.Log())
	}
}
