package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/postgres"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// cutStore is a replica's store that can be cut off, as a network partition or a
// process paused past its lease would: while cut, every call fails.
type cutStore struct {
	store.Store
	cut atomic.Bool
	// trap, set, cuts the store off at the next checkpoint written to it, which fails:
	// the replica is lost between journaling a step's end and storing its checkpoint.
	trap atomic.Bool
	// ackTrap, set, stores a run's events up to the first input_ack and cuts the store
	// off before it answers: the write is in, the replica never hears so.
	ackTrap atomic.Bool
	// endTrap, set, cuts the store off at the next run's end recorded in it (UpdateRun
	// Finished), which fails: the replica is lost once the run's end is journaled and
	// its messages are on its thread.
	endTrap atomic.Bool
	// appendCut, set, fails AppendEvents alone: the replica's events do not reach the
	// store while the rest (its leases' renewals) does.
	appendCut atomic.Bool
}

var errCut = errors.New("cut off from the database")

func (c *cutStore) Shared() bool { return true }

func (c *cutStore) fail() error {
	if c.cut.Load() {
		return errCut
	}
	return nil
}

func (c *cutStore) AppendEvents(ctx context.Context, b []store.Events) error {
	if err := c.fail(); err != nil {
		return err
	}
	if c.appendCut.Load() {
		return errCut
	}
	if c.ackTrap.Load() {
		for _, e := range b {
			for j, f := range e.Frames {
				resp := &agentdv1.RunResponse{}
				if proto.Unmarshal(f, resp) == nil && resp.GetEvent().GetInputAck() != nil {
					// Committed, and the replica cut off before it heard so.
					e.Frames = e.Frames[:j+1]
					if err := c.Store.AppendEvents(ctx, []store.Events{e}); err != nil {
						return err
					}
					c.cut.Store(true)
					return errCut
				}
			}
		}
	}
	return c.Store.AppendEvents(ctx, b)
}

func (c *cutStore) UpdateRun(ctx context.Context, l store.Lease, u store.Update) error {
	if u.Checkpoint != nil && c.trap.Load() || u.Status == store.Finished && c.endTrap.Load() {
		c.cut.Store(true)
	}
	if err := c.fail(); err != nil {
		return err
	}
	return c.Store.UpdateRun(ctx, l, u)
}

func (c *cutStore) Renew(ctx context.Context, held []store.Lease, lease time.Duration) ([]string, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.Renew(ctx, held, lease)
}

func (c *cutStore) Claim(ctx context.Context, id, holder string, lease time.Duration, force bool) (store.Run, error) {
	if err := c.fail(); err != nil {
		return store.Run{}, err
	}
	return c.Store.Claim(ctx, id, holder, lease, force)
}

func (c *cutStore) Claimable(ctx context.Context, limit int) ([]store.Run, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.Claimable(ctx, limit)
}

func (c *cutStore) GetRun(ctx context.Context, id string) (store.Run, error) {
	if err := c.fail(); err != nil {
		return store.Run{}, err
	}
	return c.Store.GetRun(ctx, id)
}

func (c *cutStore) ReadEvents(ctx context.Context, id string, after int64, limit int) ([][]byte, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.ReadEvents(ctx, id, after, limit)
}

func (c *cutStore) ReadNewEvents(ctx context.Context, after map[string]int64, limit int) (map[string][][]byte, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.ReadNewEvents(ctx, after, limit)
}

func (c *cutStore) Heartbeat(ctx context.Context, r store.Replica, alive time.Duration) ([]store.Replica, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.Heartbeat(ctx, r, alive)
}

func (c *cutStore) ClaimNext(ctx context.Context, holder string, lease time.Duration, limit int, wakeAfter time.Duration) ([]store.Run, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.ClaimNext(ctx, holder, lease, limit, wakeAfter)
}

// fleet is two replicas, a and b, sharing one PostgreSQL schema, each with its own
// store (its own connections), serving the agent of model and tools.
type fleet struct {
	a, b       *servicetest.Server
	cutA, cutB *cutStore
	// countB counts the store calls of b.
	countB *countingStore
	stores []*postgres.Store
}

// fleetLease is the lease of newFleet's replicas.
var fleetLease = time.Second

func newFleet(t *testing.T, model *rt.Model, policy runtime.Policy, tools ...runtime.Tool) *fleet {
	t.Helper()
	return newFleetWith(t, nil, model, policy, tools...)
}

// newFleetWith is newFleet, with both replicas' configs changed by with (unless nil).
// Fleet tests take seconds each: go test -short (the quick command) leaves them to the
// full suite.
func newFleetWith(t *testing.T, with func(*service.Config), model *rt.Model, policy runtime.Policy, tools ...runtime.Tool) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("two replicas on PostgreSQL: skipped with -short, run by go test -race -shuffle=on ./...")
	}
	dsn, schema := pgtest.NewSchema(t)
	r, err := runtime.New(runtime.Config{Name: "worker", Model: model, Tools: tools, Policy: policy, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ags, err := service.NewAgents(&service.Agent{Name: "worker", Runtime: r})
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{}
	open := func() *postgres.Store {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	f.countB = &countingStore{Store: open()}
	f.cutA, f.cutB = &cutStore{Store: open()}, &cutStore{Store: f.countB}
	cfg := func(name string, st store.Store) service.Config {
		c := service.Config{Agents: ags, Logger: quietLog, Config: runs.Config{Store: st, Replica: name, LeaseTTL: fleetLease, ContinuationKey: testKey}}
		if with != nil {
			with(&c)
		}
		return c
	}
	f.a = servicetest.NewServer(t, cfg("a", f.cutA))
	f.b = servicetest.NewServer(t, cfg("b", f.cutB))
	for _, s := range []*servicetest.Server{f.a, f.b} {
		if _, err := s.Service.RecoverRuns(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// startOnA starts the worker on "go" with StartRun on replica a, and returns the run's
// id once it started; the stream stays open until ctx ends.
func (f *fleet) startOnA(ctx context.Context, t *testing.T) string {
	t.Helper()
	stream, err := f.a.Client.StartRun(ctx, &agentdv1.StartRunRequest{Start: servicetest.Input("worker", "go")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetEvent().GetRunId()
}

// readRun reads run id's whole journal from c, after seq after, to run_finished.
func readRun(t *testing.T, c agentdv1.AgentServiceClient, id string, after int64) []*agentdv1.RunEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := c.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: id, AfterSeq: after})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*agentdv1.RunEvent
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("AttachRun ended %v after %d events:\n%s", err, len(evs), servicetest.Render(evs))
		}
		evs = append(evs, resp.GetEvent())
		if resp.GetEvent().GetRunFinished() != nil {
			return evs
		}
	}
}

// checkOneSequence checks that evs number 1..n without a gap or a repeat, and that no
// id has an event after its last.
func checkOneSequence(t *testing.T, evs []*agentdv1.RunEvent) {
	t.Helper()
	numbered := servicetest.Numbered(evs)
	for i, ev := range numbered {
		if ev.GetSeq() != int64(i+1) {
			t.Fatalf("event %d has seq %d:\n%s", i+1, ev.GetSeq(), servicetest.Render(evs))
		}
	}
	servicetest.CheckEvents(t, numbered)
}

// A run started on one replica is attached to, and answered, on the other: the client
// leaves while it waits for an approval, the run parks (nothing of it stays on a), and
// a decision sent to b takes it up there; a stream attached to a from the start reads
// one sequence to the run's end, b's events included.
func TestFleet_InputAndAttachOnAnyReplica(t *testing.T) {
	var ran atomic.Int32
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{"n":1}`), rt.Say("done")}}
	side := rt.Tool("side", func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
		ran.Add(1)
		return runtime.Output{Text: "ok"}, nil
	})
	f := newFleet(t, model, runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}, side)
	spec := servicetest.Input("worker", "go")
	ctx, kill := context.WithCancel(t.Context())
	rc, err := f.a.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
	ev := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
	runID, approval := ev.GetRunId(), ev.GetApprovalRequested()
	kill()
	// A watcher on a, from the start, for the whole run.
	watched := make(chan []*agentdv1.RunEvent, 1)
	go func() { watched <- readRun(t, f.a.Client, runID, 0) }()
	if a := waitState(t, f.b.Client, runID, agentdv1.RunState_RUN_STATE_PARKED); a == nil {
		t.Log(servicetest.Render(readRun(t, f.b.Client, runID, 0)))
	}

	resp, err := f.b.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{
		RunId: runID, ClientKey: "k1",
		Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: approval.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
		}},
	})
	if err != nil {
		t.Fatalf("SendRunInput on b: %v", err)
	}
	if !resp.GetAck().GetAccepted() {
		t.Fatalf("decision refused: %v", resp.GetAck())
	}
	evs := readRun(t, f.b.Client, runID, 0)
	checkOneSequence(t, evs)
	if rf := evs[len(evs)-1].GetRunFinished(); rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("run_finished = %v", rf)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	// The retry of the decision, on a, gets b's answer.
	again, err := f.a.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{
		RunId: runID, ClientKey: "k1",
		Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: approval.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
		}},
	})
	if err != nil || !proto.Equal(again, resp) {
		t.Errorf("retry on a = %v, %v; want b's answer %v", again, err, resp)
	}
	select {
	case w := <-watched:
		if !sameFrames(servicetest.Numbered(w), servicetest.Numbered(evs)) {
			t.Errorf("the stream attached to a read:\n%s\nthe journal holds:\n%s", servicetest.Render(w), servicetest.Render(evs))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream attached to a did not read to the run's end")
	}
}

// sameFrames reports whether two event lists are the same, event for event.
func sameFrames(a, b []*agentdv1.RunEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// A replica cut off from the database while a call of its run executes loses the run:
// it stops it, and the other replica takes it up once the lease ran out. The call had
// started: a tool not declared idempotent is not run again, and the model is told its
// outcome is unknown; an idempotent one runs again, with the same idempotency key. The
// journal reads as one run, and the cut replica, back, adds nothing to it.
func TestFleet_TakeoverWhileACallRuns(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		name := "not idempotent"
		if idempotent {
			name = "idempotent"
		}
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			release := make(chan struct{})
			first := make(chan struct{}, 1)
			tool := runtime.NewTool(runtime.ToolSpec{Name: "side", Description: "a side effect", Idempotent: idempotent},
				func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
					mu.Lock()
					keys = append(keys, runtime.IdempotencyKey(ctx))
					n := len(keys)
					mu.Unlock()
					if n == 1 {
						first <- struct{}{}
						select { // the first run of it hangs until its replica is gone
						case <-release:
						case <-ctx.Done():
							return runtime.Output{}, ctx.Err()
						}
					}
					return runtime.Output{Text: "done once"}, nil
				})
			model := &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{"n":1}`), rt.Say("finished")}}
			f := newFleet(t, model, runtime.Policy{}, tool)
			ctx, kill := context.WithCancel(t.Context())
			defer kill()
			runID := f.startOnA(ctx, t)
			<-first
			cut := time.Now()
			f.cutA.cut.Store(true)
			evs := readRun(t, f.b.Client, runID, 0)
			t.Logf("taken up and finished %v after the cut", time.Since(cut).Round(time.Millisecond))
			close(release)
			f.cutA.cut.Store(false)
			checkOneSequence(t, evs)
			rf := evs[len(evs)-1].GetRunFinished()
			if rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Fatalf("run_finished = %v", rf)
			}
			var results []*agentdv1.ToolCallResult
			for _, ev := range evs {
				if r := ev.GetToolCallResult(); r != nil {
					results = append(results, r)
				}
			}
			mu.Lock()
			got := append([]string(nil), keys...)
			mu.Unlock()
			switch {
			case len(results) != 1:
				t.Fatalf("%d tool_call_results, want 1:\n%s", len(results), servicetest.Render(evs))
			case idempotent && (len(got) != 2 || got[0] != got[1] || got[0] != runID+"/call_0_0"):
				t.Errorf("idempotency keys %q, want the call's key twice", got)
			case idempotent && (results[0].GetIsError() || results[0].GetText() != "done once"):
				t.Errorf("result %v, want the second run's", results[0])
			case !idempotent && len(got) != 1:
				t.Errorf("the tool ran %d times, want once", len(got))
			case !idempotent && (!results[0].GetIsError() || !strings.Contains(results[0].GetText(), "outcome unknown")):
				t.Errorf("result %v, want an outcome-unknown error", results[0])
			}
			// a, back and its call over, wrote nothing more: the journal is as b left it.
			time.Sleep(1500 * time.Millisecond)
			if after := readRun(t, f.b.Client, runID, 0); !sameFrames(servicetest.Numbered(after), servicetest.Numbered(evs)) {
				t.Errorf("the journal changed after the cut replica came back:\n%s", servicetest.Render(after))
			}
		})
	}
}

// A replica lost after journaling its run's first step end, but before storing that
// step's checkpoint, leaves the checkpoint taken as the step's calls started, which
// holds the run's input: the run is taken up from the step's end, on the transcript
// its continuation was sealed over (the input once), and completes.
func TestFleet_LostBetweenStepEndAndItsCheckpoint(t *testing.T) {
	var f *fleet
	tool := runtime.NewTool(runtime.ToolSpec{Name: "side", Description: "a side effect"},
		func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
			f.cutA.trap.Store(true)
			return runtime.Output{Text: "done"}, nil
		})
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{"n":1}`), rt.Say("finished"), rt.Say("finished")}}
	f = newFleet(t, model, runtime.Policy{}, tool)
	evs := readRun(t, f.b.Client, f.startOnA(t.Context(), t), 0)
	checkCompleted(t, evs, "USER ASSISTANT TOOL ASSISTANT")
}

// checkCompleted checks that evs, a run's journal, is one sequence ending COMPLETED
// with "finished", and that the run added messages of roles, in order.
func checkCompleted(t *testing.T, evs []*agentdv1.RunEvent, roles string) {
	t.Helper()
	checkOneSequence(t, evs)
	rf := evs[len(evs)-1].GetRunFinished()
	if rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || rf.GetFinalText() != "finished" {
		t.Fatalf("run_finished = %v\n%s", rf, servicetest.Render(evs))
	}
	var got []string
	for _, m := range rf.GetNewMessages() {
		got = append(got, strings.TrimPrefix(m.GetRole().String(), "ROLE_"))
	}
	if strings.Join(got, " ") != roles {
		t.Errorf("the run's new messages are %v, want %s", got, roles)
	}
}

// A run is taken up in the middle of a step's calls, a step that began with a steer,
// and the replica that took it up is lost in turn after journaling the step's end but
// before storing its checkpoint: the run is taken up again from that end, on the
// transcript the step's checkpoint was sealed over (the steer included), and completes.
func TestFleet_TakenUpTwiceInOneStep(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	first, onA, onB := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	var f *fleet
	tool := runtime.NewTool(runtime.ToolSpec{Name: "side", Description: "a side effect", Idempotent: true},
		func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
			switch runs.Add(1) {
			case 1: // step 1, on a: it waits for the steer
				first <- struct{}{}
				<-release
			case 2: // step 2, on a, until a is gone
				onA <- struct{}{}
				<-ctx.Done()
				return runtime.Output{}, ctx.Err()
			case 3: // step 2 again, on b, which is lost as it stores the step's checkpoint
				f.cutB.trap.Store(true)
				onB <- struct{}{}
			}
			return runtime.Output{Text: "done"}, nil
		})
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{"n":1}`), rt.Call(1, "side", `{"n":2}`), rt.Say("finished"), rt.Say("finished")}}
	f = newFleet(t, model, runtime.Policy{}, tool)
	runID := f.startOnA(t.Context(), t)
	await := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not happen within 30s", what)
		}
	}
	await(first, "the first call")
	ack, err := f.a.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{
		RunId: runID, ClientKey: "steer-1", Input: &agentdv1.SendRunInputRequest_Steer{Steer: &agentdv1.Steer{Text: "and again"}},
	})
	if err != nil || !ack.GetAck().GetAccepted() {
		t.Fatalf("steer: %v, %v", ack, err)
	}
	close(release)
	await(onA, "the second call")
	f.cutA.cut.Store(true)
	await(onB, "b taking the run up")
	f.cutA.cut.Store(false) // a takes it up again once b's lease runs out

	evs := readRun(t, f.a.Client, runID, 0)
	checkCompleted(t, evs, "USER ASSISTANT TOOL USER ASSISTANT TOOL ASSISTANT")
}

// A decision whose ack is in the store, but not what it decided (the replica that took
// it was cut off in between, and never heard that the ack was stored), is acted on by
// the replica that takes the run up: its approval is not asked again, and the client,
// told to send it again, gets the ack the first replica gave, even once the run has
// finished.
func TestFleet_DecisionAckedThenReplicaLost(t *testing.T) {
	var ran atomic.Int32
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{"n":1}`), rt.Say("done")}}
	side := rt.Tool("side", func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
		ran.Add(1)
		return runtime.Output{Text: "ok"}, nil
	})
	f := newFleet(t, model, runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}, side)
	ctx, kill := context.WithCancel(t.Context())
	defer kill()
	rc, err := f.a.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("worker", "go")}})
	ev := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
	runID, approval := ev.GetRunId(), ev.GetApprovalRequested()

	// The Run stream stays open: the run waits on a for the decision, sent to a.
	decision := &agentdv1.SendRunInputRequest{
		RunId: runID, ClientKey: "k1",
		Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: approval.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
		}},
	}
	f.cutA.ackTrap.Store(true)
	if resp, err := f.a.Client.SendRunInput(t.Context(), decision); status.Code(err) != codes.Unavailable {
		t.Fatalf("SendRunInput on a = %v, %v; want UNAVAILABLE: a never heard the ack was stored", resp, err)
	}
	// b takes the run up, acts on the decision and finishes the run; the client's retry
	// comes after, and gets the ack a gave.
	evs := readRun(t, f.b.Client, runID, 0)
	resp, err := f.b.Client.SendRunInput(t.Context(), decision)
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("SendRunInput on b = %v, %v; want it accepted", resp, err)
	}
	checkOneSequence(t, evs)
	if rf := evs[len(evs)-1].GetRunFinished(); rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("run_finished = %v\n%s", rf, servicetest.Render(evs))
	}
	var asked, acks int
	for _, ev := range evs {
		if ev.GetApprovalRequested() != nil {
			asked++
		}
		if a := ev.GetInputAck(); a != nil {
			acks++
			if !proto.Equal(a, resp.GetAck()) || ev.GetSeq() != resp.GetSeq() {
				t.Errorf("b answered %v, want the ack in the journal: %v", resp, ev)
			}
		}
		if r := ev.GetApprovalResolved(); r != nil && r.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
			t.Errorf("approval_resolved %v, want it approved", r)
		}
	}
	if asked != 1 || acks != 1 || ran.Load() != 1 {
		t.Errorf("%d approvals asked, %d acks, the tool ran %d times; want one each:\n%s", asked, acks, ran.Load(), servicetest.Render(evs))
	}
}

// countingStore counts the calls a replica makes to its store, by method.
type countingStore struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *countingStore) count(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[m]++
}

func (c *countingStore) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *countingStore) Shared() bool { return true }
func (c *countingStore) CreateRun(ctx context.Context, r store.Run, lease time.Duration) error {
	c.count("CreateRun")
	return c.Store.CreateRun(ctx, r, lease)
}
func (c *countingStore) UpdateRun(ctx context.Context, l store.Lease, u store.Update) error {
	c.count("UpdateRun")
	return c.Store.UpdateRun(ctx, l, u)
}
func (c *countingStore) AppendEvents(ctx context.Context, b []store.Events) error {
	c.count("AppendEvents")
	return c.Store.AppendEvents(ctx, b)
}
func (c *countingStore) GetRun(ctx context.Context, id string) (store.Run, error) {
	c.count("GetRun")
	return c.Store.GetRun(ctx, id)
}
func (c *countingStore) Renew(ctx context.Context, held []store.Lease, lease time.Duration) ([]string, error) {
	c.count("Renew")
	return c.Store.Renew(ctx, held, lease)
}
func (c *countingStore) ClaimNext(ctx context.Context, holder string, lease time.Duration, limit int, wakeAfter time.Duration) ([]store.Run, error) {
	c.count("ClaimNext")
	return c.Store.ClaimNext(ctx, holder, lease, limit, wakeAfter)
}
func (c *countingStore) PendingInputs(ctx context.Context, ids []string) ([]store.Input, error) {
	c.count("PendingInputs")
	return c.Store.PendingInputs(ctx, ids)
}
func (c *countingStore) EventBounds(ctx context.Context, id string) (int64, int64, error) {
	c.count("EventBounds")
	return c.Store.EventBounds(ctx, id)
}
func (c *countingStore) ReadNewEvents(ctx context.Context, after map[string]int64, limit int) (map[string][][]byte, error) {
	c.count("ReadNewEvents")
	return c.Store.ReadNewEvents(ctx, after, limit)
}
func (c *countingStore) ReadEvents(ctx context.Context, id string, after int64, limit int) ([][]byte, error) {
	c.count("ReadEvents")
	return c.Store.ReadEvents(ctx, id, after, limit)
}

// The store calls of a run's steps on a shared PostgreSQL, one run at a time: what a
// step costs the database (each call is one round trip, AppendEvents of several runs
// two). Logged for the record, and bounded so that a change that adds calls per step
// shows.
func TestFleet_StoreCallsPerStep(t *testing.T) {
	const nRuns = 20
	var steps []rt.Step
	for range nRuns {
		steps = append(steps, rt.Call(0, "echo", `{"n":1}`), rt.Say("done"))
	}
	r, err := runtime.New(runtime.Config{Name: "worker", Model: &rt.Model{Steps: steps}, Tools: []runtime.Tool{rt.Tool("echo", rt.Echo)}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ags, err := service.NewAgents(&service.Agent{Name: "worker", Runtime: r})
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: pgtest.Open(t)}
	srv := servicetest.NewServer(t, service.Config{Agents: ags, Logger: quietLog, Config: runs.Config{Store: cs, ContinuationKey: testKey}})
	before := cs.snapshot()
	for range nRuns {
		resp, err := srv.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("worker", "go")})
		if err != nil || resp.GetResult().GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Fatalf("ExecuteRun = %v, %v", resp, err)
		}
	}
	after := cs.snapshot()
	total, line := 0, ""
	for _, m := range []string{"CreateRun", "UpdateRun", "AppendEvents", "GetRun", "ReadEvents", "EventBounds", "PendingInputs", "Renew", "ClaimNext"} {
		n := after[m] - before[m]
		total += n
		line += fmt.Sprintf(" %s %.2f", m, float64(n)/(2*nRuns))
	}
	perStep := float64(total) / (2 * nRuns)
	t.Logf("store calls per step (a run of 2 steps, 1 tool call, %d runs): %.2f in all:%s", nRuns, perStep, line)
	if perStep > 8 {
		t.Errorf("%.2f store calls per step, want at most 8", perStep)
	}
}

// A replica that shuts down hands its runs over: a run cut off mid-step parks, due at
// once, and the other replica takes it up without waiting for the lease to run out,
// asking the model again for the step that was cut.
func TestFleet_DrainHandsRunsOver(t *testing.T) {
	gate := make(chan struct{})
	model := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("thinking")}, Block: true}, gated(gate, "done")}}
	// A lease far longer than the test: the run cannot wait for it to run out.
	fleetLease = time.Minute
	defer func() { fleetLease = time.Second }()
	f := newFleet(t, model, runtime.Policy{})
	ctx, kill := context.WithCancel(t.Context())
	defer kill()
	rc, err := f.a.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("worker", "go")}})
	runID := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetTextDelta() != nil }).GetRunId()
	close(gate)
	start := time.Now()
	sctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f.a.Service.Shutdown(sctx, 0); err != nil {
		t.Fatal(err)
	}
	evs := readRun(t, f.b.Client, runID, 0)
	took := time.Since(start)
	checkOneSequence(t, evs)
	rf := evs[len(evs)-1].GetRunFinished()
	if rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || rf.GetFinalText() != "done" {
		t.Fatalf("run_finished = %v", rf)
	}
	// Takeover looks every 1–3 s: a handed-over run waits for a look, not its lease.
	t.Logf("handed over and finished on b %v after a shut down", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the run took %v to finish on b", took)
	}
}

// A cancel sent to the replica that does not run the run reaches the one that does,
// through the store: the run ends CANCELLED at once, and the sender gets its ack.
func TestFleet_CancelFromTheOtherReplica(t *testing.T) {
	model := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("thinking")}, Block: true}}}
	f := newFleet(t, model, runtime.Policy{})
	stream, err := f.a.Client.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: servicetest.Input("worker", "go")})
	if err != nil {
		t.Fatal(err)
	}
	var runID string
	for runID == "" {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetEvent().GetTextDelta() != nil {
			runID = resp.GetEvent().GetRunId()
		}
	}
	start := time.Now()
	resp, err := f.b.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{
		RunId: runID, ClientKey: "stop", Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: "enough"}},
	})
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("cancel on b: %v, %v", resp, err)
	}
	evs := readRun(t, f.b.Client, runID, 0)
	took := time.Since(start)
	checkOneSequence(t, evs)
	if rf := evs[len(evs)-1].GetRunFinished(); rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED {
		t.Fatalf("run_finished = %v, want CANCELLED", rf)
	}
	t.Logf("cancelled through the other replica in %v", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the cancel took %v to end the run", took)
	}
}
