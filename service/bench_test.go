//go:build unix

package service_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/store/sqlite"
)

// The service's benchmarks replay the benchmark workload (runtime/llm/workload, whose
// testdata holds a copy of ../shared/bench/workload.json) end to end over loopback gRPC.
// They run only with -bench:
//
//	go test -run '^$' -bench RunWorkload -benchtime 20x -count 5 ./service/
//	go test -run '^$' -bench ParkedRunMemory -benchtime 1x -count 3 ./service/
//
// They need getrusage, hence the unix build constraint.

// benchKey signs the benchmark servers' continuations; a fixed key keeps New quiet.
var benchKey = []byte("a continuation key for benchmarks, 32+ bytes")

var discardLogger = slog.New(slog.DiscardHandler)

// workloadStart is the client's first message: the workload's user input.
var workloadStart = &agentdv1.RunRequest{
	ClientSeq: 1,
	Kind:      &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: workload.Request().Messages[0].Text()}},
}

// BenchmarkRunWorkload runs the benchmark workload end to end, one whole run per
// iteration: a real agentd service on a real grpc.Server on a 127.0.0.1 TCP port, and a
// real client that starts a Run stream and reads (decodes) every event until the stream
// ends. Server and client share the process, so CPU time (getrusage, user+system) and
// allocations are those of both together.
//
// Next to each size, bare/<size> sends the very RunResponse messages of a real run,
// captured once and re-sent verbatim, through a bare grpc-go bidi stream: an
// AgentService whose Run answers the start message with them and nothing else (same
// codec, same message types and sizes, no agent loop). The agentd sub-benchmark also
// replays the bare stream after each of its runs, off the clock, and reports bare_ratio,
// its message rate over the bare stream's, and bare_cpu_ratio, the bare stream's CPU
// time over its own: ratios measured side by side, run for run. The CPU ratio is the
// steadier one: on loopback, wall time depends on how the client's and the server's
// goroutines happen to share the CPUs.
//
// Figures per size: ns/delta and deltas/CPU-s count the spec's deltas_per_run deltas
// (reasoning, text and argument fragments); events/op and msgs/s count every message
// of the stream. CPU time is taken with getrusage just before and after each run, so
// that the off-clock bare runs are left out.
func BenchmarkRunWorkload(b *testing.B) {
	for _, size := range workload.Sizes() {
		// AGENTD_BENCH_EXACT_DELTAS=1 keeps every delta an event (Config.ExactDeltas), the
		// baseline of merging the deltas of a client behind.
		exact := func(c *service.Config) { c.ExactDeltas = os.Getenv("AGENTD_BENCH_EXACT_DELTAS") == "1" }
		agentd := dialLoopback(b, serveLoopback(b, newWorkloadService(b, size, nil, exact).Register))

		// One checked run, outside the timed loops: a benchmark of a broken run fails. Its
		// responses are what the bare stream replays.
		var captured []*agentdv1.RunResponse
		st, err := runOnce(b.Context(), agentd, func(r *agentdv1.RunResponse) { captured = append(captured, r) })
		if err != nil {
			b.Fatalf("%s: %v", size.Name, err)
		}
		if err := checkWorkloadRun(size, st); err != nil {
			b.Fatalf("%s: %v", size.Name, err)
		}

		bare := dialLoopback(b, serveLoopback(b, func(gs *grpc.Server) {
			agentdv1.RegisterAgentServiceServer(gs, &replayServer{responses: captured})
		}))
		var sizes []int
		if _, err := runOnce(b.Context(), bare, func(r *agentdv1.RunResponse) { sizes = append(sizes, proto.Size(r)) }); err != nil {
			b.Fatalf("bare/%s: %v", size.Name, err)
		}
		if err := sameSizes(captured, sizes); err != nil {
			b.Fatalf("bare/%s: %v", size.Name, err)
		}
		events := len(captured)

		b.Run("bare/"+size.Name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := b.Context()
			runs := 0
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := runOnce(ctx, bare, nil); err != nil {
					b.Fatal(err)
				}
				runs++
			}
			cpu := cpuTime() - cpu0
			msgs := float64(runs * events)
			b.ReportMetric(float64(events), "events/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/msgs, "ns/msg")
			b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(msgs/cpu.Seconds(), "msgs/CPU-s")
		})

		b.Run(size.Name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := b.Context()
			want := size.Deltas()
			runs := 0
			var cpu, bareCPU, bareElapsed time.Duration
			deltaEvents := 0
			// Allocations are counted as the benchmark's allocs/op are, from MemStats
			// read off the clock, so that those of the bare stream are left out.
			var ms goruntime.MemStats
			goruntime.ReadMemStats(&ms)
			allocs, mallocs0 := uint64(0), ms.Mallocs
			for b.Loop() {
				c0 := cpuTime()
				st, err := runOnce(ctx, agentd, nil)
				c1 := cpuTime()
				if err != nil {
					b.Fatal(err)
				}
				if st.deltas == 0 || st.deltas > want || st.finished.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
					b.Fatalf("the run ended %s with %d delta events, want COMPLETED with 1 to %d", st.finished.GetReason(), st.deltas, want)
				}
				deltaEvents += st.deltas
				cpu += c1 - c0
				runs++

				// The bare stream carries the same messages right after, off the clock.
				b.StopTimer()
				goruntime.ReadMemStats(&ms)
				allocs += ms.Mallocs - mallocs0
				t0, c2 := time.Now(), cpuTime()
				if _, err := runOnce(ctx, bare, nil); err != nil {
					b.Fatal(err)
				}
				bareCPU += cpuTime() - c2
				bareElapsed += time.Since(t0)
				goruntime.ReadMemStats(&ms)
				mallocs0 = ms.Mallocs
				b.StartTimer()
			}
			elapsed := b.Elapsed()
			deltas := float64(runs * want)
			b.ReportMetric(float64(events), "events/op")
			b.ReportMetric(float64(elapsed.Nanoseconds())/deltas, "ns/delta")
			b.ReportMetric(deltas/cpu.Seconds(), "deltas/CPU-s")
			b.ReportMetric(float64(allocs)/deltas, "allocs/delta")
			b.ReportMetric(float64(deltaEvents)/deltas, "events/delta")
			b.ReportMetric(float64(runs*events)/elapsed.Seconds(), "msgs/s")
			b.ReportMetric(bareElapsed.Seconds()/elapsed.Seconds(), "bare_ratio")
			b.ReportMetric(bareCPU.Seconds()/cpu.Seconds(), "bare_cpu_ratio")
		})
	}
}

// newWorkloadService returns an agentd service whose default agent replays size. With a
// policy, the agent runs under it (and its own name); without, it is the built-in demo
// agent on the workload model, as agentd --model workload:<size> serves it.
func newWorkloadService(tb testing.TB, size workload.Size, policy *agents.PolicyConfig, opts ...func(*service.Config)) *service.Server {
	tb.Helper()
	acfg := agents.Default()
	ropts := agents.RegistryOptions{ModelOverride: "workload:" + size.Name, Logger: discardLogger}
	if policy != nil {
		acfg = &agents.Config{Agents: []agents.AgentConfig{{Name: "workload", Model: "workload:" + size.Name, Policy: *policy}}}
		ropts.ModelOverride = ""
	}
	reg, err := agents.NewRegistry(acfg, ropts)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := service.Config{Agents: reg, Logger: discardLogger, Config: runs.Config{ContinuationKey: benchKey, MaxConcurrentRuns: 1 << 20}}
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := service.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// serveLoopback serves register's services with a real grpc.Server on a 127.0.0.1 TCP
// port and returns its address. The server stops with tb's cleanup.
func serveLoopback(tb testing.TB, register func(*grpc.Server)) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	gs := grpc.NewServer()
	register(gs)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	tb.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			tb.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// dialLoopback returns an AgentService client on one connection to addr, closed with
// tb's cleanup.
func dialLoopback(tb testing.TB, addr string) agentdv1.AgentServiceClient {
	tb.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return agentdv1.NewAgentServiceClient(conn)
}

// runStats is what a client counted on one Run stream.
type runStats struct {
	events, deltas int
	finished       *agentdv1.RunFinished
}

// runOnce starts the workload on a Run stream and reads every event until the stream
// ends, passing each response to keep if it is not nil. Like an interactive client it
// keeps its side of the stream open, ready to answer.
func runOnce(ctx context.Context, c agentdv1.AgentServiceClient, keep func(*agentdv1.RunResponse)) (runStats, error) {
	var st runStats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.Run(ctx)
	if err != nil {
		return st, err
	}
	if err := s.Send(workloadStart); err != nil {
		return st, err
	}
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if err != nil {
			return st, err
		}
		st.events++
		if isDelta(resp) {
			st.deltas++
		}
		if fin := resp.GetEvent().GetRunFinished(); fin != nil {
			st.finished = fin
		}
		if keep != nil {
			keep(resp)
		}
	}
}

// checkWorkloadRun checks a run as the client saw it: it completed, with the spec's
// number of deltas, final text and usage.
func checkWorkloadRun(size workload.Size, st runStats) error {
	fin := st.finished
	if fin == nil {
		return fmt.Errorf("the stream ended without run_finished after %d events", st.events)
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		return fmt.Errorf("the run ended %s (%v), want COMPLETED", fin.GetReason(), fin.GetError())
	}
	if st.deltas == 0 || st.deltas > size.Deltas() {
		// The server merges deltas for a client behind: at most the spec's, as events.
		return fmt.Errorf("the client read %d delta events, want from 1 to the spec's %d", st.deltas, size.Deltas())
	}
	var text strings.Builder
	for j := range size.T {
		fmt.Fprintf(&text, "t%03d ", j%1000)
	}
	if fin.GetFinalText() != text.String() {
		return fmt.Errorf("final text %q, want %q", fin.GetFinalText(), text.String())
	}
	u, want := fin.GetUsage(), size.Totals()
	if u.GetInputTokens() != want.InputTokens || u.GetOutputTokens() != want.OutputTokens || u.GetReasoningTokens() != want.ReasoningTokens ||
		u.GetModelCalls() != want.ModelCalls || u.GetToolCalls() != want.ToolCalls {
		return fmt.Errorf("usage %v, want %+v", u, want)
	}
	return nil
}

// sameSizes reports whether the bare stream delivered messages of the captured sizes.
func sameSizes(captured []*agentdv1.RunResponse, got []int) error {
	if len(got) != len(captured) {
		return fmt.Errorf("the bare stream delivered %d messages, want %d", len(got), len(captured))
	}
	for i, r := range captured {
		if want := proto.Size(r); got[i] != want {
			return fmt.Errorf("bare message %d is %d bytes, want %d", i, got[i], want)
		}
	}
	return nil
}

// replayServer is a bare AgentService: Run answers the start message with the
// responses of a real run, verbatim, and ends. With a pace, it sends a delta at most
// every pace, as the paced workload model streams them.
type replayServer struct {
	agentdv1.UnimplementedAgentServiceServer
	responses []*agentdv1.RunResponse
	pace      time.Duration
}

func (s *replayServer) Run(stream grpc.BidiStreamingServer[agentdv1.RunRequest, agentdv1.RunResponse]) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	var next time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for _, r := range s.responses {
		if s.pace > 0 && isDelta(r) {
			if next.IsZero() {
				next = time.Now()
			} else if wait := time.Until(next); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-stream.Context().Done():
					return stream.Context().Err()
				}
			}
			next = next.Add(s.pace)
		}
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}

// isDelta reports whether r is a delta event.
func isDelta(r *agentdv1.RunResponse) bool {
	switch r.GetEvent().GetKind().(type) {
	case *agentdv1.RunEvent_TextDelta, *agentdv1.RunEvent_ReasoningDelta, *agentdv1.RunEvent_ToolCallArgsDelta:
		return true
	}
	return false
}

// cpuTime returns the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The parked-run benchmark's settings, from the environment.
const (
	envParkedRuns  = "AGENTD_BENCH_PARKED_RUNS"  // runs parked at once; 1000 by default
	envParkedSizes = "AGENTD_BENCH_PARKED_SIZES" // workload sizes, comma-separated; "small,medium" by default
	// A file prefix: with it, each sub-benchmark writes <prefix><name>.heap and
	// <prefix><name>.goroutines, the heap (every allocation sampled) and the goroutines
	// of the server while the runs are parked.
	envParkedProfile = "AGENTD_BENCH_PARKED_PROFILE"
	// The client process's settings (see TestParkedRunClient).
	envParkAddr = "AGENTD_BENCH_PARK_ADDR" // the server's address
	envParkMode = "AGENTD_BENCH_PARK_MODE" // "bare" or a workload size
)

// BenchmarkParkedRunMemory measures the server's memory per run parked on an approval.
// Each iteration parks N runs at once (N from AGENTD_BENCH_PARKED_RUNS, 1000 by default;
// b.N only repeats the measurement) on one loopback connection, measures, and cancels
// them. A run parks at its last tool step, i = S-1, where its history is the largest a
// parked run has: the agent's policy asks for an approval of every echo and add call,
// the client approves calls 0 to S-2 as they come and leaves call S-1 waiting (under
// APPROVAL_POLICY_ASK, the Run RPC's default).
//
// The client runs in a child process (this test binary again, as TestParkedRunClient),
// so the figures are the server's alone: after two GCs, the growth of HeapAlloc, of
// StackInuse (the goroutines' stacks, which HeapAlloc leaves out) and of Sys from before
// the runs start to when all are parked (every client has seen its last
// approval_requested and ActiveRuns is N), divided by N. They cover everything a parked
// run holds in the server process: the session, the runtime's loop and history, the
// goroutines (the RPC handler, its receive goroutine, keepAlive, the runtime's interrupt
// watcher), timers, and grpc-go's server stream with its buffers. The connection is open
// before the first figure, so it is not counted. B/run is heap plus stacks; sys-B/run
// only counts memory the process had to get from the OS, so it reads 0 once an earlier
// round has reserved enough. bare parks N streams on a trivial AgentService that
// answers the start message with one event and waits: the server-side floor of an open
// bidi stream.
//
// Sizes: AGENTD_BENCH_PARKED_SIZES (small,medium by default; large parks N runs of 50
// steps each and takes longer). Run with -benchtime 1x: one iteration is one measurement.
// To see where the bytes go, set AGENTD_BENCH_PARKED_PROFILE (see envParkedProfile) and
// read the profiles with go tool pprof -sample_index=inuse_space -top.
func BenchmarkParkedRunMemory(b *testing.B) {
	n := 1000
	if v := os.Getenv(envParkedRuns); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", envParkedRuns, v)
		}
	}
	names := "small,medium"
	if v := os.Getenv(envParkedSizes); v != "" {
		names = v
	}

	b.Run("bare", func(b *testing.B) {
		srv := &idleServer{first: &agentdv1.RunResponse{Event: &agentdv1.RunEvent{Seq: 1, Kind: &agentdv1.RunEvent_RunStarted{RunStarted: &agentdv1.RunStarted{RunId: "run_0123456789abcdef"}}}}}
		addr := serveLoopback(b, func(gs *grpc.Server) { agentdv1.RegisterAgentServiceServer(gs, srv) })
		measureParked(b, n, addr, "bare", func() int { return int(srv.open.Load()) })
	})
	for name := range strings.SplitSeq(names, ",") {
		size, err := workload.Lookup(strings.TrimSpace(name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(size.Name, func(b *testing.B) {
			svc := newWorkloadService(b, size, &agents.PolicyConfig{Approval: "ask"}, func(c *service.Config) { c.ParkAfter = -1 })
			addr := serveLoopback(b, svc.Register)
			measureParked(b, n, addr, size.Name, svc.ActiveRuns)
		})
		// The stream stays open, and the run parks once ParkAfter has passed without an
		// answer: nothing of the run runs, the stream's goroutines wait.
		b.Run(size.Name+"/parked", func(b *testing.B) {
			svc := newWorkloadService(b, size, &agents.PolicyConfig{Approval: "ask"}, func(c *service.Config) { c.ParkAfter = time.Millisecond })
			addr := serveLoopback(b, svc.Register)
			measureParked(b, n, addr, "open:"+size.Name, func() int { return svc.ActiveRuns() + svc.ParkedRuns() })
		})
		// The client goes away once asked: the run parks in the (memory) store at once,
		// its journal and checkpoint counted with it.
		b.Run(size.Name+"/detached", func(b *testing.B) {
			svc := newWorkloadService(b, size, &agents.PolicyConfig{Approval: "ask"})
			addr := serveLoopback(b, svc.Register)
			measureParked(b, n, addr, "detached:"+size.Name, func() int { return svc.ActiveRuns() + svc.ParkedRuns() })
		})
		// The same two with a store on disk: what a parked run holds in the process alone.
		for _, mode := range []string{"open", "detached"} {
			b.Run(size.Name+"/"+mode+"-sqlite", func(b *testing.B) {
				st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "agentd.db"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				svc := newWorkloadService(b, size, &agents.PolicyConfig{Approval: "ask"}, func(c *service.Config) { c.Store, c.ParkAfter = st, time.Millisecond })
				addr := serveLoopback(b, svc.Register)
				measureParked(b, n, addr, mode+":"+size.Name, func() int { return svc.ActiveRuns() + svc.ParkedRuns() })
			})
		}
	}
}

// measureParked runs the parked-run measurement against the server at addr, whose
// active reports the runs (or streams) in progress.
func measureParked(b *testing.B, n int, addr, mode string, active func() int) {
	pc := startParkClient(b, addr, mode)

	// A first round warms up what is allocated once: buffers, pools, lazy tables.
	pc.cycle(b, min(n, 100), active)
	if prefix := os.Getenv(envParkedProfile); prefix != "" {
		rate := goruntime.MemProfileRate
		goruntime.MemProfileRate = 1
		pc.profile = prefix + mode
		defer func() { goruntime.MemProfileRate = rate; pc.profile = "" }()
	}

	var heap, stack, sys, goroutines float64
	cycles := 0
	for b.Loop() {
		before, after := pc.cycle(b, n, active)
		heap += float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
		stack += float64(int64(after.StackInuse) - int64(before.StackInuse))
		sys += float64(int64(after.Sys) - int64(before.Sys))
		goroutines += float64(after.goroutines - before.goroutines)
		cycles++
	}
	per := float64(cycles * n)
	b.ReportMetric((heap+stack)/per, "B/run")
	b.ReportMetric(heap/per, "heap-B/run")
	b.ReportMetric(stack/per, "stack-B/run")
	b.ReportMetric(sys/per, "sys-B/run")
	b.ReportMetric(goroutines/per, "goroutines/run")
}

// memSample is the process's memory after a GC.
type memSample struct {
	goruntime.MemStats
	goroutines int
}

func sampleMemory() memSample {
	// Two GCs: the first moves sync.Pool contents to the victim caches, the second frees them.
	goruntime.GC()
	goruntime.GC()
	var m memSample
	goruntime.ReadMemStats(&m.MemStats)
	m.goroutines = goruntime.NumGoroutine()
	return m
}

// waitFor polls cond until it holds, for up to a minute.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// idleServer is a trivial AgentService: Run answers the start message with one event and
// waits for the client to go away.
type idleServer struct {
	agentdv1.UnimplementedAgentServiceServer
	first *agentdv1.RunResponse
	open  atomic.Int64
}

func (s *idleServer) Run(stream grpc.BidiStreamingServer[agentdv1.RunRequest, agentdv1.RunResponse]) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	s.open.Add(1)
	defer s.open.Add(-1)
	if err := stream.Send(s.first); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return nil
		}
	}
}

// parkClient drives the client process of BenchmarkParkedRunMemory: it writes commands
// to its stdin and reads its replies, lines starting with parkReply, from its stdout.
type parkClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	log    bytes.Buffer // the process's other output, for errors
	stderr bytes.Buffer
	// profile, if set, is where cycle writes the server's profiles while the runs are
	// parked.
	profile string
}

const parkReply = "parkclient: "

// startParkClient starts the client process, connected to addr, and waits until it is
// ready. It quits with tb's cleanup.
func startParkClient(tb testing.TB, addr, mode string) *parkClient {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	pc := &parkClient{cmd: exec.Command(exe, "-test.run=^TestParkedRunClient$", "-test.count=1")}
	pc.cmd.Env = append(os.Environ(), envParkAddr+"="+addr, envParkMode+"="+mode)
	pc.cmd.Stderr = &pc.stderr
	if pc.stdin, err = pc.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	out, err := pc.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	pc.stdout = bufio.NewScanner(out)
	if err := pc.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		fmt.Fprintln(pc.stdin, "quit")
		pc.stdin.Close()
		for pc.stdout.Scan() {
			pc.log.WriteString(pc.stdout.Text() + "\n")
		}
		if err := pc.cmd.Wait(); err != nil {
			tb.Errorf("the client process: %v\n%s%s", err, pc.log.String(), pc.stderr.String())
		}
	})
	pc.await(tb, "ready")
	return pc
}

// do sends command to the client process and waits for its reply want.
func (pc *parkClient) do(tb testing.TB, command, want string) {
	tb.Helper()
	if _, err := fmt.Fprintln(pc.stdin, command); err != nil {
		tb.Fatalf("the client process: %v\n%s%s", err, pc.log.String(), pc.stderr.String())
	}
	pc.await(tb, want)
}

func (pc *parkClient) await(tb testing.TB, want string) {
	tb.Helper()
	for pc.stdout.Scan() {
		line := pc.stdout.Text()
		reply, ok := strings.CutPrefix(line, parkReply)
		if !ok {
			pc.log.WriteString(line + "\n")
			continue
		}
		if reply != want {
			tb.Fatalf("the client process replied %q, want %q\n%s", reply, want, pc.log.String())
		}
		return
	}
	pc.cmd.Wait()
	tb.Fatalf("the client process ended before replying %q\n%s%s", want, pc.log.String(), pc.stderr.String())
}

// cycle parks n runs, samples the memory before and once all are parked, and cancels
// them.
func (pc *parkClient) cycle(tb testing.TB, n int, active func() int) (before, after memSample) {
	tb.Helper()
	waitFor(tb, "no runs in progress", func() bool { return active() == 0 })
	before = sampleMemory()
	pc.do(tb, "park "+strconv.Itoa(n), "parked")
	waitFor(tb, fmt.Sprintf("%d runs in progress", n), func() bool { return active() == n })
	// Every client has its last event; give the handlers a moment to reach their wait.
	time.Sleep(50 * time.Millisecond)
	after = sampleMemory()
	if pc.profile != "" {
		writeProfile(tb, "heap", pc.profile+".heap", 0)
		writeProfile(tb, "goroutine", pc.profile+".goroutines", 1)
	}
	pc.do(tb, "cancel", "cancelled")
	waitFor(tb, "the parked runs to end", func() bool { return active() == 0 })
	return before, after
}

func writeProfile(tb testing.TB, name, path string, debug int) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		tb.Fatal(err)
	}
}

// TestParkedRunClient is no test: it is the client process of BenchmarkParkedRunMemory,
// which runs this test binary with AGENTD_BENCH_PARK_ADDR set, and skips otherwise. It
// reads commands from stdin, one a line: "park N" parks N runs at once, "cancel"
// cancels them, "quit" ends; it answers each on stdout.
func TestParkedRunClient(t *testing.T) {
	addr := os.Getenv(envParkAddr)
	if addr == "" {
		t.Skip("the client process of BenchmarkParkedRunMemory; runs only under it")
	}
	client := dialLoopback(t, addr)
	park := parkBare
	var runsMu sync.Mutex
	var detachedRuns []string // the runs whose client went away, for cancel
	if mode := os.Getenv(envParkMode); mode != "bare" {
		name, detached := strings.CutPrefix(mode, "detached:")
		name, open := strings.CutPrefix(name, "open:")
		size, err := workload.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		park = func(ctx context.Context, c agentdv1.AgentServiceClient) error {
			if !detached {
				id, err := parkWorkloadRun(ctx, c, size)
				if open {
					// The stream stays open; the run parks, and cancel cancels it.
					runsMu.Lock()
					detachedRuns = append(detachedRuns, id)
					runsMu.Unlock()
				}
				return err
			}
			runCtx, leave := context.WithCancel(ctx)
			defer leave() // the client goes away: the run parks
			id, err := parkWorkloadRun(runCtx, c, size)
			runsMu.Lock()
			detachedRuns = append(detachedRuns, id)
			runsMu.Unlock()
			return err
		}
	}
	reply := func(s string) { fmt.Println(parkReply + s) }

	cancel := context.CancelFunc(func() {})
	defer func() { cancel() }()
	reply("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		command, arg, _ := strings.Cut(in.Text(), " ")
		switch command {
		case "park":
			n, err := strconv.Atoi(arg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			cancel = stop
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() { errs <- park(ctx, client) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					reply("error: " + err.Error())
					t.Fatal(err)
				}
			}
			reply("parked")
		case "cancel":
			cancel()
			runsMu.Lock()
			for i, id := range detachedRuns {
				_, err := client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: id, ClientKey: "cancel-" + strconv.Itoa(i),
					Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{}}})
				if err != nil {
					reply("error: " + err.Error())
					t.Fatal(err)
				}
			}
			detachedRuns = nil
			runsMu.Unlock()
			reply("cancelled")
		case "quit":
			return
		default:
			t.Fatalf("unknown command %q", in.Text())
		}
	}
}

// parkWorkloadRun starts the workload, approves its tool calls but the last, and returns
// the run's id once that one's approval_requested has arrived. The stream stays open
// until ctx ends.
func parkWorkloadRun(ctx context.Context, c agentdv1.AgentServiceClient, size workload.Size) (string, error) {
	s, err := c.Run(ctx)
	if err != nil {
		return "", err
	}
	if err := s.Send(workloadStart); err != nil {
		return "", err
	}
	last := "call_" + strconv.Itoa(size.S-1)
	seq := workloadStart.GetClientSeq()
	for {
		resp, err := s.Recv()
		if err != nil {
			return "", fmt.Errorf("the run ended before its last approval: %w", err)
		}
		switch k := resp.GetEvent().GetKind().(type) {
		case *agentdv1.RunEvent_ApprovalRequested:
			if k.ApprovalRequested.GetToolCallId() == last {
				return resp.GetEvent().GetRunId(), nil
			}
			seq++
			err := s.Send(&agentdv1.RunRequest{ClientSeq: seq, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
				ApprovalId: k.ApprovalRequested.GetApprovalId(),
				Outcome:    agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
			}}})
			if err != nil {
				return "", err
			}
		case *agentdv1.RunEvent_RunFinished:
			return "", fmt.Errorf("the run finished %s before its last approval", k.RunFinished.GetReason())
		}
	}
}

// parkBare opens a stream on the idle server, sends the start message and returns once
// the answer has arrived. The stream stays open until ctx ends.
func parkBare(ctx context.Context, c agentdv1.AgentServiceClient) error {
	s, err := c.Run(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(workloadStart); err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// BenchmarkAttachReplay measures how fast a client attaching to a finished run reads its
// journal back from the default (memory) store, over loopback: one op is an AttachRun
// from seq 0 read to its end. events/s and events/CPU-s count the run's events (the
// attached event aside); CPU is client and server together, as in BenchmarkRunWorkload.
func BenchmarkAttachReplay(b *testing.B) {
	for _, name := range []string{"small", "medium"} {
		size, err := workload.Lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(size.Name, func(b *testing.B) {
			c := dialLoopback(b, serveLoopback(b, newWorkloadService(b, size, nil).Register))
			var runID string
			if _, err := runOnce(b.Context(), c, func(r *agentdv1.RunResponse) { runID = r.GetEvent().GetRunId() }); err != nil {
				b.Fatal(err)
			}
			events := 0
			cpu0 := cpuTime()
			for b.Loop() {
				stream, err := c.AttachRun(b.Context(), &agentdv1.AttachRunRequest{RunId: runID})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					resp, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if resp.GetEvent().GetAttached() == nil {
						n++
					}
				}
				events += n
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(events)/cpu.Seconds(), "events/CPU-s")
		})
	}
}
