package service_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

// grantServer serves agent "granter" on model, with tools side (asks; grants bound to
// the arguments), look (asks; grants for any arguments) and hard (asks always: no
// grant), recording the arguments each ran with.
func grantServer(t *testing.T, model *rt.Model) (*servicetest.Server, func() []string) {
	var mu sync.Mutex
	var ran []string
	tool := func(name string) runtime.Tool {
		return rt.Tool(name, func(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
			mu.Lock()
			ran = append(ran, name+call.Arguments)
			mu.Unlock()
			return runtime.Output{Text: "ok"}, nil
		})
	}
	pol := runtime.Policy{
		Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk},
		Tools: map[string]runtime.ToolPolicy{
			"look": {Approval: runtime.ApprovalAsk, GrantAnyArguments: true},
			"hard": {Approval: runtime.ApprovalAlways},
		},
	}
	srv := newTestServer(t, service.Config{}, scripted{name: "granter", model: model, goTools: []runtime.Tool{tool("side"), tool("look"), tool("hard")}, goPolicy: pol})
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ran)
	}
}

func decide(id string, scope agentdv1.ApprovalScope) *agentdv1.RunRequest {
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		ApprovalId: id, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, Scope: scope,
	}}}
}

func isAsked(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }

// askedFor matches the approval_requested of call id.
func askedFor(id string) func(*agentdv1.RunEvent) bool {
	return func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested().GetToolCallId() == id }
}

// resolutions returns the approval_resolved events of evs.
func resolutions(evs []*agentdv1.RunEvent) []*agentdv1.ApprovalResolved {
	var out []*agentdv1.ApprovalResolved
	for _, ev := range evs {
		if r := ev.GetApprovalResolved(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// A RUN grant approves the run's later calls of its tool with the same arguments, and
// no other; a tool granted for any arguments is approved whatever they are; a tool that
// always asks offers no scope but ONCE, and a wider decision is refused.
func TestGrants_RunScope(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "side", `{"n":1}`, "look", `{"q":"a"}`),
		rt.Call(1, "side", `{"n":1}`, "look", `{"q":"b"}`), // both approved by grants
		rt.Call(2, "side", `{"n":2}`),                      // other arguments: asked
		rt.Call(3, "hard", `{}`),
		rt.Say("done"),
	}}
	srv, ran := grantServer(t, m)
	s := servicetest.Open(t, srv.Client, servicetest.Input("granter", "go"))
	for range 2 {
		ev := s.Until(isAsked)
		a := ev.GetApprovalRequested()
		if want := []agentdv1.ApprovalScope{agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE, agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN}; !slices.Equal(a.GetAllowedScopes(), want) {
			t.Errorf("allowed_scopes of %s = %v, want %v (no thread kept: no THREAD)", a.GetToolName(), a.GetAllowedScopes(), want)
		}
		if a.GetAnyArguments() != (a.GetToolName() == "look") {
			t.Errorf("any_arguments of %s = %v", a.GetToolName(), a.GetAnyArguments())
		}
		s.Send(decide(a.GetApprovalId(), agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN))
	}
	// The second step's calls are asked and approved by the grants back to back; the
	// third's, with other arguments, waits for a decision.
	third := s.Until(askedFor("call_2_0")).GetApprovalRequested()
	s.Send(servicetest.Approve(third.GetApprovalId()))
	hard := s.Until(askedFor("call_3_0")).GetApprovalRequested()
	if want := []agentdv1.ApprovalScope{agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE}; !slices.Equal(hard.GetAllowedScopes(), want) {
		t.Errorf("allowed_scopes of hard = %v, want %v", hard.GetAllowedScopes(), want)
	}
	seq := s.Send(decide(hard.GetApprovalId(), agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN))
	s.Until(isAck(seq))
	if a := ack(s.Events(), seq); a.GetAccepted() || a.GetError().GetReason() != "SCOPE_NOT_ALLOWED" {
		t.Errorf("a RUN decision on hard was acked %v, want SCOPE_NOT_ALLOWED", a)
	}
	s.Send(servicetest.Approve(hard.GetApprovalId()))
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("run finished %v, %v", fin, err)
	}
	rs := resolutions(s.Events())
	var byGrant []string
	grants := map[string]string{} // made by a decision, by tool call
	for _, r := range rs {
		switch r.GetDecidedBy() {
		case agentdv1.DecidedBy_DECIDED_BY_GRANT:
			byGrant = append(byGrant, r.GetToolCallId())
			if r.GetGrantId() == "" {
				t.Errorf("approval %s decided by a grant names none", r.GetApprovalId())
			}
		case agentdv1.DecidedBy_DECIDED_BY_CLIENT:
			if r.GetScope() == agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN {
				grants[r.GetToolCallId()] = r.GetGrantId()
			}
		}
	}
	if want := []string{"call_1_0", "call_1_1"}; !slices.Equal(byGrant, want) {
		t.Errorf("calls approved by a grant: %v, want %v", byGrant, want)
	}
	for _, r := range rs {
		if r.GetDecidedBy() == agentdv1.DecidedBy_DECIDED_BY_GRANT {
			made := grants["call_0_0"]
			if r.GetToolCallId() == "call_1_1" {
				made = grants["call_0_1"]
			}
			if r.GetGrantId() != made {
				t.Errorf("call %s approved by grant %q, want %q", r.GetToolCallId(), r.GetGrantId(), made)
			}
		}
	}
	if got := len(ran()); got != 6 {
		t.Errorf("%d calls ran, want 6: %v", got, ran())
	}
}

// A THREAD grant approves the calls of later runs on the thread, is listed with the
// thread, and, revoked, approves nothing more.
func TestGrants_ThreadScope(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "side", `{"n":1}`), rt.Say("one"),
		rt.Call(0, "side", `{"n":1}`), rt.Say("two"),
		rt.Call(0, "side", `{"n":1}`), rt.Say("three"),
	}}
	srv, _ := grantServer(t, m)
	c := srv.Client
	start := func(thread string) *servicetest.Stream {
		spec := servicetest.Input("granter", "go")
		spec.History, spec.ThreadId = agentdv1.History_HISTORY_THREAD, thread
		return servicetest.Open(t, c, spec)
	}
	s := start("")
	a := s.Until(isAsked).GetApprovalRequested()
	if !slices.Contains(a.GetAllowedScopes(), agentdv1.ApprovalScope_APPROVAL_SCOPE_THREAD) {
		t.Fatalf("allowed_scopes %v on a kept thread, want THREAD among them", a.GetAllowedScopes())
	}
	s.Send(decide(a.GetApprovalId(), agentdv1.ApprovalScope_APPROVAL_SCOPE_THREAD))
	if _, err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	thread := s.Events()[0].GetRunStarted().GetThreadId()

	second := start(thread)
	fin, err := second.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("second run: %v, %v", fin, err)
	}
	rs := resolutions(second.Events())
	if len(rs) != 1 || rs[0].GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_GRANT {
		t.Fatalf("second run's approvals %v, want one decided by the thread's grant", rs)
	}
	th, err := c.GetThread(t.Context(), &agentdv1.GetThreadRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	gs := th.GetThread().GetGrants()
	if len(gs) != 1 || gs[0].GetGrantId() != rs[0].GetGrantId() || gs[0].GetToolName() != "side" || gs[0].GetArgumentsJson() != `{"n":1}` {
		t.Fatalf("thread grants %v", gs)
	}
	if _, err := c.RevokeGrant(t.Context(), &agentdv1.RevokeGrantRequest{ThreadId: thread, GrantId: gs[0].GetGrantId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RevokeGrant(t.Context(), &agentdv1.RevokeGrantRequest{ThreadId: thread, GrantId: gs[0].GetGrantId()}); status.Code(err) != codes.NotFound {
		t.Errorf("revoking it again: %v, want NOT_FOUND", err)
	}
	third := start(thread)
	asked := third.Until(isAsked).GetApprovalRequested()
	third.Send(servicetest.Approve(asked.GetApprovalId()))
	if _, err := third.Finish(); err != nil {
		t.Fatal(err)
	}
}

// A resume's decision may give a RUN scope: its grant approves the resumed run's later
// calls, and travels sealed in the continuations the run gives out; a scope the agent
// does not allow is refused.
func TestGrants_ResumeDecisionAndContinuation(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "side", `{"n":1}`),
		rt.Call(1, "side", `{"n":1}`), // approved by the resume's grant
		rt.Call(2, "hard", `{}`),      // parks again: the grant goes with the continuation
		rt.Call(3, "side", `{"n":1}`), // approved by the grant after the second resume
		rt.Say("done"),
	}}
	srv, ran := grantServer(t, m)
	c := srv.Client
	first, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("granter", "go")})
	if err != nil {
		t.Fatal(err)
	}
	fin := first.GetResult()
	resume := func(fin *agentdv1.RunFinished, history []*agentdv1.Message, scope agentdv1.ApprovalScope) (*agentdv1.ExecuteRunResponse, error) {
		return c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{
			Agent: "granter", Messages: append(history, fin.GetNewMessages()...), Continuation: fin.GetContinuation(),
			Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: fin.GetPendingApprovals()[0].GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, Scope: scope}},
		}})
	}
	if _, err := resume(fin, nil, agentdv1.ApprovalScope_APPROVAL_SCOPE_THREAD); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a THREAD scope on a thread the server does not keep: %v, want INVALID_ARGUMENT", err)
	}
	second, err := resume(fin, nil, agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN)
	if err != nil {
		t.Fatal(err)
	}
	fin2 := second.GetResult()
	if fin2.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || fin2.GetPendingApprovals()[0].GetToolName() != "hard" {
		t.Fatalf("second run finished %v, want parked on hard", fin2)
	}
	third, err := resume(fin2, fin.GetNewMessages(), agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE)
	if err != nil {
		t.Fatal(err)
	}
	if third.GetResult().GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("third run finished %v", third.GetResult())
	}
	if want := []string{`side{"n":1}`, `side{"n":1}`, `hard{}`, `side{"n":1}`}; !slices.Equal(ran(), want) {
		t.Errorf("ran %v, want %v: the grant approved the later calls without a park between", ran(), want)
	}
}
