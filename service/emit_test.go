package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
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
			srv, err := service.New(service.Config{Agents: workloadAgents(b, size), Logger: quietLog, Config: runs.Config{ContinuationKey: testKey}})
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
	// The two runs' events are compared kind for kind: deltas may not merge.
	c := servicetest.NewClient(t, service.Config{Agents: workloadAgents(t, size), Logger: quietLog, Config: runs.Config{ContinuationKey: testKey, ExactDeltas: true}})
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

// A client that keeps up sees every delta the model streams, as it streams it: the
// model streams its next delta only once the client has read the one before. A client
// that reads nothing until the model is done may get them merged into fewer events; it
// reads the same text either way, under one sequence with no gap.
func TestDeltas_MergeOnlyForAClientBehind(t *testing.T) {
	words := strings.Fields(strings.Repeat("the quick brown fox jumps over the lazy dog ", 20))
	for _, keepsUp := range []bool{true, false} {
		name := "client behind"
		if keepsUp {
			name = "client keeps up"
		}
		t.Run(name, func(t *testing.T) {
			read := make(chan struct{}, len(words))
			done := make(chan struct{})
			step := rt.Step{Func: func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
				return func(yield func(runtime.ModelEvent, error) bool) {
					defer close(done)
					for i, w := range words {
						if i > 0 && keepsUp {
							select {
							case <-read:
							case <-ctx.Done():
								yield(runtime.ModelEvent{}, ctx.Err())
								return
							}
						}
						if !yield(rt.Text(w+" "), nil) {
							return
						}
					}
					yield(rt.Finish(runtime.FinishStop), nil)
				}
			}}
			srv := newTestServer(t, service.Config{}, scripted{name: "teller", model: &rt.Model{Steps: []rt.Step{step}}})
			stream, err := srv.Client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: servicetest.Input("teller", "a story")})
			if err != nil {
				t.Fatal(err)
			}
			if !keepsUp {
				<-done
			}
			var got strings.Builder
			var deltas int
			var seq int64
			for {
				resp, err := stream.Recv()
				if err != nil {
					t.Fatalf("Recv after %d deltas: %v", deltas, err)
				}
				ev := resp.GetEvent()
				if ev.GetSeq() != seq+1 {
					t.Fatalf("seq %d after seq %d", ev.GetSeq(), seq)
				}
				seq = ev.GetSeq()
				if d := ev.GetTextDelta(); d != nil {
					deltas++
					got.WriteString(d.GetDelta())
					read <- struct{}{}
				}
				if ev.GetRunFinished() != nil {
					break
				}
			}
			if want := strings.Join(words, " ") + " "; got.String() != want {
				t.Errorf("the deltas read make %q, want %q", got.String(), want)
			}
			switch {
			case keepsUp && deltas != len(words):
				t.Errorf("%d delta events for %d deltas, to a client that kept up", deltas, len(words))
			case !keepsUp && deltas > len(words):
				t.Errorf("%d delta events for %d deltas", deltas, len(words))
			}
			t.Logf("%d deltas in %d events", len(words), deltas)
		})
	}
}

// A model that streams at a pace, as providers do, leaves the store time to copy each
// delta before the next comes. A client that is behind (here one that reads nothing
// until the model has streamed 1,000 deltas, on a connection whose windows gRPC flow
// control holds to 64 KiB) still gets the deltas merged: the store's copy leaves the tail
// for the stream. Without merging, the model would be held back (backpressure: 64
// events queued) before its 1,000th delta, and the client would start reading after a
// 10 s wait.
func TestDeltas_MergeForAClientBehindAPacedModel(t *testing.T) {
	const n, behind = 3000, 1000
	delta := strings.Repeat("x", 99) + " "
	streamed := make(chan struct{})
	step := rt.Step{Func: func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			for i := range n {
				time.Sleep(20 * time.Microsecond) // the pace: the store is written to between deltas
				if i == behind {
					close(streamed)
				}
				if !yield(rt.Text(delta), nil) {
					return
				}
			}
			yield(rt.Finish(runtime.FinishStop), nil)
		}
	}}
	srv := newTestServer(t, service.Config{}, scripted{name: "teller", model: &rt.Model{Steps: []rt.Step{step}}})
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return srv.Dial(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Fixed windows: no growing them as the client reads (BDP estimation).
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := agentdv1.NewAgentServiceClient(conn).StartRun(t.Context(), &agentdv1.StartRunRequest{Start: servicetest.Input("teller", "a story")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-streamed:
	case <-time.After(10 * time.Second):
		t.Errorf("the model was held back before its %dth delta", behind)
	}
	var text strings.Builder
	events, most := 0, 0 // delta events, and the most deltas one carried
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv after %d delta events: %v", events, err)
		}
		if d := resp.GetEvent().GetTextDelta(); d != nil {
			events++
			most = max(most, len(d.GetDelta())/len(delta))
			text.WriteString(d.GetDelta())
		}
		if resp.GetEvent().GetRunFinished() != nil {
			break
		}
	}
	if text.String() != strings.Repeat(delta, n) {
		t.Fatalf("the deltas read make %d bytes, want %d", text.Len(), n*len(delta))
	}
	// What gRPC's windows and buffers held went out as it came, one event a delta; the
	// deltas after merged, up to coalesceMax (1 KiB, ten deltas) an event, while the
	// client was behind. Once the client reads, it keeps up, and gets every delta as it
	// comes.
	if most < 5 {
		t.Errorf("no delta event carried more than %d deltas", most)
	}
	t.Logf("%d deltas in %d events, at most %d in one", n, events, most)
}
