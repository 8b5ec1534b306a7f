package service_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// askEveryRun serves "asker" on a model that asks for echo whatever the run, and
// answers once the call's result is in: any number of runs, in any order, each ask and
// park. Callers are named by the x-caller header; runs are anyone's, so that waitState
// sees them all.
func askEveryRun(t *testing.T, cfg service.Config) *servicetest.Server {
	t.Helper()
	call, say := rt.Call(0, "echo", `{"step":0,"text":"hi"}`), rt.Say("echoed")
	step := rt.Step{Func: func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		evs := call.Events
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == runtime.RoleTool {
			evs = say.Events
		}
		return func(yield func(runtime.ModelEvent, error) bool) {
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}}
	m := &rt.Model{}
	for range 32 {
		m.Steps = append(m.Steps, step)
	}
	cfg.ParkAfter = 20 * time.Millisecond
	cfg.Caller = func(ctx context.Context) string {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-caller"); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	cfg.Identity = func(context.Context) string { return "" }
	return newTestServer(t, cfg, scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}})
}

// askAs starts a run of caller ("" for an anonymous one) that asks an approval, and
// returns its stream, open, once the approval is asked.
func askAs(t *testing.T, c agentdv1.AgentServiceClient, caller string) (s *servicetest.Stream, runID, approvalID string) {
	t.Helper()
	ctx := t.Context()
	if caller != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-caller", caller)
	}
	rc, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s = servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("asker", "echo hi")}})
	ev := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
	return s, ev.GetRunId(), ev.GetApprovalRequested().GetApprovalId()
}

// notParked checks that a run which would have parked ended AWAITING_INPUT instead, on
// the stream still open, with a continuation to resume it from, and returns its
// run_finished.
func notParked(t *testing.T, srv *servicetest.Server, s *servicetest.Stream, runID string) *agentdv1.RunFinished {
	t.Helper()
	if waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_FINISHED) == nil {
		t.FailNow() // parked: its stream would wait for ever
	}
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(fin.GetContinuation()) == 0 || len(fin.GetPendingApprovals()) != 1 {
		t.Fatalf("the run past the cap ended %v, %v; want AWAITING_INPUT with its approval and a continuation", fin, err)
	}
	return fin
}

// One caller parks as many runs as MaxParkedRunsPerCaller allows; its next run that
// would park ends AWAITING_INPUT with its continuation instead, which resumes it, while
// another caller still parks. A parked run that wakes frees its place.
func TestPark_RunsPerCallerCap(t *testing.T) {
	srv := askEveryRun(t, service.Config{Config: runs.Config{MaxParkedRunsPerCaller: 2}})
	var first *servicetest.Stream
	var firstApproval string
	for i := range 2 {
		s, id, approval := askAs(t, srv.Client, "alice")
		waitState(t, srv.Client, id, agentdv1.RunState_RUN_STATE_PARKED)
		if i == 0 {
			first, firstApproval = s, approval
		}
	}
	s, id, approval := askAs(t, srv.Client, "alice")
	fin := notParked(t, srv, s, id)
	if n := srv.Service.ParkedRuns(); n != 2 {
		t.Errorf("%d runs parked, want alice's 2", n)
	}

	_, bobs, _ := askAs(t, srv.Client, "bob")
	waitState(t, srv.Client, bobs, agentdv1.RunState_RUN_STATE_PARKED)

	resp, err := srv.Client.ExecuteRun(metadata.AppendToOutgoingContext(t.Context(), "x-caller", "alice"), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{
		Agent: "asker", Messages: fin.GetNewMessages(), Continuation: fin.GetContinuation(),
		Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: approval, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResult(); r.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || r.GetFinalText() != "echoed" || r.GetUsage().GetToolCalls() != 1 {
		t.Errorf("the resumed run ended %v", r)
	}

	first.Send(servicetest.Approve(firstApproval))
	if fin, err := first.Finish(); err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("alice's first run, woken: %v, %v", fin, err)
	}
	_, again, _ := askAs(t, srv.Client, "alice")
	waitState(t, srv.Client, again, agentdv1.RunState_RUN_STATE_PARKED)
}

// The caps on all parked runs, in number and in bytes of their checkpoints, hold for
// anonymous callers too, whom no per-caller cap bounds.
func TestPark_TotalCaps(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   service.Config
		parks int
	}{
		{"runs", service.Config{Config: runs.Config{MaxParkedRuns: 1}}, 1},
		{"bytes", service.Config{Config: runs.Config{MaxParkedBytes: 1}}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := askEveryRun(t, tt.cfg)
			for range tt.parks {
				_, id, _ := askAs(t, srv.Client, "")
				waitState(t, srv.Client, id, agentdv1.RunState_RUN_STATE_PARKED)
			}
			s, id, _ := askAs(t, srv.Client, "")
			notParked(t, srv, s, id)
			if n := srv.Service.ParkedRuns(); n != tt.parks {
				t.Errorf("%d runs parked, want %d", n, tt.parks)
			}
		})
	}
}

// A parked run that expires frees its place under the caps.
func TestPark_ExpiredRunFreesItsPlace(t *testing.T) {
	srv := askEveryRun(t, service.Config{Config: runs.Config{MaxParkedRuns: 1, ParkTimeout: 100 * time.Millisecond}})
	_, id, _ := askAs(t, srv.Client, "")
	waitState(t, srv.Client, id, agentdv1.RunState_RUN_STATE_PARKED)
	waitState(t, srv.Client, id, agentdv1.RunState_RUN_STATE_FINISHED)
	_, next, _ := askAs(t, srv.Client, "")
	waitState(t, srv.Client, next, agentdv1.RunState_RUN_STATE_PARKED)
}
