package service_test

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

// workloadAgents serves one agent, the default, that replays size, built in Go.
func workloadAgents(tb testing.TB, size workload.Size) service.Agents {
	tb.Helper()
	cfg := workload.Config(size)
	cfg.Logger = quietLog
	r, err := runtime.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	set, err := service.NewAgents(&service.Agent{Runtime: r})
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

func workloadExecute() *agentdv1.ExecuteRunRequest {
	return &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: workload.Request().Messages[0].Text()}}
}

// BenchmarkExecuteRun runs the benchmark workload through ExecuteRun, called in process:
// no transport, so that what the service does with the events nobody receives is what
// the figures show beside the loop's own cost.
//
//	go test -run '^$' -bench ExecuteRun -benchmem ./service/
func BenchmarkExecuteRun(b *testing.B) {
	for _, size := range workload.Sizes() {
		b.Run(size.Name, func(b *testing.B) {
			srv, err := service.New(service.Config{Agents: workloadAgents(b, size), Logger: quietLog, ContinuationKey: testKey})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := srv.ExecuteRun(b.Context(), workloadExecute())
				if err != nil {
					b.Fatal(err)
				}
				if got := resp.GetResult().GetReason(); got != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
					b.Fatalf("the run ended %s", got)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size.Deltas()), "ns/delta")
		})
	}
}

// countingClock is a clock that counts how often it is read: the service reads it to
// stamp an event and to seal a continuation (its expiry), and for nothing else a run
// does.
type countingClock struct{ n atomic.Int64 }

func (c *countingClock) now() time.Time {
	c.n.Add(1)
	return time.Unix(1_700_000_000, 0)
}

// TestExecuteRunStampsNothingItDiscards: ExecuteRun sends no event, so its run neither
// timestamps events nor seals a checkpoint per step; a parked run seals its one
// continuation. The same run streamed by StartRun stamps every event, which shows the
// clock sees what it counts.
func TestExecuteRunStampsNothingItDiscards(t *testing.T) {
	size, err := workload.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	var clock countingClock
	c := servicetest.NewClient(t, service.Config{Agents: workloadAgents(t, size), Logger: quietLog, ContinuationKey: testKey, Now: clock.now})
	ctx := t.Context()

	resp, err := c.ExecuteRun(ctx, workloadExecute())
	if err != nil {
		t.Fatal(err)
	}
	// The new messages are the input, then S assistant and tool messages, then the answer.
	if got := resp.GetResult().GetReason(); got != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || len(resp.GetResult().GetNewMessages()) != 2*size.S+2 {
		t.Fatalf("the run ended %s with %d new messages, want COMPLETED with %d", got, len(resp.GetResult().GetNewMessages()), 2*size.S+2)
	}
	if n := clock.n.Swap(0); n != 0 {
		t.Errorf("a completed ExecuteRun read the clock %d times, want 0 (no event stamped, no checkpoint sealed)", n)
	}

	// Parked at its first tool call, the run seals the continuation it returns, and only
	// that.
	parked := workloadExecute()
	parked.Start.Config = &agentdv1.RunConfig{ToolPolicies: []*agentdv1.ToolPolicyOverride{
		{Tool: "echo", RequireApproval: true}, {Tool: "add", RequireApproval: true},
	}}
	resp, err = c.ExecuteRun(ctx, parked)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResult().GetReason(); got != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(resp.GetResult().GetContinuation()) == 0 {
		t.Fatalf("the run ended %s (continuation of %d bytes), want AWAITING_INPUT with a continuation", got, len(resp.GetResult().GetContinuation()))
	}
	if n := clock.n.Swap(0); n != 1 {
		t.Errorf("a parked ExecuteRun read the clock %d times, want 1 (its continuation's expiry)", n)
	}

	// Streamed, the same run stamps every event it sends.
	stream, err := c.StartRun(ctx, &agentdv1.StartRunRequest{Start: workloadExecute().GetStart()})
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for {
		if _, err := stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		events++
	}
	if n := clock.n.Load(); n < int64(events) || events < size.Deltas() {
		t.Errorf("StartRun sent %d events and read the clock %d times, want at least one read an event and an event a delta (%d)", events, n, size.Deltas())
	}
}
