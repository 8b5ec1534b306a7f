package service_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

// sideEffectModel answers from the request alone, so that a replica taking a run up
// gets the answers the first one would have: it calls side until a tool result is in
// the transcript, then says done. Its first call waits for gate.
func sideEffectModel(gate <-chan struct{}) *rt.Model {
	var first atomic.Bool
	step := rt.Step{Func: func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			if first.CompareAndSwap(false, true) {
				select {
				case <-gate:
				case <-ctx.Done():
					yield(runtime.ModelEvent{}, ctx.Err())
					return
				}
			}
			answer := rt.Call(0, "side", `{"n":1}`)
			for _, m := range req.Messages {
				if m.Role == runtime.RoleTool {
					answer = rt.Say("done", " after", " the", " side", " effect")
				}
			}
			for _, ev := range answer.Events {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}}
	return &rt.Model{Steps: []rt.Step{step, step, step, step, step, step}}
}

// runOnA opens a Run stream on replica a and starts the worker on "go" on it.
func (f *fleet) runOnA(t *testing.T) *servicetest.Stream {
	t.Helper()
	rc, err := f.a.Client.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("worker", "go")}})
	return s
}

// checkDone checks that evs number 1..n without a gap or a repeat and end with the run
// completed.
func checkDone(t *testing.T, evs []*agentdv1.RunEvent) {
	t.Helper()
	checkOneSequence(t, evs)
	checkEnded(t, evs)
}

// checkEnded checks that evs end with the run completed.
func checkEnded(t *testing.T, evs []*agentdv1.RunEvent) {
	t.Helper()
	if rf := evs[len(evs)-1].GetRunFinished(); rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("run_finished = %v\n%s", rf, servicetest.Render(evs))
	}
}

// countedTool is the side tool, counting its runs.
func countedTool(ran *atomic.Int32) runtime.Tool {
	return rt.Tool("side", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		ran.Add(1)
		return runtime.Output{Text: "ok"}, nil
	})
}

// A store that stops answering for less than a lease delays the run's events and loses
// none: the replica tries its writes again, the tool waits until its start is stored,
// the client's stream gets heartbeats meanwhile, then every event, and the run
// completes where it began.
func TestFleet_StoreHiccupDoesNotStrandTheClient(t *testing.T) {
	var ran atomic.Int32
	gate := make(chan struct{})
	beat := 50 * time.Millisecond
	f := newFleetWith(t, func(c *service.Config) { c.HeartbeatInterval = beat },
		sideEffectModel(gate), runtime.Policy{}, countedTool(&ran))
	s := f.runOnA(t)
	s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetStepStarted() != nil })
	f.cutA.cut.Store(true)
	close(gate)
	hiccup := fleetLease / 4
	restored := time.AfterFunc(hiccup, func() { f.cutA.cut.Store(false) })
	defer restored.Stop()
	began := time.Now()
	var beats int
	for {
		ev := s.Next()
		if ev == nil {
			break
		}
		if ev.GetHeartbeat() != nil && time.Since(began) < hiccup {
			beats++
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("the stream ended %v after:\n%s", err, servicetest.Render(s.Events()))
	}
	evs := s.Events()
	checkDone(t, evs)
	if ran.Load() != 1 {
		t.Errorf("the tool ran %d times, want once", ran.Load())
	}
	if beats == 0 {
		t.Errorf("no heartbeat in the %s the store did not answer", hiccup)
	}
	if stored := readRun(t, f.b.Client, evs[0].GetRunId(), 0); !sameFrames(servicetest.Numbered(stored), servicetest.Numbered(evs)) {
		t.Errorf("the journal differs from what the client read:\n%s", servicetest.Render(stored))
	}
}

// A store that does not answer for longer than a lease: the replica lets the run go
// and ends its streams UNAVAILABLE (STORE_UNAVAILABLE) naming the last seq each sent,
// within a lease or two, rather than leave them waiting; the tool, whose start it never
// stored, does not run there. Another replica takes the run up once its lease runs
// out; the client attaches there after that seq, reads one sequence to the run's end,
// and the tool has run once.
func TestFleet_StoreOutageEndsTheStreamsNamingTheLastSeq(t *testing.T) {
	var ran atomic.Int32
	gate := make(chan struct{})
	f := newFleetWith(t, func(c *service.Config) { c.HeartbeatInterval = 100 * time.Millisecond },
		sideEffectModel(gate), runtime.Policy{}, countedTool(&ran))
	s := f.runOnA(t)
	runID := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetStepStarted() != nil }).GetRunId()
	attached, attachEnd := watch(t, f.a.Client, runID, 0)

	f.cutA.cut.Store(true)
	defer f.cutA.cut.Store(false)
	cut := time.Now()
	close(gate)
	for s.Next() != nil {
	}
	ended := time.Since(cut)
	var last int64
	for _, ev := range servicetest.Numbered(s.Events()) {
		last = ev.GetSeq()
	}
	checkStoreLost(t, "the Run stream", s.Err(), last)
	t.Logf("the Run stream ended %s after the store stopped answering", ended.Round(time.Millisecond))
	if ended > 4*fleetLease {
		t.Errorf("the Run stream ended %s after the cut, want within a lease or two (%s)", ended, fleetLease)
	}
	var attachLast int64
	for _, ev := range servicetest.Numbered(<-attached) {
		attachLast = ev.GetSeq()
	}
	checkStoreLost(t, "the AttachRun stream", <-attachEnd, attachLast)
	if ran.Load() != 0 {
		t.Fatalf("the tool ran %d times on the replica that could not store its start", ran.Load())
	}

	rest := readRun(t, f.b.Client, runID, last)
	evs := append(servicetest.Numbered(s.Events()), servicetest.Numbered(rest)...)
	checkDone(t, evs)
	if ran.Load() != 1 {
		t.Errorf("the tool ran %d times, want once", ran.Load())
	}
}

// checkStoreLost checks that a stream ended UNAVAILABLE (STORE_UNAVAILABLE) naming
// last, the last seq it got, as the one to attach again after.
func checkStoreLost(t *testing.T, what string, err error, last int64) {
	t.Helper()
	code, reason, _ := errorInfo(err)
	if code != codes.Unavailable || reason != "STORE_UNAVAILABLE" {
		t.Fatalf("%s ended %v, want UNAVAILABLE (STORE_UNAVAILABLE)", what, err)
	}
	if got := metaOf(err)["last_seq_sent"]; got != strconv.FormatInt(last, 10) {
		t.Errorf("%s: last_seq_sent %q, want %d, the last seq it got (%v)", what, got, last, status.Convert(err).Message())
	}
}

// Streams following runs from a replica that does not run them cost that replica's
// store little per event: with several runs streaming on a and two streams on b
// attached to each, b's store calls are counted against the events its streams got.
// Logged for the record, and bounded so that a change that adds calls per event shows.
func TestFleet_FollowingCostsPerEvent(t *testing.T) {
	const runs, followers, deltas = 4, 2, 60
	gate := make(chan struct{})
	step := rt.Step{Func: func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			<-gate // until the streams are attached
			for i := range deltas {
				select {
				case <-ctx.Done():
					yield(runtime.ModelEvent{}, ctx.Err())
					return
				case <-time.After(5 * time.Millisecond):
				}
				if !yield(rt.Text(fmt.Sprintf("word%d ", i)), nil) {
					return
				}
			}
			yield(rt.Finish(runtime.FinishStop), nil)
		}
	}}
	steps := make([]rt.Step, runs)
	for i := range steps {
		steps[i] = step
	}
	f := newFleet(t, &rt.Model{Steps: steps}, runtime.Policy{})
	var ids []string
	for range runs {
		rc, err := f.a.Client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: servicetest.Input("worker", "go")})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rc.Recv()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetEvent().GetRunId())
	}
	before := f.countB.snapshot()
	var wg sync.WaitGroup
	var events atomic.Int64
	for _, id := range ids {
		for range followers {
			evs, _ := watch(t, f.b.Client, id, 0)
			wg.Go(func() { events.Add(int64(len(servicetest.Numbered(<-evs)))) })
		}
	}
	close(gate)
	wg.Wait()
	after := f.countB.snapshot()
	calls := 0
	for m, n := range after {
		calls += n - before[m]
	}
	perEvent := float64(calls) / float64(events.Load())
	t.Logf("b's store calls for %d runs followed by %d streams each (%d events read in all): %d, %.3f per event read: %v", runs, followers, events.Load(), calls, perEvent, diffCounts(before, after))
	if perEvent > 1 {
		t.Errorf("%.3f store calls per event a stream following a run read, want at most 1", perEvent)
	}
}

// diffCounts is after less before, by method.
func diffCounts(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for m, n := range after {
		if d := n - before[m]; d != 0 {
			out[m] = d
		}
	}
	return out
}

// A stream following a run from a replica whose store stops answering ends, past a
// lease, UNAVAILABLE (STORE_UNAVAILABLE) naming the last seq it sent, rather than wait
// in silence: attached again to the replica running the run, it reads on to the end.
func TestFleet_FollowerOfACutReplicaEnds(t *testing.T) {
	gate := make(chan struct{})
	model := &rt.Model{Steps: []rt.Step{gated(gate, "done")}}
	f := newFleetWith(t, func(c *service.Config) { c.HeartbeatInterval = 100 * time.Millisecond }, model, runtime.Policy{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runID := f.startOnA(ctx, t)
	stream, err := f.b.Client.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	var got []*agentdv1.RunEvent
	for len(servicetest.Numbered(got)) == 0 { // attached, and following the run
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.GetEvent())
	}
	f.cutB.cut.Store(true)
	defer f.cutB.cut.Store(false)
	cut := time.Now()
	var endErr error
	for endErr == nil {
		var resp *agentdv1.AttachRunResponse
		if resp, endErr = stream.Recv(); endErr == nil {
			got = append(got, resp.GetEvent())
		}
	}
	ended := time.Since(cut)
	var last int64
	for _, ev := range servicetest.Numbered(got) {
		last = ev.GetSeq()
	}
	checkStoreLost(t, "the AttachRun stream on b", endErr, last)
	t.Logf("the stream on b ended %s after b's store stopped answering", ended.Round(time.Millisecond))
	close(gate)
	rest := readRun(t, f.a.Client, runID, last)
	all := append(servicetest.Numbered(got), servicetest.Numbered(rest)...)
	checkDone(t, all)
}

// A replica lost after a run on a thread has journaled its end and added its messages
// to the thread, but before recording the end: the replica that takes the run up ends
// it, and the thread holds the run's messages once.
func TestFleet_ThreadMessagesOnceWhenLostBeforeTheEnd(t *testing.T) {
	f := newFleet(t, &rt.Model{Steps: []rt.Step{rt.Say("the answer")}}, runtime.Policy{})
	f.cutA.endTrap.Store(true)
	defer f.cutA.cut.Store(false)
	stream, err := f.a.Client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{
		Agent: "worker", Input: "a question", History: agentdv1.History_HISTORY_THREAD,
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	thread := resp.GetEvent().GetRunStarted().GetThreadId()
	var th *agentdv1.GetThreadResponse
	deadline := time.Now().Add(20 * time.Second)
	for {
		th, err = f.b.Client.GetThread(t.Context(), &agentdv1.GetThreadRequest{ThreadId: thread})
		if err == nil && th.GetThread().GetActiveRunId() == "" && th.GetThread().GetMessageCount() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the thread's run did not end within 20 s: %v, %v", th, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var texts []string
	for _, m := range th.GetMessages() {
		texts = append(texts, protoText(m))
	}
	if want := []string{"a question", "the answer"}; !slices.Equal(texts, want) {
		t.Errorf("the thread's messages: %q, want %q", texts, want)
	}
}

// userTexts are the texts of a model request's user messages.
func userTexts(req *runtime.ModelRequest) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == runtime.RoleUser {
			out = append(out, m.Text())
		}
	}
	return out
}

// A decision sent on a Run stream, acked by a replica that is lost before it acts on
// it: the replica that takes the run up acts on it, as it does a SendRunInput's. The
// approval is asked once, the tool runs once.
func TestFleet_StreamDecisionAckedThenReplicaLost(t *testing.T) {
	var ran atomic.Int32
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{"n":1}`), rt.Say("done")}}
	f := newFleet(t, model, runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}, countedTool(&ran))
	s := f.runOnA(t)
	ev := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
	runID, approval := ev.GetRunId(), ev.GetApprovalRequested()
	f.cutA.ackTrap.Store(true)
	defer f.cutA.cut.Store(false)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		ApprovalId: approval.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
	}}})
	evs := readRun(t, f.b.Client, runID, 0)
	checkDone(t, evs)
	var asked, acks int
	for _, ev := range evs {
		if ev.GetApprovalRequested() != nil {
			asked++
		}
		if ev.GetInputAck() != nil {
			acks++
		}
		if r := ev.GetApprovalResolved(); r != nil && r.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
			t.Errorf("approval_resolved %v, want it approved", r)
		}
	}
	if asked != 1 || acks != 1 || ran.Load() != 1 {
		t.Errorf("%d approvals asked, %d acks, the tool ran %d times; want one each:\n%s", asked, acks, ran.Load(), servicetest.Render(evs))
	}
}

// A steer acked by a replica that is lost before the run applies it, on a Run stream or
// by SendRunInput: the replica that takes the run up (here from its start: no step
// ended) applies it, once.
func TestFleet_SteerAckedThenReplicaLost(t *testing.T) {
	for _, how := range []string{"Run stream", "SendRunInput"} {
		t.Run(how, func(t *testing.T) {
			// The first model call, on a, streams until its replica is gone; on b, the
			// steer enters the transcript before the step done again, or after it,
			// starting the next: once either way.
			hang := rt.Step{Events: []runtime.ModelEvent{rt.Text("thinking")}, Block: true}
			model := &rt.Model{Steps: []rt.Step{hang, rt.Say("done"), rt.Say("done, minding it")}}
			f := newFleet(t, model, runtime.Policy{})
			s := f.runOnA(t)
			runID := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetTextDelta() != nil }).GetRunId()
			f.cutA.ackTrap.Store(true)
			defer f.cutA.cut.Store(false)
			steer := &agentdv1.Steer{Text: "and mind the steer"}
			if how == "Run stream" {
				s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: steer}})
			} else {
				req := &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: "steer-1", Input: &agentdv1.SendRunInputRequest_Steer{Steer: steer}}
				if _, err := f.a.Client.SendRunInput(t.Context(), req); status.Code(err) != codes.Unavailable {
					t.Fatalf("SendRunInput on a: %v, want UNAVAILABLE: a never heard the ack was stored", err)
				}
			}
			evs := readRun(t, f.b.Client, runID, 0)
			checkEnded(t, evs)
			reqs := model.Requests()
			if got, want := userTexts(reqs[len(reqs)-1]), []string{"go", "and mind the steer"}; !slices.Equal(got, want) {
				t.Errorf("the model's last request had the user messages %q, want %q", got, want)
			}
		})
	}
}

// A steer that came while a step's calls ran waits for the next step; the replica is
// lost between journaling that step's end and storing its checkpoint. The replica that
// takes the run up goes on from the step's end, where the journal's checkpoint carries
// the steer, and applies it.
func TestFleet_SteerWaitingAtACheckpointIsApplied(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{})
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "slow", `{}`), rt.Say("done")}}
	f := newFleet(t, model, runtime.Policy{}, gatedTool(gate, started))
	s := f.runOnA(t)
	runID := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
	<-started
	seq := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "and mind the steer"}}})
	s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetInputAck().GetClientSeq() == seq })
	f.cutA.trap.Store(true) // lost as the step's checkpoint is stored
	defer f.cutA.cut.Store(false)
	close(gate)
	evs := readRun(t, f.b.Client, runID, 0)
	checkDone(t, evs)
	reqs := model.Requests()
	if got := userTexts(reqs[len(reqs)-1]); !slices.Equal(got, []string{"go", "and mind the steer"}) {
		t.Errorf("the model's last request had the user messages %q, want the input and the steer", got)
	}
}

// A run that ends while its store does not take its events (its leases' renewals
// still do): its end is journaled and never stored. Its replica holds the run all the
// same, rather than leave its lease to run out while streams wait on it, then, past a
// lease, lets it go and ends its streams naming the last seq they got; the replica
// that takes the run up ends it, and the client reads its end there.
func TestFleet_RunEndingWhileItsEventsAreNotStored(t *testing.T) {
	gate := make(chan struct{})
	// a may take the run up again once, before it knows its writes fail: each taker
	// asks the model again.
	model := &rt.Model{Steps: []rt.Step{gated(gate, "done"), rt.Say("done"), rt.Say("done"), rt.Say("done")}}
	f := newFleet(t, model, runtime.Policy{})
	s := f.runOnA(t)
	runID := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetStepStarted() != nil }).GetRunId()
	f.cutA.appendCut.Store(true)
	defer f.cutA.appendCut.Store(false)
	close(gate)
	for s.Next() != nil {
	}
	var last int64
	for _, ev := range servicetest.Numbered(s.Events()) {
		last = ev.GetSeq()
	}
	checkStoreLost(t, "the Run stream", s.Err(), last)
	rest := readRun(t, f.b.Client, runID, last)
	evs := append(servicetest.Numbered(s.Events()), servicetest.Numbered(rest)...)
	checkDone(t, evs)
}

// A stream attached, on another replica, to a run whose end is journaled but not yet
// recorded (its replica lost as it was about to record it) reads to run_finished and
// ends, as for any run that ended.
func TestFleet_AttachToARunWhoseEndIsNotRecorded(t *testing.T) {
	f := newFleet(t, &rt.Model{Steps: []rt.Step{rt.Say("done"), rt.Say("done")}}, runtime.Policy{})
	f.cutA.endTrap.Store(true)
	defer f.cutA.cut.Store(false)
	stream, err := f.a.Client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: servicetest.Input("worker", "go")})
	if err != nil {
		t.Fatal(err)
	}
	var runID string
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("StartRun on a ended %v before run_finished", err)
		}
		runID = resp.GetEvent().GetRunId()
		if resp.GetEvent().GetRunFinished() != nil {
			break // stored: a's stream sends only what the store has
		}
	}
	evs, end := watch(t, f.b.Client, runID, 0)
	select {
	case got := <-evs:
		if err := <-end; err != nil {
			t.Fatalf("the AttachRun stream on b ended %v", err)
		}
		checkDone(t, servicetest.Numbered(got))
	case <-time.After(20 * time.Second):
		t.Fatal("the AttachRun stream on b did not end within 20 s of the run's end")
	}
}
