package service_test

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
	"github.com/agentd/agentd/service/store/sqlite"
)

// careful is an agent that, for each task, calls its tool delete (which needs an
// approval) on the task, then says what the call returned: its runs may go on at once,
// each answering its own task, however their model calls interleave.
func careful() scripted { return carefulGated(nil) }

// carefulGated is careful whose answers wait for gate, unless nil, to close.
func carefulGated(gate <-chan struct{}) scripted {
	step := rt.Step{Func: func(_ context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		last := req.Messages[len(req.Messages)-1]
		var events []runtime.ModelEvent
		if p := last.Parts[0]; p.Kind == runtime.PartToolResult {
			if gate != nil {
				<-gate
			}
			out := p.ToolResult.Output
			events = rt.Say("done: " + out.Text + string(out.JSON)).Events
		} else {
			task := last.Parts[0].Text
			events = rt.Call(0, "delete", fmt.Sprintf(`{"what":%q}`, task)).Events
		}
		return modelEvents(events)
	}}
	steps := make([]rt.Step, 8)
	for i := range steps {
		steps[i] = step
	}
	return scripted{name: "careful", goTools: []runtime.Tool{rt.Tool("delete", rt.Echo)},
		goPolicy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"delete": {Approval: runtime.ApprovalAlways}}},
		model:    &rt.Model{Steps: steps}}
}

// modelEvents streams evs, as a model call would.
func modelEvents(evs []runtime.ModelEvent) iter.Seq2[runtime.ModelEvent, error] {
	return func(yield func(runtime.ModelEvent, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// childApproval reports whether ev is a child's approval_requested, shown on its tree's
// root's stream.
func childApproval(ev *agentdv1.RunEvent) bool {
	return ev.GetChildEvent().GetEvent().GetApprovalRequested() != nil
}

// A child's approval shows on the root's stream with its origin, and the decision sent
// on the root's stream reaches the child, acked on the root's stream, once.
func TestNested_ChildApprovalDecidedOnTheRootStream(t *testing.T) {
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model:     &rt.Model{Steps: []rt.Step{rt.Call(0, "careful", `{"task":"old logs"}`), rt.Say("cleaned")}},
		subagents: []runs.Subagent{{Agent: "careful"}},
	}
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	defer open()
	c := newTestServer(t, service.Config{}, lead, carefulGated(gate)).Client
	s := servicetest.Open(t, c, servicetest.Input("lead", "clean up"))
	child := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetToolExecutionStarted() != nil }).GetToolExecutionStarted().GetChildRunId()
	ce := s.Until(childApproval).GetChildEvent()
	ar := ce.GetEvent().GetApprovalRequested()
	if ce.GetRunId() != child || !slices.Equal(ce.GetAgentPath(), []string{"careful"}) || ar.GetToolName() != "delete" || ar.GetArgumentsJson() != `{"what":"old logs"}` {
		t.Fatalf("child_event %v, want the careful child's approval of delete", ce)
	}
	seq := s.Send(servicetest.Approve(ar.GetApprovalId()))
	if a := s.Until(isAck(seq)).GetInputAck(); !a.GetAccepted() {
		t.Fatalf("the decision was refused on the root's stream: %v", a.GetError())
	}
	again := s.Send(servicetest.Approve(ar.GetApprovalId()))
	if a := s.Until(isAck(again)).GetInputAck(); a.GetAccepted() || a.GetError().GetReason() != "ALREADY_DECIDED" {
		t.Fatalf("a second decision on the child's approval was acked %v, want ALREADY_DECIDED", a)
	}
	open()
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	if texts, _ := callResults(fin); len(texts) != 1 || texts[0] != `done: {"what":"old logs"}` {
		t.Fatalf("the call's result %q, want the child's answer after its approved call", texts)
	}
	_, rf, evs := followChild(t, c, child)
	if rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("the child finished %v", rf.GetReason())
	}
	var resolved []*agentdv1.ApprovalResolved
	for _, ev := range evs {
		if r := ev.GetApprovalResolved(); r != nil {
			resolved = append(resolved, r)
		}
	}
	if len(resolved) != 1 || resolved[0].GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_CLIENT || resolved[0].GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
		t.Fatalf("the child's journal resolves %v, want one approval by the client", resolved)
	}
}

// Three children at once each ask an approval; decided out of order on the root's
// stream, each decision reaches the child that asked, and only it.
func TestNested_ParallelChildrenDecidedOutOfOrder(t *testing.T) {
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model: &rt.Model{Steps: []rt.Step{
			rt.Call(0, "careful", `{"task":"a"}`, "careful", `{"task":"b"}`, "careful", `{"task":"c"}`),
			rt.Say("all three answered"),
		}},
		subagents: []runs.Subagent{{Agent: "careful"}}, parallel: 3,
	}
	c := newTestServer(t, service.Config{}, lead, careful()).Client
	s := servicetest.Open(t, c, servicetest.Input("lead", "three tasks"))
	asked := map[string]*agentdv1.ChildEvent{} // by the task each child was given
	for len(asked) < 3 {
		ce := s.Until(childApproval).GetChildEvent()
		args := ce.GetEvent().GetApprovalRequested().GetArgumentsJson()
		asked[strings.Trim(strings.TrimPrefix(args, `{"what":`), `"}`)] = ce
	}
	decide := func(task string, outcome agentdv1.ApprovalOutcome) {
		t.Helper()
		ce := asked[task]
		seq := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: ce.GetEvent().GetApprovalRequested().GetApprovalId(), Outcome: outcome, Reason: "not " + task,
		}}})
		if a := s.Until(isAck(seq)).GetInputAck(); !a.GetAccepted() {
			t.Fatalf("the decision on %s was refused: %v", task, a.GetError())
		}
	}
	decide("c", agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED)
	decide("a", agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED)
	decide("b", agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED)
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	texts, _ := callResults(fin)
	if len(texts) != 3 || !strings.Contains(texts[0], "not a") || texts[1] != `done: {"what":"b"}` || texts[2] != `done: {"what":"c"}` {
		t.Fatalf("the calls' results %q: want a denied, b and c done", texts)
	}
	// Each resolution the root's stream shows is the child's that asked.
	for _, ev := range s.Events() {
		ce := ev.GetChildEvent()
		if r := ce.GetEvent().GetApprovalResolved(); r != nil {
			for task, asked := range asked {
				if asked.GetEvent().GetApprovalRequested().GetApprovalId() == r.GetApprovalId() && asked.GetRunId() != ce.GetRunId() {
					t.Errorf("the approval of %s resolved in run %s, asked in %s", task, ce.GetRunId(), asked.GetRunId())
				}
			}
		}
	}
}

// The root's client goes away while a child waits for a decision; SendRunInput on
// another connection, to the root's run id, decides it, and the tree completes.
func TestNested_ChildDecidedBySendRunInputAfterTheClientLeft(t *testing.T) {
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model:     &rt.Model{Steps: []rt.Step{rt.Call(0, "careful", `{"task":"tmp"}`), rt.Say("cleaned")}},
		subagents: []runs.Subagent{{Agent: "careful"}},
	}
	srv := newTestServer(t, service.Config{}, lead, careful())
	ctx, cancel := context.WithCancel(t.Context())
	rc, err := srv.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("lead", "clean up")}})
	root := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
	ar := s.Until(childApproval).GetChildEvent().GetEvent().GetApprovalRequested()
	cancel() // the client goes away

	_, other := srv.Connect(t)
	resp, err := other.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: root, ClientKey: "k1", Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: servicetest.Approve(ar.GetApprovalId()).GetApprovalDecision()}})
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("SendRunInput to the root: %v %v", resp, err)
	}
	_, fin, evs := followChild(t, other, root)
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("the root finished %v", fin.GetReason())
	}
	// The ack is in the root's journal, where the client sent the decision.
	var acked bool
	for _, ev := range evs {
		acked = acked || ev.GetInputAck().GetClientKey() == "k1"
	}
	if !acked {
		t.Errorf("the root's journal holds no ack of the decision")
	}
}

// A steer sent on the root's stream with a child's run id is the child's: its next
// model call reads it.
func TestNested_SteerAChild(t *testing.T) {
	gate, called := make(chan struct{}), make(chan struct{})
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model:     &rt.Model{Steps: []rt.Step{rt.Call(0, "slow", `{"task":"think"}`), rt.Say("ok")}},
		subagents: []runs.Subagent{{Agent: "slow"}},
	}
	slow := scripted{name: "slow", goTools: []runtime.Tool{rt.Tool("look", rt.Echo)},
		model: &rt.Model{Steps: []rt.Step{
			{Func: func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
				close(called)
				<-gate
				return modelEvents(rt.Call(0, "look", `{}`).Events)
			}},
			rt.Say("thought it over"),
		}}}
	c := newTestServer(t, service.Config{}, lead, slow).Client
	s := servicetest.Open(t, c, servicetest.Input("lead", "go"))
	child := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetToolExecutionStarted() != nil }).GetToolExecutionStarted().GetChildRunId()
	<-called
	bad := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "x", RunId: "run_nobody"}}})
	if a := s.Until(isAck(bad)).GetInputAck(); a.GetAccepted() || a.GetError().GetReason() != "INVALID_STEER" {
		t.Fatalf("a steer for no run below was acked %v", a)
	}
	seq := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "mind the cache", RunId: child}}})
	if a := s.Until(isAck(seq)).GetInputAck(); !a.GetAccepted() {
		t.Fatalf("the steer for the child was refused: %v", a.GetError())
	}
	close(gate)
	if fin, err := s.Finish(); err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	reqs := slow.model.Requests()
	if len(reqs) != 2 || !strings.Contains(rt.RenderMessage(reqs[1].Messages[len(reqs[1].Messages)-1]), "mind the cache") {
		t.Fatalf("the child's second model call did not read the steer")
	}
	for _, r := range lead.model.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(rt.RenderMessage(m), "mind the cache") {
				t.Fatalf("the lead read the child's steer")
			}
		}
	}
}

// relay is an agent that hands each task to its sub-agent to and says what it answered.
func relay(name, to string) scripted {
	step := rt.Step{Func: func(_ context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		last := req.Messages[len(req.Messages)-1]
		if p := last.Parts[0]; p.Kind == runtime.PartToolResult {
			return modelEvents(rt.Say("relayed: " + p.ToolResult.Output.Text).Events)
		}
		return modelEvents(rt.Call(0, to, fmt.Sprintf(`{"task":%q}`, last.Parts[0].Text)).Events)
	}}
	return scripted{name: name, goTools: []runtime.Tool{}, model: &rt.Model{Steps: []rt.Step{step, step, step, step}},
		subagents: []runs.Subagent{{Agent: to}}}
}

// goroutinesIn counts the goroutines whose stack has fn.
func goroutinesIn(fn string) int {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// The root's client goes away while a child, one or two runs down, waits for a
// decision: the whole tree parks, nothing of it running. A decision sent by
// SendRunInput to the root, on another connection, wakes the runs that need it, and
// the tree completes once.
func TestNested_TreeParksAndWakes(t *testing.T) {
	for _, tc := range []struct {
		depth  int
		attach bool // decided on a Run stream attached to the root, not by SendRunInput
		sqlite bool
	}{{1, false, false}, {2, false, false}, {1, true, false}, {2, true, false}, {2, false, true}, {2, true, true}} {
		depth := tc.depth
		t.Run(fmt.Sprintf("depth %d attach %v sqlite %v", depth, tc.attach, tc.sqlite), func(t *testing.T) {
			var cfg service.Config
			if tc.sqlite {
				st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				cfg.Store = st
			}
			agents := []scripted{careful()}
			top := "careful"
			if depth == 2 {
				agents = append(agents, relay("middle", "careful"))
				top = "middle"
			}
			lead := relay("lead", top)
			srv := newTestServer(t, cfg, append(agents, lead)...)
			ctx, cancel := context.WithCancel(t.Context())
			rc, err := srv.Client.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s := servicetest.NewStream(t, rc)
			s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("lead", "tmp")}})
			root := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
			ce := s.Until(childApproval).GetChildEvent()
			if len(ce.GetAgentPath()) != depth {
				t.Fatalf("the approval came from %v, want %d down", ce.GetAgentPath(), depth)
			}
			cancel() // the client goes away

			waitState(t, srv.Client, ce.GetRunId(), agentdv1.RunState_RUN_STATE_PARKED)
			waitState(t, srv.Client, root, agentdv1.RunState_RUN_STATE_PARKED)
			if n := goroutinesIn("runs.(*session).execute"); n != 0 {
				t.Fatalf("%d runs of the parked tree still hold a goroutine", n)
			}

			_, other := srv.Connect(t)
			approval := ce.GetEvent().GetApprovalRequested().GetApprovalId()
			if tc.attach {
				// Attaching wakes the root, whose call waits for its parked child again.
				a := servicetest.Attach(t, other, root, 0)
				seq := a.Send(servicetest.Approve(approval))
				if ack := a.Until(isAck(seq)).GetInputAck(); !ack.GetAccepted() {
					t.Fatalf("the decision on the attached stream was refused: %v", ack.GetError())
				}
				if fin, err := a.Finish(); err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
					t.Fatalf("the attached stream ended %v %v", fin.GetReason(), err)
				}
			} else {
				resp, err := other.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: root, ClientKey: "k1",
					Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: servicetest.Approve(approval).GetApprovalDecision()}})
				if err != nil || !resp.GetAck().GetAccepted() {
					t.Fatalf("SendRunInput to the root: %v %v", resp, err)
				}
			}
			_, fin, _ := followChild(t, other, root)
			if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Fatalf("the root finished %v: %v", fin.GetReason(), fin.GetError())
			}
			want := `done: {"what":"tmp"}`
			for range depth {
				want = "relayed: " + want
			}
			if fin.GetFinalText() != want {
				t.Fatalf("the root said %q, want %q", fin.GetFinalText(), want)
			}
			_, cf, evs := followChild(t, other, ce.GetRunId())
			if cf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Fatalf("the child finished %v", cf.GetReason())
			}
			var ran int
			for _, ev := range evs {
				if ev.GetToolCallResult() != nil {
					ran++
				}
			}
			if ran != 1 {
				t.Fatalf("the child's approved call has %d results, want 1", ran)
			}
		})
	}
}

// Three children at once each ask an approval and the client goes away: the tree
// parks. Decisions sent by SendRunInput to the root, out of order, each wake the run
// that asked, and the tree completes with each call run once.
func TestNested_ParkedParallelChildrenDecidedOutOfOrder(t *testing.T) {
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model: &rt.Model{Steps: []rt.Step{
			rt.Call(0, "careful", `{"task":"a"}`, "careful", `{"task":"b"}`, "careful", `{"task":"c"}`),
			rt.Say("all three answered"),
		}},
		subagents: []runs.Subagent{{Agent: "careful"}}, parallel: 3,
	}
	srv := newTestServer(t, service.Config{}, lead, careful())
	ctx, cancel := context.WithCancel(t.Context())
	rc, err := srv.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("lead", "three tasks")}})
	root := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
	asked := map[string]*agentdv1.ChildEvent{}
	for len(asked) < 3 {
		ce := s.Until(childApproval).GetChildEvent()
		args := ce.GetEvent().GetApprovalRequested().GetArgumentsJson()
		asked[strings.Trim(strings.TrimPrefix(args, `{"what":`), `"}`)] = ce
	}
	cancel()
	waitState(t, srv.Client, root, agentdv1.RunState_RUN_STATE_PARKED)

	_, other := srv.Connect(t)
	for i, task := range []string{"c", "a", "b"} {
		outcome := agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED
		if task == "a" {
			outcome = agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED
		}
		resp, err := other.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: root, ClientKey: fmt.Sprint("k", i),
			Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
				ApprovalId: asked[task].GetEvent().GetApprovalRequested().GetApprovalId(), Outcome: outcome, Reason: "not " + task}}})
		if err != nil || !resp.GetAck().GetAccepted() {
			t.Fatalf("SendRunInput on %s: %v %v", task, resp, err)
		}
	}
	_, fin, _ := followChild(t, other, root)
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("the root finished %v: %v", fin.GetReason(), fin.GetError())
	}
	texts, _ := callResults(fin)
	if len(texts) != 3 || !strings.Contains(texts[0], "not a") || texts[1] != `done: {"what":"b"}` || texts[2] != `done: {"what":"c"}` {
		t.Fatalf("the calls' results %q: want a denied, b and c done", texts)
	}
	if n := lead.model.Calls(); n != 2 {
		t.Errorf("the lead's model was called %d times, want 2", n)
	}
}

// A cancel sent to a parked tree's root ends the root and its parked child CANCELLED.
func TestNested_CancelAParkedTree(t *testing.T) {
	lead := relay("lead", "careful")
	srv := newTestServer(t, service.Config{}, lead, careful())
	ctx, cancel := context.WithCancel(t.Context())
	rc, err := srv.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("lead", "tmp")}})
	root := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
	child := s.Until(childApproval).GetChildEvent().GetRunId()
	cancel()
	waitState(t, srv.Client, root, agentdv1.RunState_RUN_STATE_PARKED)

	_, other := srv.Connect(t)
	resp, err := other.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: root, ClientKey: "stop",
		Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: "enough"}}})
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("cancel: %v %v", resp, err)
	}
	if _, fin, _ := followChild(t, other, root); fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED {
		t.Errorf("the root finished %v", fin.GetReason())
	}
	if _, fin, _ := followChild(t, other, child); fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED || fin.GetUsage().GetModelCalls() != 1 {
		t.Errorf("the child finished %v with usage %v, want CANCELLED with its model call", fin.GetReason(), fin.GetUsage())
	}
}

// withUsage is step reporting in and out tokens before it finishes.
func withUsage(step rt.Step, in, out int64) rt.Step {
	n := len(step.Events)
	step.Events = append(append(slices.Clone(step.Events[:n-1]), rt.Usage(in, out)), step.Events[n-1])
	return step
}

// The root's run_finished reports its tree's usage, with each run below it.
func TestNested_TreeUsage(t *testing.T) {
	lead := scripted{name: "lead", goTools: []runtime.Tool{}, subagents: []runs.Subagent{{Agent: "middle"}},
		model: &rt.Model{Steps: []rt.Step{withUsage(rt.Call(0, "middle", `{"task":"x"}`), 100, 10), withUsage(rt.Say("done"), 200, 20)}}}
	middle := scripted{name: "middle", goTools: []runtime.Tool{}, subagents: []runs.Subagent{{Agent: "leaf"}},
		model: &rt.Model{Steps: []rt.Step{withUsage(rt.Call(0, "leaf", `{"task":"y"}`), 30, 3), withUsage(rt.Say("relayed"), 40, 4)}}}
	leaf := scripted{name: "leaf", goTools: []runtime.Tool{}, model: &rt.Model{Steps: []rt.Step{withUsage(rt.Say("leaf"), 5, 1)}}}
	c := newTestServer(t, service.Config{}, lead, middle, leaf).Client
	fin, err := servicetest.Open(t, c, servicetest.Input("lead", "go")).Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	if u := fin.GetUsage(); u.GetInputTokens() != 300 || u.GetOutputTokens() != 30 {
		t.Errorf("the root's own usage %v", u)
	}
	if u := fin.GetTreeUsage(); u.GetInputTokens() != 375 || u.GetOutputTokens() != 38 || u.GetModelCalls() != 5 {
		t.Errorf("tree_usage %v, want 375 in, 38 out, 5 model calls", u)
	}
	var got []string
	for _, cu := range fin.GetChildUsage() {
		got = append(got, fmt.Sprintf("%s:%d", strings.Join(cu.GetAgentPath(), "/"), cu.GetUsage().GetInputTokens()))
	}
	if strings.Join(got, " ") != "middle:70 middle/leaf:5" {
		t.Errorf("child_usage %v, want middle's 70 and leaf's 5", got)
	}
}

// A run starts at most Config.MaxChildren children, and a tree's calls start none once
// it spent Config.MaxTreeTokens: the call past either gets an error result.
func TestNested_Bounds(t *testing.T) {
	leaf := func() scripted {
		return scripted{name: "leaf", goTools: []runtime.Tool{}, model: &rt.Model{Steps: slices.Repeat([]rt.Step{withUsage(rt.Say("ok"), 60, 0)}, 3)}}
	}
	lead := func() scripted {
		return scripted{name: "lead", goTools: []runtime.Tool{}, subagents: []runs.Subagent{{Agent: "leaf"}},
			model: &rt.Model{Steps: []rt.Step{
				rt.Call(0, "leaf", `{"task":"1"}`), rt.Call(1, "leaf", `{"task":"2"}`), rt.Call(2, "leaf", `{"task":"3"}`), rt.Say("done"),
			}}}
	}
	for _, tc := range []struct {
		name string
		cfg  runs.Config
		want string
	}{
		{"children", runs.Config{MaxChildren: 2}, "this run has started 2 child runs"},
		{"tree tokens", runs.Config{MaxTreeTokens: 100}, "this tree of runs has spent 120 tokens, and the server allows a tree 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestServer(t, service.Config{Config: tc.cfg}, lead(), leaf()).Client
			fin, err := servicetest.Open(t, c, servicetest.Input("lead", "go")).Finish()
			if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Fatalf("finished %v %v", fin.GetReason(), err)
			}
			texts, errs := callResults(fin)
			if len(texts) != 3 || errs[0] || errs[1] || !errs[2] || !strings.Contains(texts[2], tc.want) {
				t.Fatalf("results %q (errors %v), want the third refused: %s", texts, errs, tc.want)
			}
		})
	}
}

// A root's client that half-closes answers nothing more: the child that waits parks, its
// tree with it, and SendRunInput decides it; the half-closed stream, still reading, sees
// the tree complete.
func TestNested_HalfClosedRootParksTheTree(t *testing.T) {
	srv := newTestServer(t, service.Config{}, relay("lead", "careful"), careful())
	s := servicetest.Open(t, srv.Client, servicetest.Input("lead", "tmp"))
	root := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
	ce := s.Until(childApproval).GetChildEvent()
	if err := s.RunClient().CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitState(t, srv.Client, root, agentdv1.RunState_RUN_STATE_PARKED)
	resp, err := srv.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: root, ClientKey: "k1",
		Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: servicetest.Approve(ce.GetEvent().GetApprovalRequested().GetApprovalId()).GetApprovalDecision()}})
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("SendRunInput to the root: %v %v", resp, err)
	}
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() != `relayed: done: {"what":"tmp"}` {
		t.Fatalf("the half-closed stream saw the root end %v %q: %v", fin.GetReason(), fin.GetFinalText(), err)
	}
}

// A child's deltas merge on its parent's journal as the parent's own do: read after the
// fact, a child's fifty deltas are one event.
func TestNested_ChildDeltasMerge(t *testing.T) {
	pieces := slices.Repeat([]string{"a"}, 50)
	lead := scripted{name: "lead", goTools: []runtime.Tool{}, subagents: []runs.Subagent{{Agent: "chatty"}},
		model: &rt.Model{Steps: []rt.Step{rt.Call(0, "chatty", `{"task":"talk"}`), rt.Say("done")}}}
	chatty := scripted{name: "chatty", goTools: []runtime.Tool{}, model: &rt.Model{Steps: []rt.Step{rt.Say(pieces...)}}}
	c := newTestServer(t, service.Config{}, lead, chatty).Client
	// Nobody reads the root's journal while it runs: the started stream goes away at once.
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := c.StartRun(ctx, &agentdv1.StartRunRequest{Start: servicetest.Input("lead", "go")})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, fin, evs := followChild(t, c, first.GetEvent().GetRunId())
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v", fin.GetReason())
	}
	var deltas []string
	for _, ev := range evs {
		if d := ev.GetChildEvent().GetEvent().GetTextDelta(); d != nil {
			deltas = append(deltas, d.GetDelta())
		}
	}
	if len(deltas) != 1 || deltas[0] != strings.Repeat("a", 50) {
		t.Fatalf("the child's deltas on the root's journal: %q, want one of fifty a's", deltas)
	}
}
