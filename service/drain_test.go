package service_test

// Drain at scale (many runs in every phase, none lost) and backpressure from a slow client.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// seqOf streams evs, stopping early when ctx is done.
func seqOf(ctx context.Context, evs ...runtime.ModelEvent) iter.Seq2[runtime.ModelEvent, error] {
	return func(yield func(runtime.ModelEvent, error) bool) {
		for _, ev := range evs {
			if ctx.Err() != nil {
				yield(runtime.ModelEvent{}, ctx.Err())
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// everyCall is a scripted model whose every call (up to calls) runs fn: the scripted
// model counts its calls over all runs, and many runs share it here.
func everyCall(calls int, fn func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error]) *rt.Model {
	steps := make([]rt.Step, calls)
	for i := range steps {
		steps[i] = rt.Step{Func: fn}
	}
	return &rt.Model{Steps: steps}
}

// lastIsToolResult reports whether the request ends with a tool result.
func lastIsToolResult(req *runtime.ModelRequest) bool {
	if len(req.Messages) == 0 {
		return false
	}
	for _, p := range req.Messages[len(req.Messages)-1].Parts {
		if p.Kind == runtime.PartToolResult {
			return true
		}
	}
	return false
}

// asking calls the client tool pick_color, then answers once its result is in.
func asking(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	if lastIsToolResult(req) {
		return seqOf(ctx, rt.Text("red it is"), rt.Finish(runtime.FinishStop))
	}
	return seqOf(ctx, rt.ToolDelta(0, "call_0_0", "pick_color", `{}`), rt.Finish(runtime.FinishToolCalls))
}

// drainKind is the phase a run is in when the server drains.
type drainKind int

const (
	quick     drainKind = iota // the demo answers at once: completes
	approval                   // parked on an approval the client never answers
	forever                    // the model streams forever
	client                     // waiting on a client tool
	finishing                  // streaming, and finishes once its client has the go_away
	kinds
)

func (k drainKind) String() string {
	return [...]string{"quick", "approval", "forever", "client", "finishing"}[k]
}

// drainRun is one run of the drain test: what its client saw on each server.
type drainRun struct {
	index   int
	kind    drainKind
	spec    *agentdv1.RunSpec
	first   []*agentdv1.RunEvent
	firstSt error
	second  []*agentdv1.RunEvent
	secSt   error
	err     error // the client's own failure (timeout, unexpected end)
}

// readAll reads a Run stream to its end; it returns the events and the status.
func readAll(s agentdv1.AgentService_RunClient, evs []*agentdv1.RunEvent) ([]*agentdv1.RunEvent, error) {
	for {
		resp, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return evs, err
		}
		evs = append(evs, resp.GetEvent())
	}
}

func lastFinished(evs []*agentdv1.RunEvent) *agentdv1.RunFinished {
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1].GetRunFinished()
}

// drainN is the number of runs: 1000 take a few seconds with -race on 2 cores.
const drainN = 1000

// TestDrain_ManyRunsInEveryPhaseNoneLost drains a server with runs in every phase, on a
// synctest clock: the drain period passes only once every goroutine waits, so the runs
// that can finish within it do, however loaded the machine.
func TestDrain_ManyRunsInEveryPhaseNoneLost(t *testing.T) {
	synctest.Test(t, drainManyRuns)
}

func drainManyRuns(t *testing.T) {
	const (
		period  = 2 * time.Second
		timeout = 60 * time.Second // a hang fails the test instead of blocking it
		workers = 64               // bounds the runs being opened or resumed at once
	)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	begin := time.Now()

	streamForever := func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			if !yield(rt.Text("once upon a time"), nil) {
				return
			}
			<-ctx.Done()
			yield(runtime.ModelEvent{}, ctx.Err())
		}
	}
	answer := func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return seqOf(ctx, rt.Text("and they lived happily ever after"), rt.Finish(runtime.FinishStop))
	}
	// A finishing run's model streams, then waits for its gate, which its client closes
	// when it reads the go_away: the run is under way when the drain starts, and ends
	// within the drain period.
	gates := make([]chan struct{}, drainN)
	finishAfterGate := func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			var i int
			if _, err := fmt.Sscanf(req.Messages[0].Parts[0].Text, "finish %d", &i); err != nil {
				yield(runtime.ModelEvent{}, err)
				return
			}
			if !yield(rt.Text("almost"), nil) {
				return
			}
			select {
			case <-gates[i]:
			case <-ctx.Done():
				yield(runtime.ModelEvent{}, ctx.Err())
				return
			}
			for ev, err := range seqOf(ctx, rt.Text(" done"), rt.Finish(runtime.FinishStop)) {
				if !yield(ev, err) {
					return
				}
			}
		}
	}
	calls := 4 * drainN
	first := newTestServer(t, service.Config{},
		scripted{name: "storyteller", model: everyCall(calls, streamForever)},
		scripted{name: "asker", model: everyCall(calls, asking)},
		scripted{name: "finisher", model: everyCall(calls, finishAfterGate)})
	// The second replica shares the key; its storyteller finishes its story.
	second := newTestServer(t, service.Config{},
		scripted{name: "storyteller", model: everyCall(calls, answer)},
		scripted{name: "asker", model: everyCall(calls, asking)})
	pickColor := []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "pick_color", Description: "Asks the user for a color."}}}

	runs := make([]*drainRun, drainN)
	for i := range runs {
		r := &drainRun{index: i, kind: drainKind(i % int(kinds))}
		switch r.kind {
		case quick:
			r.spec = servicetest.Input("demo", "what is 2+2?")
		case approval:
			r.spec = servicetest.Input("demo", "save a note: milk")
		case forever:
			r.spec = servicetest.Input("storyteller", "tell me a story")
		case client:
			r.spec = servicetest.Input("asker", "pick a color")
			r.spec.ClientTools = pickColor
		case finishing:
			r.spec = servicetest.Input("finisher", fmt.Sprintf("finish %d", i))
			gates[i] = make(chan struct{})
		}
		runs[i] = r
	}

	// Open every run and bring it to its phase; a run's goroutine then reads its stream to
	// the end. sem bounds the runs between opening and reaching their phase.
	sem := make(chan struct{}, workers)
	var reached, ended sync.WaitGroup
	for _, r := range runs {
		reached.Add(1)
		ended.Add(1)
		sem <- struct{}{}
		go func() {
			defer ended.Done()
			once := sync.OnceFunc(func() { <-sem; reached.Done() })
			defer once()
			s, err := first.Client.Run(ctx)
			if err != nil {
				r.err = err
				return
			}
			if err := s.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: r.spec}}); err != nil {
				r.err = err
				return
			}
			phase := func(ev *agentdv1.RunEvent) bool {
				switch r.kind {
				case quick:
					return ev.GetRunStarted() != nil
				case approval:
					return ev.GetApprovalRequested() != nil
				case forever, finishing:
					return ev.GetTextDelta() != nil
				default:
					return ev.GetToolExecutionStarted().GetExecutor() == agentdv1.Executor_EXECUTOR_CLIENT
				}
			}
			for {
				resp, err := s.Recv()
				if err != nil {
					r.err = fmt.Errorf("the stream ended (%v) before the run reached its phase", err)
					return
				}
				r.first = append(r.first, resp.GetEvent())
				if phase(resp.GetEvent()) {
					break
				}
			}
			once()
			if r.kind == finishing {
				for {
					resp, err := s.Recv()
					if err != nil {
						r.err = fmt.Errorf("the stream ended (%v) before a go_away", err)
						return
					}
					r.first = append(r.first, resp.GetEvent())
					if resp.GetEvent().GetGoAway() != nil {
						break
					}
				}
				close(gates[r.index])
			}
			r.first, r.firstSt = readAll(s, r.first)
		}()
	}
	reached.Wait()
	opened := time.Since(begin)
	if n := first.Service.ActiveRuns(); n < drainN*3/4 {
		t.Errorf("ActiveRuns() = %d when draining starts, want at least the %d parked runs", n, drainN*3/4)
	}

	shutStart := time.Now()
	if err := first.Service.Shutdown(ctx, period); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	shutTook := time.Since(shutStart)
	// The parked runs hold Shutdown for the whole period, and no longer: then they are cut.
	if shutTook != period {
		t.Errorf("Shutdown took %s, want the drain period, %s", shutTook, period)
	}
	ended.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the runs did not end within %s", timeout)
	}
	if n := first.Service.ActiveRuns(); n != 0 {
		t.Errorf("ActiveRuns() = %d after Shutdown, want 0", n)
	}

	// Every run ended COMPLETED, or SHUTDOWN with a continuation after a go_away.
	var completedFirst, shutdown, quickGoAway int
	for i, r := range runs {
		if r.err != nil {
			t.Fatalf("run %d (%s): %v; events:\n%s", i, r.kind, r.err, servicetest.Render(r.first))
		}
		servicetest.CheckEvents(t, r.first)
		fin := lastFinished(r.first)
		goAway := -1
		for j, ev := range r.first {
			if ev.GetGoAway() != nil {
				goAway = j
				if d := ev.GetGoAway().GetTimeLeft().AsDuration(); d > period {
					t.Errorf("run %d: go_away time_left %s, want at most %s", i, d, period)
				}
			}
		}
		switch fin.GetReason() {
		case agentdv1.RunEndReason_RUN_END_REASON_COMPLETED:
			completedFirst++
			if r.firstSt != nil {
				t.Errorf("run %d (%s) completed with status %v", i, r.kind, r.firstSt)
			}
		case agentdv1.RunEndReason_RUN_END_REASON_SHUTDOWN:
			shutdown++
			if len(fin.GetContinuation()) == 0 {
				t.Fatalf("run %d (%s) shut down without a continuation", i, r.kind)
			}
			if goAway < 0 {
				t.Errorf("run %d (%s) shut down without a go_away first", i, r.kind)
			}
			if code, reason, _ := errorInfo(r.firstSt); code != codes.Unavailable || reason != "SERVER_SHUTDOWN" {
				t.Errorf("run %d (%s): status %v, want UNAVAILABLE SERVER_SHUTDOWN", i, r.kind, r.firstSt)
			}
		default:
			t.Fatalf("run %d (%s) finished %v (%v); events:\n%s", i, r.kind, fin.GetReason(), r.firstSt, servicetest.Render(r.first))
		}
		if r.kind == quick && goAway >= 0 {
			quickGoAway++
		}
		if r.kind == finishing {
			// Under way when draining started: it got a go_away, and the period to finish.
			if goAway < 0 || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Fatalf("run %d (%s): go_away at %d, finished %v; want a go_away and COMPLETED", i, r.kind, goAway, fin.GetReason())
			}
		} else if r.kind != quick {
			// Parked when draining started: it got a go_away and could not complete.
			if goAway < 0 || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_SHUTDOWN {
				t.Fatalf("run %d (%s): go_away at %d, finished %v; want a go_away and SHUTDOWN", i, r.kind, goAway, fin.GetReason())
			}
		}
	}
	if t.Failed() {
		return
	}

	// Resume every run shut down on the second replica, answering what it waits for.
	resumeStart := time.Now()
	var resumed sync.WaitGroup
	for _, r := range runs {
		fin := lastFinished(r.first)
		if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_SHUTDOWN {
			continue
		}
		spec := &agentdv1.RunSpec{Messages: fin.GetNewMessages(), Continuation: fin.GetContinuation()}
		for _, a := range fin.GetPendingApprovals() {
			spec.Decisions = append(spec.Decisions, &agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED})
		}
		for _, id := range fin.GetPendingClientToolCallIds() {
			spec.ToolResults = append(spec.ToolResults, &agentdv1.ToolResult{ToolCallId: id, Output: &agentdv1.ToolResult_Text{Text: "red"}})
		}
		if r.kind == client {
			spec.ClientTools = pickColor
		}
		resumed.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; resumed.Done() }()
			s, err := second.Client.Run(ctx)
			if err != nil {
				r.err = err
				return
			}
			if err := s.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: spec}}); err != nil {
				r.err = err
				return
			}
			r.second, r.secSt = readAll(s, nil)
		}()
	}
	resumed.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the resumed runs did not end within %s", timeout)
	}
	resumeTook := time.Since(resumeStart)

	// Count: every run's transcript ends COMPLETED, on the first replica or the second.
	completed := 0
	want := map[drainKind]string{quick: "4", approval: "Saved your note", forever: "happily ever after", client: "red it is", finishing: "almost done"}
	for i, r := range runs {
		evs, st := r.first, r.firstSt
		if r.second != nil || r.err != nil {
			if r.err != nil {
				t.Fatalf("run %d (%s) resumed: %v", i, r.kind, r.err)
			}
			evs, st = r.second, r.secSt
			servicetest.CheckEvents(t, evs)
		}
		fin := lastFinished(evs)
		if st != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Errorf("run %d (%s) finished %v (%v); events:\n%s", i, r.kind, fin.GetReason(), st, servicetest.Render(evs))
			continue
		}
		if !strings.Contains(fin.GetFinalText(), want[r.kind]) {
			t.Errorf("run %d (%s) final text %q, want it to contain %q", i, r.kind, fin.GetFinalText(), want[r.kind])
			continue
		}
		completed++
	}
	t.Logf("%d runs: opened in %s, Shutdown took %s (period %s), %d completed on the first replica (%d quick ones after a go_away), %d shut down and resumed in %s, %d completed in all; total %s",
		drainN, opened, shutTook, period, completedFirst, quickGoAway, shutdown, resumeTook, completed, time.Since(begin))
	if completed != drainN {
		t.Errorf("%d of %d runs completed; %d lost", completed, drainN, drainN-completed)
	}
}

// TestSlowClient_BackpressureBoundsServerMemory runs on a synctest clock: a pause of the
// client's ends only once every goroutine waits, so the model has gone as far as flow
// control lets it, and a cancelled run has ended, whatever the machine's load.
//
// The model's deltas are one byte each. With ExactDeltas each is an event, and the
// bound is what the run's outbox and gRPC hold of them; merged, the run's outbox holds
// as many events, each of up to 1 KiB of deltas, so the model gets further ahead in
// deltas, and the server holds far fewer bytes for them.
func TestSlowClient_BackpressureBoundsServerMemory(t *testing.T) {
	t.Run("exact deltas", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { backpressureBoundsServerMemory(t, true, 50_000) })
	})
	t.Run("merged deltas", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { backpressureBoundsServerMemory(t, false, 400_000) })
	})
}

// backpressureBoundsServerMemory checks that the model is at most bound deltas ahead of
// a client that reads slowly.
func backpressureBoundsServerMemory(t *testing.T, exact bool, bound int64) {
	const deltas = 1_000_000
	var produced atomic.Int64
	flood := func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			for range deltas {
				if ctx.Err() != nil {
					yield(runtime.ModelEvent{}, ctx.Err())
					return
				}
				produced.Add(1)
				if !yield(rt.Text("x"), nil) {
					return
				}
			}
			yield(rt.Finish(runtime.FinishStop), nil)
		}
	}
	srv := newTestServer(t, service.Config{Config: runs.Config{ExactDeltas: exact}}, scripted{name: "flood", model: &rt.Model{Steps: []rt.Step{{Func: flood}}}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := srv.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := servicetest.Input("flood", "go")
	spec.Config = &agentdv1.RunConfig{OnDisconnect: agentdv1.OnDisconnect_ON_DISCONNECT_CANCEL}
	if err := s.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: spec}}); err != nil {
		t.Fatal(err)
	}
	read := 0 // deltas, as many as bytes of text
	recvDelta := func() {
		t.Helper()
		for {
			resp, err := s.Recv()
			if err != nil {
				t.Fatalf("Recv after %d deltas: %v", read, err)
			}
			if d := resp.GetEvent().GetTextDelta(); d != nil {
				read += len(d.GetDelta())
				return
			}
		}
	}
	// settled waits until the producer stops advancing, and returns how far it got.
	settled := func() int64 {
		t.Helper()
		last := produced.Load()
		for range 100 {
			time.Sleep(50 * time.Millisecond)
			now := produced.Load()
			if now == last {
				return now
			}
			last = now
		}
		t.Fatalf("the model kept producing (%d deltas, %d read): nothing holds it back", last, read)
		return 0
	}

	recvDelta()
	var ahead []int64
	for round := range 5 {
		p := settled()
		ahead = append(ahead, p-int64(read))
		t.Logf("round %d: produced %d, read %d, ahead %d", round, p, read, p-int64(read))
		if p-int64(read) > bound {
			t.Errorf("the model is %d deltas ahead of the client (%d produced, %d read), want at most %d", p-int64(read), p, read, bound)
		}
		if p >= deltas {
			t.Fatalf("the model produced all %d deltas while the client read %d", p, read)
		}
		// Read slowly: a few thousand deltas, then sleep again.
		for target := read + 2000; read < target; {
			recvDelta()
		}
	}
	before := produced.Load()
	cancel()
	time.Sleep(100 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for srv.Service.ActiveRuns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ActiveRuns() = %d after the client cancelled", srv.Service.ActiveRuns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after := produced.Load(); after >= deltas {
		t.Errorf("the model produced all %d deltas after the client cancelled (%d before)", after, before)
	}
}

// TestSlowClient_HeartbeatsStillFlow runs on a synctest clock, on which the tool, the
// heartbeats and the client's pauses keep their times however loaded the machine.
func TestSlowClient_HeartbeatsStillFlow(t *testing.T) {
	synctest.Test(t, heartbeatsStillFlow)
}

func heartbeatsStillFlow(t *testing.T) {
	const (
		interval = 25 * time.Millisecond
		toolTime = 750 * time.Millisecond
		readGap  = 75 * time.Millisecond // the client reads an event at most this often
	)
	// The model streams a sentence, then the tool keeps the run silent for toolTime.
	wait := runtime.NewTool(runtime.ToolSpec{Name: "wait", Description: "Waits."}, func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
		select {
		case <-time.After(toolTime):
			return runtime.Output{Text: "done"}, nil
		case <-ctx.Done():
			return runtime.Output{}, ctx.Err()
		}
	})
	words := strings.Fields("a slow client reads one event at a time while the model streams on")
	first := rt.Step{}
	for _, w := range words {
		first.Events = append(first.Events, rt.Text(w+" "))
	}
	first.Events = append(first.Events, rt.Call(0, "wait", `{}`).Events...)
	m := &rt.Model{Steps: []rt.Step{first, rt.Say("finished")}}
	srv := newTestServer(t, service.Config{Config: runs.Config{HeartbeatInterval: interval}},
		scripted{name: "dawdler", model: m, goTools: []runtime.Tool{wait}})
	s := servicetest.Open(t, srv.Client, servicetest.Input("dawdler", "go"))
	var evs []*agentdv1.RunEvent
	for {
		ev := s.Next()
		if ev == nil {
			break
		}
		evs = append(evs, ev)
		time.Sleep(readGap)
	}
	if s.Err() != nil || lastFinished(evs).GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v, %v; events:\n%s", lastFinished(evs).GetReason(), s.Err(), servicetest.Render(evs))
	}
	// The heartbeats went out on time while the tool ran, though the client read each
	// of them long after: their server times are about an interval apart.
	var started, ended time.Time
	var beats []time.Time
	for _, ev := range evs {
		switch {
		case ev.GetToolExecutionStarted() != nil:
			started = ev.GetTime().AsTime()
		case ev.GetToolCallResult() != nil:
			ended = ev.GetTime().AsTime()
		case ev.GetHeartbeat() != nil && !started.IsZero() && ended.IsZero():
			beats = append(beats, ev.GetTime().AsTime())
		}
	}
	if want := int(toolTime/interval) / 2; len(beats) < want {
		t.Fatalf("%d heartbeats while the tool ran %s (interval %s), want at least %d; events:\n%s", len(beats), ended.Sub(started), interval, want, servicetest.Render(evs))
	}
	var gaps []time.Duration
	for i := 1; i < len(beats); i++ {
		gaps = append(gaps, beats[i].Sub(beats[i-1]))
	}
	slices.Sort(gaps)
	if median := gaps[len(gaps)/2]; median > 3*interval {
		t.Errorf("heartbeats %s apart (median) while the client lagged, want about %s", median, interval)
	}
	t.Logf("%d heartbeats during a %s tool call, median gap %s, read by a client %s behind", len(beats), ended.Sub(started).Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond), time.Since(ended).Round(time.Millisecond))
}
