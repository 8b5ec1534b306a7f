package service_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

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

// ExecuteRun's run is journaled like a streamed one: once it returns, AttachRun replays
// the events a StartRun stream of the same run carries, up to the same run_finished.
func TestExecuteRunIsJournaled(t *testing.T) {
	size, err := workload.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	c := servicetest.NewClient(t, service.Config{Agents: workloadAgents(t, size), Logger: quietLog, ContinuationKey: testKey})
	ctx := t.Context()
	resp, err := c.ExecuteRun(ctx, workloadExecute())
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(recv func() (*agentdv1.RunEvent, error)) (out []string, last *agentdv1.RunEvent) {
		for {
			ev, err := recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				return out, last
			}
			if ev.GetAttached() == nil && ev.GetHeartbeat() == nil {
				out = append(out, fmt.Sprintf("%d:%T", ev.GetSeq(), ev.GetKind()))
				last = ev
			}
		}
	}
	att, err := c.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: resp.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	replayed, fin := kinds(func() (*agentdv1.RunEvent, error) { r, err := att.Recv(); return r.GetEvent(), err })
	stream, err := c.StartRun(ctx, &agentdv1.StartRunRequest{Start: workloadExecute().GetStart()})
	if err != nil {
		t.Fatal(err)
	}
	streamed, _ := kinds(func() (*agentdv1.RunEvent, error) { r, err := stream.Recv(); return r.GetEvent(), err })
	if !slices.Equal(replayed, streamed) || len(replayed) < size.Deltas() {
		t.Errorf("ExecuteRun's journal holds %d events, StartRun's stream %d: want the same kinds in the same order, at least one a delta (%d)", len(replayed), len(streamed), size.Deltas())
	}
	if !proto.Equal(fin.GetRunFinished(), resp.GetResult()) {
		t.Errorf("the journal's run_finished differs from ExecuteRun's result")
	}
}
