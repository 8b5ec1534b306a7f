package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime/llm/workload"
)

// TestLoadWorkload runs `agentctl load` against the real agentd serving the small
// benchmark workload: every run completes, with every delta of the workload, and the
// load ends when its --duration has passed. How exactly it keeps to the duration is
// TestLoadStopsOnTheClock's, on a clock no machine load moves.
func TestLoadWorkload(t *testing.T) {
	addr := startAgentd(t, nil, "--model", "workload:small", "--rate-limit", "0")
	small, err := workload.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}

	// A load that outlives its --duration is stopped by a Ctrl-C a minute later, and
	// fails below: the test ends either way.
	interrupts := make(chan os.Signal, 1)
	watchdog := time.AfterFunc(time.Minute, func() { interrupts <- os.Interrupt })
	defer watchdog.Stop()
	start := time.Now()
	r := ctl{interrupts: interrupts}.run(t, "--plaintext", "--addr", addr, "load", "--concurrency", "8", "--duration", "2s", "--json", "--server-pid", strconv.Itoa(os.Getpid()))
	took := time.Since(start)
	if r.code != exitOK {
		t.Fatalf("load: %v", r)
	}
	var sum loadSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("the summary is not JSON: %v\n%s", err, r)
	}
	if sum.Runs == 0 || sum.Failed != 0 || len(sum.Errors) != 0 {
		t.Errorf("%d runs completed, %d failed (%v); want some, and none failed", sum.Runs, sum.Failed, sum.Errors)
	}
	if want := int64(small.Deltas()) * int64(sum.Runs); sum.Deltas != want {
		t.Errorf("%d deltas in %d runs, want %d (%d a run)", sum.Deltas, sum.Runs, want, small.Deltas())
	}
	if sum.Interrupted {
		t.Errorf("the load ran a minute past its --duration of 2s, until a Ctrl-C")
	}
	// The duration's timer cannot fire early, and the load cannot last longer than the
	// call that ran it.
	if sum.Elapsed < 2 || sum.Elapsed > took.Seconds() {
		t.Errorf("elapsed %.3fs, want from the 2s of --duration to the %.3fs the call took", sum.Elapsed, took.Seconds())
	}
	if sum.RunsPerSec <= 0 || sum.DeltasPerSec <= 0 {
		t.Errorf("runs/s %v, deltas/s %v, want both positive", sum.RunsPerSec, sum.DeltasPerSec)
	}
	for name, p := range map[string]*loadPercentiles{"first event": sum.FirstEventMS, "finish": sum.FinishMS} {
		if p == nil || p.P50 <= 0 || p.P50 > p.P90 || p.P90 > p.P99 || p.P99 > p.Max {
			t.Errorf("%s percentiles %+v, want 0 < p50 <= p90 <= p99 <= max", name, p)
		}
	}
	if sum.FirstEventMS != nil && sum.FinishMS != nil && sum.FirstEventMS.P50 > sum.FinishMS.P50 {
		t.Errorf("first event p50 %v ms after finish p50 %v ms", sum.FirstEventMS.P50, sum.FinishMS.P50)
	}
	// --server-pid is this test process here: any live process will do.
	if sum.ServerRSS == nil || sum.ServerRSS.PeakKiB <= 0 || sum.ServerRSS.Samples < 2 {
		t.Errorf("server RSS %+v (%s), want samples", sum.ServerRSS, sum.ServerRSSNote)
	}

	// The summary for a person, with --runs ending the load before --duration.
	r = ctl{}.run(t, "--plaintext", "--addr", addr, "load", "--concurrency", "3", "--runs", "7", "--duration", "1m")
	if r.code != exitOK {
		t.Fatalf("load --runs 7: %v", r)
	}
	for _, want := range []string{"runs:        7 completed, 0 failed, 0 cut", "runs/s", "first event: p50 ", "finish:      p50 ", "errors:      none"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in the summary:\n%s", want, r.stdout)
		}
	}
}

// TestLoadInterrupt stops the load with Ctrl-C: it still reports, and exits 130.
func TestLoadInterrupt(t *testing.T) {
	addr := startAgentd(t, nil, "--model", "workload:small", "--rate-limit", "0")
	interrupts := make(chan os.Signal, 1)
	time.AfterFunc(300*time.Millisecond, func() { interrupts <- os.Interrupt })
	const duration = time.Minute
	start := time.Now()
	r := ctl{interrupts: interrupts}.run(t, "--plaintext", "--addr", addr, "load", "--concurrency", "4", "--duration", duration.String())
	// Only a Ctrl-C that did not stop the load lets it run its whole --duration.
	if took := time.Since(start); took >= duration {
		t.Errorf("the load ran %v, its whole --duration: Ctrl-C did not stop it", took)
	}
	if r.code != exitCancel || !strings.Contains(r.stdout, "stopped by Ctrl-C") || !strings.Contains(r.stdout, "errors:      none") {
		t.Errorf("want exit 130 and a summary with no errors:\n%v", r)
	}
}

// TestLoadStopsOnTheClock runs the load on a synctest clock, against streams whose runs
// each take runTime of it: --duration ends the load the moment it passes, Ctrl-C the
// moment it comes. The runs going then are cut at once and not counted, the summary's
// elapsed time is exactly the load's, and so is the time runLoad took.
func TestLoadStopsOnTheClock(t *testing.T) {
	const runTime = 70 * time.Millisecond // no stop falls on a run's end
	for _, tc := range []struct {
		name      string
		duration  time.Duration
		interrupt time.Duration // 0: none
		want      time.Duration
		code      int
	}{
		{name: "duration", duration: 2 * time.Second, want: 2 * time.Second, code: exitOK},
		{name: "Ctrl-C", duration: time.Minute, interrupt: 300 * time.Millisecond, want: 300 * time.Millisecond, code: exitCancel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				interrupts := make(chan os.Signal, 1)
				if tc.interrupt > 0 {
					time.AfterFunc(tc.interrupt, func() { interrupts <- os.Interrupt })
				}
				// A load that keeps to neither ends with this context, an hour on.
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				var stdout, stderr bytes.Buffer
				const workers = 4
				cfg := loadConfig{concurrency: workers, duration: tc.duration, input: defaultLoadInput, json: true}
				start := time.Now()
				code := runLoad(ctx, []agentdv1.AgentServiceClient{pacedClient{runTime: runTime}}, cfg, env{stdout: &stdout, stderr: &stderr, interrupts: interrupts})
				took := time.Since(start)
				if code != tc.code {
					t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
				}
				var sum loadSummary
				if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
					t.Fatalf("the summary is not JSON: %v\n%s", err, stdout.String())
				}
				if took != tc.want || sum.Elapsed != tc.want.Seconds() {
					t.Errorf("runLoad took %v and reported %.3fs, want both %v", took, sum.Elapsed, tc.want)
				}
				perWorker := int(tc.want / runTime)
				if sum.Runs != workers*perWorker || sum.Cut != workers || sum.Failed != 0 {
					t.Errorf("%d runs completed, %d cut, %d failed; want %d completed (%d a worker), %d cut, none failed",
						sum.Runs, sum.Cut, sum.Failed, workers*perWorker, perWorker, workers)
				}
				if sum.Interrupted != (tc.interrupt > 0) {
					t.Errorf("interrupted %v, want %v", sum.Interrupted, tc.interrupt > 0)
				}
			})
		})
	}
}

// pacedClient serves Run with streams whose run takes runTime of the clock: run_started
// and a delta at once, run_finished after runTime. The other RPCs are not used.
type pacedClient struct {
	agentdv1.AgentServiceClient
	runTime time.Duration
}

func (c pacedClient) Run(ctx context.Context, _ ...grpc.CallOption) (agentdv1.AgentService_RunClient, error) {
	return &pacedStream{ctx: ctx, runTime: c.runTime}, nil
}

type pacedStream struct {
	grpc.ClientStream
	ctx     context.Context
	runTime time.Duration
	recvs   int
}

func (s *pacedStream) Send(*agentdv1.RunRequest) error { return nil }
func (s *pacedStream) CloseSend() error                { return nil }

func (s *pacedStream) Recv() (*agentdv1.RunResponse, error) {
	s.recvs++
	var ev *agentdv1.RunEvent
	switch s.recvs {
	case 1:
		ev = started()
	case 2:
		ev = &agentdv1.RunEvent{Seq: 2, Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{Delta: "4"}}}
	case 3:
		select {
		case <-time.After(s.runTime):
		case <-s.ctx.Done():
			return nil, status.FromContextError(s.ctx.Err()).Err()
		}
		ev = finished(agentdv1.RunEndReason_RUN_END_REASON_COMPLETED)
	default:
		return nil, io.EOF
	}
	return &agentdv1.RunResponse{Event: ev}, nil
}

// TestLoadNoServer counts the failed calls by status code.
func TestLoadNoServer(t *testing.T) {
	r := ctl{}.run(t, "--plaintext", "--addr", "127.0.0.1:1", "load", "--concurrency", "2", "--runs", "4", "--json")
	if r.code != exitFailed {
		t.Fatalf("want exit 1: %v", r)
	}
	var sum loadSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("the summary is not JSON: %v\n%s", err, r)
	}
	if sum.Runs != 0 || sum.Failed != 4 || sum.Errors["rpc Unavailable"] != 4 {
		t.Errorf("runs %d, failed %d, errors %v; want 4 failed, rpc Unavailable", sum.Runs, sum.Failed, sum.Errors)
	}
}

func TestLoadFlags(t *testing.T) {
	cmd, err := parseCommand([]string{"load", "--concurrency", "3", "--duration", "5s", "--runs", "9", "--input", "hi", "--agent", "a", "--server-pid", "42", "--json", "--connections", "2", "--plaintext"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := loadConfig{concurrency: 3, duration: 5 * time.Second, runs: 9, input: "hi", agent: "a", serverPID: 42, json: true, connections: 2}
	if cmd.name != "load" || cmd.load == nil || *cmd.load != want || !cmd.conn.plaintext {
		t.Errorf("parseCommand = %+v, load %+v; want load %+v", cmd, cmd.load, want)
	}
	cmd, err = parseCommand([]string{"load"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if want := (loadConfig{concurrency: 50, duration: 30 * time.Second, input: defaultLoadInput, connections: 1}); *cmd.load != want {
		t.Errorf("defaults %+v, want %+v", *cmd.load, want)
	}
	for _, args := range [][]string{{"load", "--concurrency", "0"}, {"load", "--duration", "0s"}, {"load", "--runs", "-1"}, {"load", "prompt"}, {"load", "--connections", "0"}, {"load", "--concurrency", "2", "--connections", "3"}} {
		if _, err := parseCommand(args, func(string) string { return "" }); err == nil {
			t.Errorf("parseCommand(%q) took it", args)
		}
	}
}

// processCPU reads a process's CPU time from /proc: this test's own, which grows as it
// burns CPU, and agrees with getrusage. The spin is measured in CPU, not wall time, so a
// busy machine that gives this process little of a core only makes it take longer.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self0 := selfCPU()
	const spin = 200 * time.Millisecond
	for selfCPU()-self0 < spin {
		for i := 0; i < 1_000_000; i++ {
			spinSink += i
		}
	}
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	burned, self := after-before, selfCPU()-self0
	// /proc counts in clock ticks (10 ms); the two reads bracket the spin a little apart.
	if slack := 50*time.Millisecond + self/10; burned < self-slack || burned > self+slack {
		t.Errorf("/proc says %v of CPU for a spin getrusage counts as %v", burned, self)
	}
	if _, err := processCPU(0); err == nil {
		t.Error("processCPU(0) read something")
	}
}

// spinSink keeps TestProcessCPU's spin from being optimised away.
var spinSink int

// cpuSummary divides the CPU by the runs and deltas the load completed, and the peak RSS
// above the start by its streams.
func TestCPUSummary(t *testing.T) {
	sum := loadSummary{Concurrency: 10, Runs: 100, Deltas: 9000, CutDeltas: 1000, ServerRSS: &loadRSS{StartKiB: 1000, PeakKiB: 1640}}
	c := cpuSummary(sum, time.Second, 3*time.Second)
	want := loadCPU{ClientSeconds: 1, ServerSeconds: 3, PerRunMS: 40, ServerPerRunMS: 30, DeltasPerCPUSecond: 2500, ServerMicrosPerDelta: 300, ServerRSSPerStreamKiB: 64}
	if *c != want {
		t.Errorf("cpuSummary = %+v, want %+v", *c, want)
	}
}

// countingClient counts the runs started through it.
type countingClient struct {
	pacedClient
	n *atomic.Int64
}

func (c countingClient) Run(ctx context.Context, opts ...grpc.CallOption) (agentdv1.AgentService_RunClient, error) {
	c.n.Add(1)
	return c.pacedClient.Run(ctx, opts...)
}

// With --connections the streams are spread over that many connections, round robin.
func TestLoadSpreadsOverConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var counts [3]atomic.Int64
		clients := make([]agentdv1.AgentServiceClient, len(counts))
		for i := range clients {
			clients[i] = countingClient{pacedClient{runTime: 100 * time.Millisecond}, &counts[i]}
		}
		cfg := loadConfig{concurrency: 6, duration: time.Second, runs: 60, input: defaultLoadInput, json: true, connections: 3}
		var stdout, stderr bytes.Buffer
		runLoad(t.Context(), clients, cfg, env{stdout: &stdout, stderr: &stderr, interrupts: make(chan os.Signal)})
		for i := range counts {
			if n := counts[i].Load(); n < 15 || n > 25 {
				t.Errorf("connection %d carried %d runs, want about a third of 60", i, n)
			}
		}
	})
}
