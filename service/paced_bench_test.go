//go:build unix

package service_test

import (
	"context"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/store/memory"
)

// BenchmarkPacedLoad is load as production sees it: many runs at once, each receiving its
// deltas at a provider's pace (the workload's small size at 50 deltas a second), with
// clients that keep up. It measures, over a window of steady load, the CPU time (server
// and clients, one process) per delta the clients received, for agentd, and for a bare
// grpc-go server that sends the same messages (those of a run whose every delta is an
// event, as a client that keeps up sees it) at the same pace on as many streams. It
// also reports the memory each stream holds (heap and stacks, server and client) and its
// goroutines. Run it one iteration at a time:
//
//	go test -run '^$' -bench PacedLoad -benchtime 1x -count 3 ./service/
//
// AGENTD_BENCH_PACED_STREAMS sets the number of streams (1,000); AGENTD_BENCH_PACED_WINDOW
// the measured window (10s); AGENTD_BENCH_PACED_CPUPROFILE a file for a CPU profile of
// agentd's window, and, with ".heap" added, one for a heap profile at its end.
func BenchmarkPacedLoad(b *testing.B) {
	const pace = 50 // deltas a second, in each run
	streams, window := 1000, 10*time.Second
	if s, err := strconv.Atoi(os.Getenv("AGENTD_BENCH_PACED_STREAMS")); err == nil && s > 0 {
		streams = s
	}
	if d, err := time.ParseDuration(os.Getenv("AGENTD_BENCH_PACED_WINDOW")); err == nil && d > 0 {
		window = d
	}
	size := workload.Sizes()[0]

	// The messages of a run as a client that keeps up receives them: one event a delta.
	exact := func(c *service.Config) { c.ExactDeltas = true }
	full := dialLoopback(b, serveLoopback(b, newWorkloadService(b, size, nil, exact).Register))
	var captured []*agentdv1.RunResponse
	if _, err := runOnce(b.Context(), full, func(r *agentdv1.RunResponse) { captured = append(captured, r) }); err != nil {
		b.Fatal(err)
	}
	// A client receives the model's deltas, however many events carry them: counted by
	// their text, at the run's mean bytes a delta.
	var text int
	for _, r := range captured {
		text += deltaBytes(r)
	}
	perDelta := float64(text) / float64(size.Deltas())

	st := memory.New(memory.Options{})
	agentd := dialLoopback(b, serveLoopback(b, newWorkloadService(b, size, nil, func(c *service.Config) {
		c.Agents, c.Store = pacedAgents(b, size, pace), st
	}).Register))
	bare := dialLoopback(b, serveLoopback(b, func(gs *grpc.Server) {
		agentdv1.RegisterAgentServiceServer(gs, &replayServer{responses: captured, pace: time.Second / pace})
	}))

	for b.Loop() {
		// The bare stream first: agentd's store keeps what its runs journaled.
		r := pacedWindow(b, bare, streams, pace, window, perDelta, "")
		stored := st.Bytes()
		a := pacedWindow(b, agentd, streams, pace, window, perDelta, os.Getenv("AGENTD_BENCH_PACED_CPUPROFILE"))
		stored = st.Bytes() - stored
		b.ReportMetric(a.usPerDelta(), "agentd_µs/delta")
		b.ReportMetric(r.usPerDelta(), "bare_µs/delta")
		b.ReportMetric(a.usPerDelta()/r.usPerDelta(), "agentd/bare")
		b.ReportMetric(a.cpu.Seconds()/window.Seconds(), "agentd_cores")
		b.ReportMetric(float64(a.deltas)/window.Seconds(), "agentd_deltas/s")
		b.ReportMetric(float64(r.deltas)/window.Seconds(), "bare_deltas/s")
		b.ReportMetric(float64(a.events)/float64(max(a.deltas, 1)), "agentd_events/delta")
		b.ReportMetric(a.perStream/1024, "agentd_KiB/stream")
		// Of which the store's copy of the runs' events, finished runs' included, which
		// it keeps up to its bound (64 MiB).
		b.ReportMetric(float64(stored)/float64(streams)/1024, "agentd_store_KiB/stream")
		b.ReportMetric(r.perStream/1024, "bare_KiB/stream")
		b.ReportMetric(float64(a.goroutines)/float64(streams), "agentd_goroutines/stream")
		b.ReportMetric(float64(r.goroutines)/float64(streams), "bare_goroutines/stream")
	}
}

// pacedAgents is the built-in demo agent on the workload model of size at pace deltas a
// second, as agentd --model workload:<size>@<pace> serves it.
func pacedAgents(tb testing.TB, size workload.Size, pace int) *agents.Registry {
	reg, err := agents.NewRegistry(agents.Default(), agents.RegistryOptions{
		ModelOverride: "workload:" + size.Name + "@" + strconv.Itoa(pace), Logger: discardLogger,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// pacedSample is what one window of paced load cost.
type pacedSample struct {
	deltas, events int64 // the model's deltas, and the delta events that carried them
	cpu            time.Duration
	// perStream is the memory the load held at the window's end, heap and stacks after a
	// collection, above what the process held before the streams started, per stream.
	perStream  float64
	goroutines int
}

func (s pacedSample) usPerDelta() float64 {
	return float64(s.cpu.Microseconds()) / float64(max(s.deltas, 1))
}

// pacedWindow keeps streams Run streams going on c, one run after another on each, and
// measures the deltas received (counted by their text, perDelta bytes each) and the CPU
// spent over window, after a warm-up of two seconds, writing a CPU profile of the window
// to profile unless it is empty. Each stream starts at a random point of the pace's
// period, so that the streams' deltas do not come in step.
func pacedWindow(b *testing.B, c agentdv1.AgentServiceClient, streams, pace int, window time.Duration, perDelta float64, profile string) pacedSample {
	ctx, cancel := context.WithCancel(b.Context())
	idle := liveMemory()
	g0 := goruntime.NumGoroutine()
	var bytes, events atomic.Int64
	count := func(r *agentdv1.RunResponse) {
		if n := deltaBytes(r); n > 0 {
			bytes.Add(int64(n))
			events.Add(1)
		}
	}
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			select {
			case <-time.After(rand.N(time.Second / time.Duration(pace))):
			case <-ctx.Done():
			}
			for ctx.Err() == nil {
				if _, err := runOnce(ctx, c, count); err != nil && ctx.Err() == nil {
					b.Error(err)
					return
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	b0, e0, c0 := bytes.Load(), events.Load(), cpuTime()
	time.Sleep(window)
	s := pacedSample{deltas: int64(float64(bytes.Load()-b0) / perDelta), events: events.Load() - e0, cpu: cpuTime() - c0}
	if profile != "" {
		pprof.StopCPUProfile()
	}
	s.perStream = float64(liveMemory()-idle) / float64(streams)
	if profile != "" {
		writeProfile(b, "heap", profile+".heap", 0) // right after liveMemory's collection
	}
	s.goroutines = goruntime.NumGoroutine() - g0
	cancel()
	wg.Wait()
	// The server's side of the streams ends after the clients': wait for it, so that the
	// next window starts from an idle process.
	for deadline := time.Now().Add(10 * time.Second); goruntime.NumGoroutine() > g0+10 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// liveMemory returns the heap and stack memory in use after a collection.
func liveMemory() int64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}

// deltaBytes returns the length of r's delta text, 0 for an event that is not a delta.
func deltaBytes(r *agentdv1.RunResponse) int {
	ev := r.GetEvent()
	return len(ev.GetTextDelta().GetDelta()) + len(ev.GetReasoningDelta().GetDelta()) + len(ev.GetToolCallArgsDelta().GetDelta())
}
