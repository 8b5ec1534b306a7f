package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime/llm/workload"
)

// defaultLoadInput is the prompt `agentctl load` runs with; the benchmark workload's model
// ignores it.
const defaultLoadInput = "Run the scripted workload."

// failPause is how long a worker waits after a call refused before any event.
const failPause = 10 * time.Millisecond

// loadConfig is what `agentctl load` runs, and for how long.
type loadConfig struct {
	concurrency int
	duration    time.Duration
	runs        int // 0: no cap
	input       string
	agent       string
	serverPID   int // 0: no RSS sampling
	json        bool
	connections int // connections the streams are spread over
}

// loadFlagSet returns a flag set with the load flags, bound to l.
func loadFlagSet(l *loadConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("agentctl load", flag.ContinueOnError)
	fs.IntVar(&l.concurrency, "concurrency", 50, "`number` of Run streams kept going at once")
	fs.DurationVar(&l.duration, "duration", 30*time.Second, "how long to keep starting runs, such as 30s; runs still going then are cut and not counted")
	fs.IntVar(&l.runs, "runs", 0, "stop after this `number` of runs, if it comes before --duration (default: no cap)")
	fs.StringVar(&l.input, "input", defaultLoadInput, "the `prompt` of every run")
	fs.StringVar(&l.agent, "agent", "", "`name` of the agent to run (default: the server's default agent)")
	fs.IntVar(&l.serverPID, "server-pid", 0, "`pid` of agentd, on this machine: its VmRSS is sampled every second and reported (Linux)")
	fs.BoolVar(&l.json, "json", false, "print the summary as one JSON object")
	fs.IntVar(&l.connections, "connections", 1, "`number` of connections the streams are spread over, as many clients (or a mesh's sidecars) would be")
	return fs
}

func (l loadConfig) check() error {
	var errs []error
	if l.concurrency < 1 {
		errs = append(errs, errors.New("--concurrency must be at least 1"))
	}
	if l.duration <= 0 {
		errs = append(errs, errors.New("--duration must be positive"))
	}
	if l.runs < 0 {
		errs = append(errs, errors.New("--runs must not be negative"))
	}
	if l.connections < 1 || l.connections > l.concurrency {
		errs = append(errs, errors.New("--connections must be at least 1 and at most --concurrency"))
	}
	if l.serverPID < 0 {
		errs = append(errs, errors.New("--server-pid must not be negative"))
	}
	return errors.Join(errs...)
}

// loadOutcome is how one run of the load ended.
type loadOutcome struct {
	firstEvent time.Duration // from opening the stream to its first event
	finish     time.Duration // from opening the stream to run_finished
	// deltas are the model's text, reasoning and tool-argument deltas: for a completed
	// run of the benchmark workload (--model workload:…), as many as the workload
	// streams, which the server may have merged into fewer events for a client behind;
	// else the delta events read.
	deltas    int
	events    int // delta events read
	bytes     int // the deltas' text, in bytes
	exact     bool
	approvals int    // approval_requested answered
	err       string // the kind of failure; "" for a completed run
	cut       bool   // cut short by the end of the load (duration, Ctrl-C)
}

// loadSummary is what `agentctl load` reports; --json prints it as is.
type loadSummary struct {
	Concurrency   int              `json:"concurrency"`
	Elapsed       float64          `json:"elapsed_seconds"`
	Interrupted   bool             `json:"interrupted,omitempty"`
	Runs          int              `json:"runs"`            // completed runs
	Failed        int              `json:"failed"`          // runs that ended otherwise
	Cut           int              `json:"cut"`             // runs going when the load ended, not counted
	RunsPerSec    float64          `json:"runs_per_second"` // completed runs per second
	Deltas        int64            `json:"deltas"`          // the model's deltas in completed runs
	CutDeltas     int64            `json:"cut_deltas"`      // deltas of the runs cut at the end (estimated from their bytes)
	DeltaEvents   int64            `json:"delta_events"`    // delta events read, cut runs' too: fewer than deltas when the server merged some for a client behind
	DeltasPerRun  float64          `json:"deltas_per_run"`
	DeltasPerSec  float64          `json:"deltas_per_second"`
	Approvals     int64            `json:"approvals"`
	FirstEventMS  *loadPercentiles `json:"first_event_ms,omitempty"`
	FinishMS      *loadPercentiles `json:"finish_ms,omitempty"`
	Errors        map[string]int   `json:"errors"`
	ServerRSS     *loadRSS         `json:"server_rss,omitempty"`
	ServerRSSNote string           `json:"server_rss_error,omitempty"`
	// CPU is the CPU time used while the load ran: agentctl's, and, with --server-pid,
	// the server's.
	CPU *loadCPU `json:"cpu,omitempty"`
}

// loadCPU is the CPU time the load cost, and what it bought. The work of runs cut at
// the end counts, their runs do not: a short load overstates the cost per run (with N
// streams, up to N runs' worth); the figures per delta count the cut runs' deltas too.
type loadCPU struct {
	ClientSeconds float64 `json:"client_seconds"`
	ServerSeconds float64 `json:"server_seconds,omitempty"`
	// PerRunMS is the CPU per completed run, server and client together; ServerPerRunMS
	// the server's alone.
	PerRunMS       float64 `json:"per_run_ms"`
	ServerPerRunMS float64 `json:"server_per_run_ms,omitempty"`
	// DeltasPerCPUSecond counts the deltas of completed runs per CPU-second of server and
	// client together; ServerMicrosPerDelta is the server's CPU per delta.
	DeltasPerCPUSecond   float64 `json:"deltas_per_cpu_second"`
	ServerMicrosPerDelta float64 `json:"server_us_per_delta,omitempty"`
	// ServerRSSPerStreamKiB is the server's peak RSS above its RSS at the start, per
	// stream of the load.
	ServerRSSPerStreamKiB float64 `json:"server_rss_per_stream_kib,omitempty"`
}

// loadPercentiles are latencies in milliseconds.
type loadPercentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// loadRSS is the server's resident set, in KiB, from /proc/PID/status.
type loadRSS struct {
	StartKiB int64 `json:"start_kib"`
	PeakKiB  int64 `json:"peak_kib"`
	FinalKiB int64 `json:"final_kib"`
	Samples  int   `json:"samples"`
}

// runLoad is `agentctl load`: cfg.concurrency workers each run the agent over and over on
// their own Run stream, answering approvals, until cfg.duration passes, cfg.runs runs
// have started, or Ctrl-C; then it prints the summary.
func runLoad(ctx context.Context, clients []agentdv1.AgentServiceClient, cfg loadConfig, e env) int {
	// stop ends the load: runs going then are cut. It is not ctx's own deadline (such as
	// --max-time), so that a cut run is told from a failed one.
	begin := time.Now()
	stopCtx, cancelStop := context.WithCancel(context.Background())
	defer cancelStop()
	var stopOnce sync.Once
	var stoppedAt atomic.Int64 // since begin
	stop := func() {
		stopOnce.Do(func() {
			stoppedAt.Store(int64(time.Since(begin)))
			cancelStop()
		})
	}
	ctx, cancelCtx := context.WithCancel(ctx)
	defer cancelCtx()
	context.AfterFunc(ctx, stop)

	var rss *rssSampler
	serverCPU0, serverCPUErr := time.Duration(0), error(nil)
	if cfg.serverPID > 0 {
		rss = startRSSSampler(cfg.serverPID, time.Second)
		serverCPU0, serverCPUErr = processCPU(cfg.serverPID)
	}
	clientCPU0 := selfCPU()

	timer := time.AfterFunc(cfg.duration, stop)
	defer timer.Stop()

	var started atomic.Int64
	outcomes := make([][]loadOutcome, cfg.concurrency)
	var wg sync.WaitGroup
	for w := range cfg.concurrency {
		wg.Go(func() {
			for stopCtx.Err() == nil {
				if cfg.runs > 0 && started.Add(1) > int64(cfg.runs) {
					return
				}
				o := loadRun(ctx, stopCtx, clients[w%len(clients)], cfg)
				outcomes[w] = append(outcomes[w], o)
				if o.err != "" && o.firstEvent == 0 {
					// Refused outright: pause, rather than spin on the refusals.
					select {
					case <-stopCtx.Done():
					case <-time.After(failPause):
					}
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()

	interrupted := false
wait:
	for {
		select {
		case <-done:
			break wait
		case <-e.interrupts:
			if !interrupted {
				interrupted = true
				fmt.Fprintln(e.stderr, "agentctl: stopping the load")
				stop()
			}
		}
	}
	// The load lasted until it was stopped (the runs going then are cut, and not counted),
	// or, when --runs ended it first, until its last run finished.
	elapsed := time.Since(begin)
	if stopCtx.Err() != nil {
		elapsed = min(elapsed, time.Duration(stoppedAt.Load()))
	}
	stop()

	clientCPU := selfCPU() - clientCPU0
	var serverCPU time.Duration
	if cfg.serverPID > 0 && serverCPUErr == nil {
		var end time.Duration
		if end, serverCPUErr = processCPU(cfg.serverPID); serverCPUErr == nil {
			serverCPU = end - serverCPU0
		}
	}
	sum := summarize(cfg, outcomes, elapsed)
	sum.Interrupted = interrupted
	if rss != nil {
		r, err := rss.stop()
		sum.ServerRSS = r
		if err != nil {
			sum.ServerRSSNote = err.Error()
		}
	}
	sum.CPU = cpuSummary(sum, clientCPU, serverCPU)
	if cfg.json {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		printSummary(e.stdout, sum)
	}
	switch {
	case interrupted:
		return exitCancel
	case sum.Failed > 0 || sum.Runs == 0:
		return exitFailed
	}
	return exitOK
}

// loadRun runs the agent once on a new Run stream and reads every event until
// run_finished, approving each approval it is asked. ctx ends the call; stop ends the
// load, and a run going then is cut.
func loadRun(ctx, stop context.Context, client agentdv1.AgentServiceClient, cfg loadConfig) (o loadOutcome) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(stop, cancel)()
	defer func() {
		if o.err != "" && stop.Err() != nil && ctx.Err() != nil {
			o = loadOutcome{cut: true, deltas: o.deltas, events: o.events, bytes: o.bytes} // its deltas cost CPU all the same
		}
	}()

	begin := time.Now()
	stream, err := client.Run(ctx)
	if err != nil {
		return loadOutcome{err: rpcErrKind(err)}
	}
	seq := int64(1)
	var size *workload.Size // the workload the server's model replays, if it does
	// A failed Send means the stream ended: Recv says how.
	_ = stream.Send(&agentdv1.RunRequest{ClientSeq: seq, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{
		Agent: cfg.agent,
		Input: cfg.input,
	}}})
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				o.err = "stream ended before run_finished"
			} else {
				o.err = rpcErrKind(err)
			}
			return o
		}
		if o.firstEvent == 0 {
			o.firstEvent = max(time.Since(begin), 1)
		}
		switch k := resp.GetEvent().GetKind().(type) {
		case *agentdv1.RunEvent_RunStarted:
			if name, ok := strings.CutPrefix(k.RunStarted.GetModel(), "workload:"); ok {
				name, _, _ = strings.Cut(name, "@") // paced: workload:medium@50
				if w, err := workload.Lookup(name); err == nil {
					size = &w
				}
			}
		case *agentdv1.RunEvent_TextDelta:
			o.deltas, o.events, o.bytes = o.deltas+1, o.events+1, o.bytes+len(k.TextDelta.GetDelta())
		case *agentdv1.RunEvent_ReasoningDelta:
			o.deltas, o.events, o.bytes = o.deltas+1, o.events+1, o.bytes+len(k.ReasoningDelta.GetDelta())
		case *agentdv1.RunEvent_ToolCallArgsDelta:
			o.deltas, o.events, o.bytes = o.deltas+1, o.events+1, o.bytes+len(k.ToolCallArgsDelta.GetDelta())
		case *agentdv1.RunEvent_ApprovalRequested:
			o.approvals++
			seq++
			_ = stream.Send(&agentdv1.RunRequest{ClientSeq: seq, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
				ApprovalId: k.ApprovalRequested.GetApprovalId(),
				Outcome:    agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
			}}})
		case *agentdv1.RunEvent_InputAck:
			if a := k.InputAck; a.GetError() != nil && o.err == "" {
				// Noted; the run still goes on to run_finished, which decides.
				o.err = "input refused: " + cmp.Or(a.GetError().GetReason(), "?")
			}
		case *agentdv1.RunEvent_RunFinished:
			o.finish = time.Since(begin)
			f := k.RunFinished
			if size != nil && f.GetReason() == agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				o.deltas, o.exact = size.Deltas(), true
			}
			if f.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				o.err = "run " + strings.TrimPrefix(f.GetReason().String(), "RUN_END_REASON_")
				if r := f.GetError().GetReason(); r != "" {
					o.err += " (" + r + ")"
				}
			}
			// Half-close, and wait for the server to end the call, so that the stream
			// is not reset under it.
			_ = stream.CloseSend()
			for {
				if _, err := stream.Recv(); err != nil {
					if !errors.Is(err, io.EOF) && o.err == "" && stop.Err() == nil {
						o.err = "after run_finished: " + rpcErrKind(err)
					}
					return o
				}
			}
		}
	}
}

// rpcErrKind names an RPC error by its status code and agentd's reason; by its message
// too when neither says much (such as the rate limit's RESOURCE_EXHAUSTED).
func rpcErrKind(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return "rpc: " + clip(err.Error(), 80)
	}
	kind := "rpc " + st.Code().String()
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() != "" {
			return kind + " (" + ei.GetReason() + ")"
		}
	}
	switch st.Code() {
	case codes.Unknown, codes.Internal, codes.ResourceExhausted:
		kind += ": " + clip(st.Message(), 80)
	}
	return kind
}

// summarize reduces the workers' outcomes to the summary.
func summarize(cfg loadConfig, outcomes [][]loadOutcome, elapsed time.Duration) loadSummary {
	sum := loadSummary{Concurrency: cfg.concurrency, Elapsed: elapsed.Seconds(), Errors: map[string]int{}}
	var first, finish []time.Duration
	var cutBytes, exactDeltas, exactBytes int64 // to count the deltas of runs cut short

	for _, worker := range outcomes {
		for _, o := range worker {
			switch {
			case o.cut:
				sum.Cut++
				sum.DeltaEvents += int64(o.events)
				cutBytes += int64(o.bytes)
				sum.CutDeltas += int64(o.deltas)
				continue
			case o.err != "":
				sum.Failed++
				sum.Errors[o.err]++
			default:
				sum.Runs++
				sum.Deltas += int64(o.deltas)
				sum.DeltaEvents += int64(o.events)
				if o.exact {
					exactDeltas, exactBytes = exactDeltas+int64(o.deltas), exactBytes+int64(o.bytes)
				}
				finish = append(finish, o.finish)
			}
			sum.Approvals += int64(o.approvals)
			if o.firstEvent > 0 {
				first = append(first, o.firstEvent)
			}
		}
	}
	if exactBytes > 0 {
		// The workload's deltas are alike in every run: a cut run made as many as its
		// bytes say, however the server merged them.
		sum.CutDeltas = int64(math.Round(float64(cutBytes) * float64(exactDeltas) / float64(exactBytes)))
	}
	if s := elapsed.Seconds(); s > 0 {
		sum.RunsPerSec = float64(sum.Runs) / s
		sum.DeltasPerSec = float64(sum.Deltas) / s
	}
	if sum.Runs > 0 {
		sum.DeltasPerRun = float64(sum.Deltas) / float64(sum.Runs)
	}
	sum.FirstEventMS = percentiles(first)
	sum.FinishMS = percentiles(finish)
	return sum
}

// percentiles returns the nearest-rank p50, p90, p99 and maximum of ds, or nil when
// there are none.
func percentiles(ds []time.Duration) *loadPercentiles {
	if len(ds) == 0 {
		return nil
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := int(p*float64(len(ds))+0.999999) - 1 // nearest rank: ceil(p*n)-1
		i = min(max(i, 0), len(ds)-1)
		return ms(ds[i])
	}
	return &loadPercentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// printSummary prints the summary for a person.
func printSummary(w io.Writer, s loadSummary) {
	how := ""
	if s.Interrupted {
		how = ", stopped by Ctrl-C"
	}
	fmt.Fprintf(w, "load: %d streams for %.1fs%s\n", s.Concurrency, s.Elapsed, how)
	fmt.Fprintf(w, "runs:        %d completed, %d failed, %d cut at the end (not counted)\n", s.Runs, s.Failed, s.Cut)
	fmt.Fprintf(w, "throughput:  %.1f runs/s, %.0f deltas/s (%.1f deltas per run)\n", s.RunsPerSec, s.DeltasPerSec, s.DeltasPerRun)
	if all := s.Deltas + s.CutDeltas; all > 0 && s.DeltaEvents < all {
		fmt.Fprintf(w, "merged:      the deltas came in %d events, %.2f a delta (the server merges deltas for a client behind)\n", s.DeltaEvents, float64(s.DeltaEvents)/float64(all))
	}
	if s.Approvals > 0 {
		fmt.Fprintf(w, "approvals:   %d answered\n", s.Approvals)
	}
	lat := func(name string, p *loadPercentiles) {
		if p == nil {
			fmt.Fprintf(w, "%-12s —\n", name)
			return
		}
		fmt.Fprintf(w, "%-12s p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n", name, p.P50, p.P90, p.P99, p.Max)
	}
	lat("first event:", s.FirstEventMS)
	lat("finish:", s.FinishMS)
	if len(s.Errors) == 0 {
		fmt.Fprintln(w, "errors:      none")
	} else {
		fmt.Fprintln(w, "errors:")
		kinds := make([]string, 0, len(s.Errors))
		for k := range s.Errors {
			kinds = append(kinds, k)
		}
		slices.SortFunc(kinds, func(a, b string) int { return s.Errors[b] - s.Errors[a] })
		for _, k := range kinds {
			fmt.Fprintf(w, "  %6d  %s\n", s.Errors[k], k)
		}
	}
	if r := s.ServerRSS; r != nil {
		fmt.Fprintf(w, "server RSS:  start %s, peak %s, final %s (%d samples)\n", kib(r.StartKiB), kib(r.PeakKiB), kib(r.FinalKiB), r.Samples)
	}
	for k := range s.Errors {
		switch {
		case strings.HasPrefix(k, "rpc ResourceExhausted") && strings.Contains(k, "a second"):
			fmt.Fprintln(w, "  agentd's rate limit (--rate-limit, 50 calls/s per authenticated caller by default) refused runs: start it with --rate-limit 0 to load it")
		case strings.HasPrefix(k, "rpc ResourceExhausted") && strings.Contains(k, "one caller"):
			fmt.Fprintln(w, "  agentd's limit of runs per caller (--max-runs-per-caller) refused runs: raise it, or start agentd with --max-runs-per-caller 0 to load it")
		default:
			continue
		}
		break
	}
	if s.ServerRSSNote != "" {
		fmt.Fprintf(w, "server RSS:  %s\n", s.ServerRSSNote)
	}
	if c := s.CPU; c != nil {
		if c.ServerSeconds > 0 {
			fmt.Fprintf(w, "CPU:         server %.2fs, agentctl %.2fs: %.2f ms per run (server %.2f ms), %.0f deltas per CPU-second, server %.2f µs per delta\n",
				c.ServerSeconds, c.ClientSeconds, c.PerRunMS, c.ServerPerRunMS, c.DeltasPerCPUSecond, c.ServerMicrosPerDelta)
		} else {
			fmt.Fprintf(w, "CPU:         agentctl %.2fs: %.2f ms per run (with --server-pid, the server's too)\n", c.ClientSeconds, c.PerRunMS)
		}
		if c.ServerRSSPerStreamKiB != 0 {
			fmt.Fprintf(w, "server RSS:  %.1f KiB per stream above the start\n", c.ServerRSSPerStreamKiB)
		}
	}
}

func kib(k int64) string { return fmt.Sprintf("%.1f MiB", float64(k)/1024) }

// cpuSummary reduces the CPU times to what the load cost per run and per delta.
func cpuSummary(sum loadSummary, client, server time.Duration) *loadCPU {
	c := &loadCPU{ClientSeconds: client.Seconds(), ServerSeconds: server.Seconds()}
	total := (client + server).Seconds()
	if sum.Runs > 0 {
		c.PerRunMS = total * 1000 / float64(sum.Runs)
		c.ServerPerRunMS = server.Seconds() * 1000 / float64(sum.Runs)
	}
	deltas := sum.Deltas + sum.CutDeltas
	if total > 0 {
		c.DeltasPerCPUSecond = float64(deltas) / total
	}
	if deltas > 0 {
		c.ServerMicrosPerDelta = server.Seconds() * 1e6 / float64(deltas)
	}
	if r := sum.ServerRSS; r != nil && sum.Concurrency > 0 {
		c.ServerRSSPerStreamKiB = float64(r.PeakKiB-r.StartKiB) / float64(sum.Concurrency)
	}
	return c
}

// selfCPU returns the CPU time agentctl has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// processCPU returns the CPU time process pid has used, user and system, from
// /proc/pid/stat (Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("--server-pid %d: %w", pid, err)
	}
	// The fields after the command, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("--server-pid %d: /proc/%d/stat has no CPU times", pid, pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of the line
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("--server-pid %d: /proc/%d/stat: %w", pid, pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// rssSampler samples a process's VmRSS on a ticker.
type rssSampler struct {
	pid  int
	quit chan struct{}
	done chan struct{}

	r   loadRSS
	err error
}

func startRSSSampler(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{pid: pid, quit: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() {
	k, err := readVmRSS(s.pid)
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	if s.r.Samples == 0 {
		s.r.StartKiB = k
	}
	s.r.Samples++
	s.r.PeakKiB = max(s.r.PeakKiB, k)
	s.r.FinalKiB = k
}

// stop takes a last sample and returns what was seen; nil when no sample could be read.
func (s *rssSampler) stop() (*loadRSS, error) {
	close(s.quit)
	<-s.done
	s.sample()
	if s.r.Samples == 0 {
		return nil, s.err
	}
	return &s.r, s.err
}

// readVmRSS reads VmRSS, in KiB, from /proc/pid/status.
func readVmRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("--server-pid %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("--server-pid %d: VmRSS %q: %w", pid, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("--server-pid %d: no VmRSS in /proc/%d/status", pid, pid)
}
