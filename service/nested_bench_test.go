package service_test

import (
	"context"
	"iter"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// answer is what a call returns in BenchmarkSubagentCall, by a tool or by a child run.
const answer = "Water boils at 100 °C at sea level."

// callThenSay is a model step that calls tool once with a task, then says what it
// returned: as many of it as a benchmark's runs need.
func callThenSay(tool string, n int) *rt.Model {
	step := rt.Step{Func: func(_ context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		last := req.Messages[len(req.Messages)-1]
		if p := last.Parts[0]; p.Kind == runtime.PartToolResult {
			return modelEvents(rt.Say("so: " + p.ToolResult.Output.Text).Events)
		}
		return modelEvents(rt.Call(0, tool, `{"task":"boiling point of water"}`).Events)
	}}
	return &rt.Model{Steps: slices.Repeat([]rt.Step{step}, n)}
}

// BenchmarkSubagentCall measures what a sub-agent's call costs against a plain tool
// call returning the same text: one ExecuteRun per op, whose model calls the tool once
// and answers. The difference is the child run: its start in the store, its journal, its
// model call, its end, and its events shown on the parent's journal.
//
//	go test ./service -run '^$' -bench BenchmarkSubagentCall -benchmem
func BenchmarkSubagentCall(b *testing.B) {
	for _, child := range []bool{false, true} {
		name := "plain tool"
		if child {
			name = "sub-agent"
		}
		b.Run(name, func(b *testing.B) {
			const maxRuns = 1 << 16 // enough scripted steps for any b.N the benchmark picks
			lead := scripted{name: "lead", goTools: []runtime.Tool{rt.Tool("lookup", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
				return runtime.Output{Text: answer}, nil
			})}, model: callThenSay("lookup", 2*maxRuns)}
			agents := []scripted{}
			if child {
				lead = scripted{name: "lead", goTools: []runtime.Tool{}, subagents: []runs.Subagent{{Agent: "researcher", Tool: "lookup"}}, model: callThenSay("lookup", 2*maxRuns)}
				agents = append(agents, scripted{name: "researcher", goTools: []runtime.Tool{}, model: &rt.Model{Steps: slices.Repeat([]rt.Step{rt.Say(answer)}, maxRuns)}})
			}
			c := newTestServer(b, service.Config{}, append(agents, lead)...).Client
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if n++; n > maxRuns {
					b.Fatalf("more than %d runs", maxRuns)
				}
				resp, err := c.ExecuteRun(b.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("lead", "how hot?")})
				if err != nil || resp.GetResult().GetFinalText() != "so: "+answer {
					b.Fatalf("ExecuteRun: %q %v", resp.GetResult().GetFinalText(), err)
				}
			}
		})
	}
}

// BenchmarkParkedTreeMemory measures what a parked tree holds, per tree, against a
// run parked on its own approval: 1,000 roots whose child waits for a decision, their
// clients gone, every run of them parked (memory store, clients in the same process).
//
//	go test ./service -run '^$' -bench BenchmarkParkedTreeMemory -benchtime 1x
func BenchmarkParkedTreeMemory(b *testing.B) {
	const n = 1000
	for _, tree := range []bool{false, true} {
		name := "run"
		if tree {
			name = "tree"
		}
		b.Run(name, func(b *testing.B) {
			agents := []scripted{carefulN(n)}
			top := "careful"
			if tree {
				agents = append(agents, relayN("lead", "careful", n))
				top = "lead"
			}
			srv := newTestServer(b, service.Config{}, agents...)
			for b.Loop() {
				var before, after goruntime.MemStats
				goruntime.GC()
				goruntime.ReadMemStats(&before)
				g0 := goruntime.NumGoroutine()
				ids := make([]string, 0, n)
				for range n {
					ctx, cancel := context.WithCancel(b.Context())
					rc, err := srv.Client.Run(ctx)
					if err != nil {
						b.Fatal(err)
					}
					s := servicetest.NewStream(b, rc)
					s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input(top, "tmp")}})
					ids = append(ids, s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId())
					s.Until(func(ev *agentdv1.RunEvent) bool { return childApproval(ev) || ev.GetApprovalRequested() != nil })
					cancel()
				}
				for _, id := range ids {
					waitParked(b, srv.Client, id)
				}
				for deadline := time.Now().Add(10 * time.Second); goruntime.NumGoroutine() > g0+10 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				goruntime.GC()
				goruntime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-B/"+name)
				b.ReportMetric(float64(goruntime.NumGoroutine()-g0)/n, "goroutines/"+name)
				b.StopTimer()
				for _, id := range ids {
					srv.Client.SendRunInput(b.Context(), &agentdv1.SendRunInputRequest{RunId: id, ClientKey: "stop",
						Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{}}})
				}
				b.StartTimer()
			}
		})
	}
}

// waitParked waits until run id is parked.
func waitParked(b *testing.B, c agentdv1.AgentServiceClient, id string) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ctx, cancel := context.WithCancel(b.Context())
		stream, err := c.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: id})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		resp, err := stream.Recv()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetEvent().GetAttached().GetState() == agentdv1.RunState_RUN_STATE_PARKED {
			return
		}
	}
	b.Fatalf("run %s did not park", id)
}

// carefulN is careful with steps for n runs.
func carefulN(n int) scripted {
	a := careful()
	a.model.Steps = slices.Repeat(a.model.Steps[:1], 2*n)
	return a
}

// relayN is relay with steps for n runs.
func relayN(name, to string, n int) scripted {
	a := relay(name, to)
	a.model.Steps = slices.Repeat(a.model.Steps[:1], 2*n)
	return a
}


