package service_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime/llm/workload"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
	"github.com/agentd/agentd/service/store/sqlite"
)

// parkRun starts a run that asks one approval for echo, reads until it asks, and kills
// the client: the run parks. It returns the run's id, its approval's id and the events
// the client read.
func parkRun(t *testing.T, srv *servicetest.Server) (runID, approvalID string, seen []*agentdv1.RunEvent) {
	t.Helper()
	conn, c := srv.Connect(t)
	ctx, kill := context.WithCancel(t.Context())
	rc, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("asker", "echo hi")}})
	ev := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
	kill()
	conn.Close()
	waitState(t, srv.Client, ev.GetRunId(), agentdv1.RunState_RUN_STATE_PARKED)
	return ev.GetRunId(), ev.GetApprovalRequested().GetApprovalId(), s.Events()
}

// waitState waits until attaching to run id says state.
func waitState(t *testing.T, c agentdv1.AgentServiceClient, id string, state agentdv1.RunState) *agentdv1.Attached {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithCancel(t.Context())
		stream, err := c.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: id})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if a := resp.GetEvent().GetAttached(); a.GetState() == state {
			return a
		} else if time.Now().After(deadline) || a.GetState() == agentdv1.RunState_RUN_STATE_FINISHED {
			t.Errorf("run %s is %v, want %v", id, a.GetState(), state)
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func askerServer(t *testing.T, cfg service.Config) *servicetest.Server {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), rt.Say("echoed")}}
	return newTestServer(t, cfg, scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}})
}

// A run whose client went away while it waited for an approval parks: no run is going
// on, attached says PARKED with the approval; a decision sent with SendRunInput wakes it
// as the same run, and its journal reads as one run: seq from 1 without gaps, one
// run_started, its parked step and approval announced once, its new messages and usage
// those of the whole run.
func TestPark_SendRunInputWakesTheRun(t *testing.T) {
	srv := askerServer(t, service.Config{})
	runID, approvalID, seen := parkRun(t, srv)
	if n := srv.Service.ActiveRuns(); n != 0 {
		t.Errorf("ActiveRuns() = %d with the run parked, want 0", n)
	}
	a := waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_PARKED)
	if len(a.GetPendingApprovals()) != 1 || a.GetPendingApprovals()[0].GetApprovalId() != approvalID {
		t.Fatalf("attached %v, want approval %s pending", a, approvalID)
	}
	var asked *agentdv1.ApprovalRequested
	for _, ev := range seen {
		if r := ev.GetApprovalRequested(); r != nil {
			asked = r
		}
	}
	if !proto.Equal(a.GetPendingApprovals()[0], asked) {
		t.Errorf("attached shows the approval as %v, the client was told %v", a.GetPendingApprovals()[0], asked)
	}

	resp, err := srv.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: "ok-1",
		Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: approvalID, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}}})
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("the decision for the parked run: %v, %v", resp, err)
	}
	waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_FINISHED)
	evs, errs := watch(t, srv.Client, runID, 0)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	all := servicetest.Numbered(<-evs)
	servicetest.CheckEvents(t, all)
	count := map[string]int{}
	for _, ev := range all {
		switch {
		case ev.GetStepStarted() != nil:
			count["step "+ev.GetStepStarted().GetStepId()]++
		case ev.GetApprovalRequested() != nil:
			count["asked "+ev.GetApprovalRequested().GetApprovalId()]++
		case ev.GetApprovalResolved() != nil:
			count["resolved "+ev.GetApprovalResolved().GetApprovalId()]++
		}
	}
	for k, n := range count {
		if n != 1 {
			t.Errorf("%s appears %d times in the journal, want once", k, n)
		}
	}
	fin := all[len(all)-1].GetRunFinished()
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() != "echoed" {
		t.Fatalf("the run ended %v", fin)
	}
	// The input, the assistant's call, its result, the answer: the whole run's.
	if n := len(fin.GetNewMessages()); n != 4 || protoText(fin.GetNewMessages()[0]) != "echo hi" {
		t.Errorf("run_finished has %d new messages (%v), want the whole run's 4", n, fin.GetNewMessages())
	}
	if u := fin.GetUsage(); u.GetModelCalls() != 2 || u.GetToolCalls() != 1 {
		t.Errorf("usage %v, want the whole run's: 2 model calls, 1 tool call", u)
	}
	for i, ev := range seen {
		if !proto.Equal(ev, all[i]) {
			t.Fatalf("event %d: the first client saw %v, the journal has %v", i, ev, all[i])
		}
	}
}

// A run parked for the park timeout ends EXPIRED: its approval expires, its call is
// cancelled, and run_finished carries the run's messages and a continuation.
func TestPark_Expires(t *testing.T) {
	srv := askerServer(t, service.Config{Config: runs.Config{ParkTimeout: 100 * time.Millisecond}})
	runID, approvalID, _ := parkRun(t, srv)
	waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_FINISHED)
	evs, errs := watch(t, srv.Client, runID, 0)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	all := servicetest.Numbered(<-evs)
	servicetest.CheckEvents(t, all)
	n := len(all)
	res, cancelled, fin := all[n-3].GetApprovalResolved(), all[n-2].GetToolCallsCancelled(), all[n-1].GetRunFinished()
	if res.GetApprovalId() != approvalID || res.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED || res.GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_TIMEOUT {
		t.Errorf("approval_resolved %v, want %s expired by timeout", res, approvalID)
	}
	if len(cancelled.GetToolCallIds()) != 1 {
		t.Errorf("tool_calls_cancelled %v, want the echo call", cancelled)
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_EXPIRED || fin.GetError().GetReason() != "PARK_EXPIRED" || len(fin.GetContinuation()) == 0 || len(fin.GetNewMessages()) != 1 {
		t.Errorf("run_finished %v, want EXPIRED (PARK_EXPIRED) with the input and a continuation", fin)
	}
	if _, err := srv.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: "late",
		Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{}}}); err == nil {
		t.Error("input for the expired run was taken")
	}
}

// A cancel sent to a parked run ends it CANCELLED.
func TestPark_CancelEndsTheParkedRun(t *testing.T) {
	srv := askerServer(t, service.Config{})
	runID, _, _ := parkRun(t, srv)
	resp, err := srv.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: "stop",
		Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: "not needed"}}})
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("cancel: %v, %v", resp, err)
	}
	waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_FINISHED)
	evs, errs := watch(t, srv.Client, runID, 0)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	all := servicetest.Numbered(<-evs)
	servicetest.CheckEvents(t, all)
	if fin := all[len(all)-1].GetRunFinished(); fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED {
		t.Errorf("run_finished %v, want CANCELLED", fin)
	}
}

// A run waits for an answer from the stream attached to it for ParkAfter, then parks
// all the same, the stream still open: the decision sent on it wakes the run, and the
// stream reads one run from start to end.
func TestPark_WithItsStreamOpen(t *testing.T) {
	srv := askerServer(t, service.Config{Config: runs.Config{ParkAfter: 20 * time.Millisecond}})
	s := servicetest.Open(t, srv.Client, servicetest.Input("asker", "echo hi"))
	asked := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
	waitState(t, srv.Client, asked.GetRunId(), agentdv1.RunState_RUN_STATE_PARKED)
	if n, p := srv.Service.ActiveRuns(), srv.Service.ParkedRuns(); n != 0 || p != 1 {
		t.Fatalf("%d runs going on, %d parked; want the run parked", n, p)
	}
	seq := s.Send(servicetest.Approve(asked.GetApprovalRequested().GetApprovalId()))
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetUsage().GetToolCalls() != 1 {
		t.Fatalf("the run ended %v, %v", fin, err)
	}
	if a := ack(s.Events(), seq); !a.GetAccepted() {
		t.Errorf("the decision's ack: %v", a)
	}
}

// An approval of a parked run expires when it would have had the run waited live: the
// run wakes, the call is not run, and the model goes on.
func TestPark_ApprovalExpiresWhileParked(t *testing.T) {
	srv := askerServer(t, service.Config{Config: runs.Config{ParkAfter: 10 * time.Millisecond}})
	spec := servicetest.Input("asker", "echo hi")
	spec.Config = &agentdv1.RunConfig{ApprovalTimeout: durationpb.New(300 * time.Millisecond)}
	s := servicetest.Open(t, srv.Client, spec)
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("the run ended %v, %v", fin, err)
	}
	var res *agentdv1.ApprovalResolved
	for _, ev := range s.Events() {
		if r := ev.GetApprovalResolved(); r != nil {
			res = r
		}
	}
	if res.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED || res.GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_TIMEOUT {
		t.Errorf("approval_resolved %v, want expired by timeout", res)
	}
	if fin.GetUsage().GetToolCalls() != 0 {
		t.Errorf("usage %v: the expired call ran", fin.GetUsage())
	}
}

// A parked run woken by a Run stream that attaches takes that stream's steers: the woken
// stretch has an inbox of its own, which the stretch that parked cannot close.
func TestPark_WokenRunTakesSteers(t *testing.T) {
	gate := make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), gated(gate, "done")}}
	srv := newTestServer(t, service.Config{}, scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}})
	runID, approvalID, _ := parkRun(t, srv)
	s := servicetest.Attach(t, srv.Client, runID, 0)
	s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetAttached() != nil })
	seq := s.Send(servicetest.Approve(approvalID))
	if a := s.Until(isAck(seq)).GetInputAck(); !a.GetAccepted() {
		t.Fatalf("the decision: %v", a)
	}
	s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetToolCallResult() != nil })
	seq = s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "and then this"}}})
	if a := s.Until(isAck(seq)).GetInputAck(); !a.GetAccepted() {
		t.Fatalf("a steer to the woken run: %v, want accepted", a)
	}
	close(gate)
	s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunFinished() != nil })
}

// A parked run that cannot be woken (the server runs its limit of runs) refuses the
// input in its ack, WAKE_FAILED, and stays parked: the same input sent again once there
// is room wakes it.
func TestPark_WakeRefusedWhileTheServerIsFull(t *testing.T) {
	gate := make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), rt.Say("echoed")}}
	busy := &rt.Model{Steps: []rt.Step{gated(gate, "at last")}}
	srv := newTestServer(t, service.Config{Config: runs.Config{MaxConcurrentRuns: 1}},
		scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}},
		scripted{name: "busy", model: busy})
	runID, approvalID, _ := parkRun(t, srv)
	other := servicetest.Open(t, srv.Client, servicetest.Input("busy", "take the only place"))
	other.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil })
	decide := func(key string) *agentdv1.InputAck {
		resp, err := srv.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: key,
			Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: approvalID, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetAck()
	}
	if a := decide("try-1"); a.GetAccepted() || a.GetError().GetReason() != "WAKE_FAILED" {
		t.Fatalf("the decision with the server full: %v, want refused WAKE_FAILED", a)
	}
	waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_PARKED)
	close(gate)
	if _, err := other.Finish(); err != nil {
		t.Fatal(err)
	}
	if a := decide("try-2"); !a.GetAccepted() {
		t.Fatalf("the decision once there is room: %v", a)
	}
	waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_FINISHED)
}

// TestParkAfter_AnswersThatRaceTheirPark: with a ParkAfter short enough that every wait
// for an approval parks (a stream attached or not), a client that answers each approval
// on its stream still takes its run through all of them. Each answer races its run's
// park: it waits the park out, wakes the run, and reaches it even when the woken run
// parks again first (readyLocked wakes it again). Many runs at once make the race
// likely: before that, 500 failed on every try on a 2-core machine. That a renewal
// overlapping a park does not read the park's release as the lease lost is
// TestLeaseLost's (service/runs).
func TestParkAfter_AnswersThatRaceTheirPark(t *testing.T) {
	size, err := workload.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			svc := newWorkloadService(t, size, &agents.PolicyConfig{Approval: "ask"}, func(c *service.Config) {
				// Renewals (every LeaseTTL/3) overlap many parks.
				c.ParkAfter, c.LeaseTTL = time.Millisecond, 900*time.Millisecond
				if name == "sqlite" {
					// One writer at a time: under -race, beside the other packages' tests on
					// two cores, SQLite once took longer than 900ms to answer a renewal, and
					// the run was let go as it should be. A longer lease keeps the test on
					// the race it is about; renewals still overlap many parks.
					c.LeaseTTL = 3 * time.Second
					st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { st.Close() })
					c.Store = st
				}
			})
			t.Cleanup(func() {
				if err := svc.Shutdown(context.Background(), 10*time.Second); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			})
			client := dialLoopback(t, serveLoopback(t, svc.Register))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var wg sync.WaitGroup
			n := 500
			if name == "sqlite" {
				n = 50 // one writer at a time: more would not answer within a lease under -race
			}
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					_, err := parkWorkloadRun(ctx, client, size)
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
