package service_test

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// callResults returns the text of each tool result of a run's new messages, and whether
// it is an error, in order.
func callResults(fin *agentdv1.RunFinished) (texts []string, errs []bool) {
	for _, m := range fin.GetNewMessages() {
		for _, p := range m.GetParts() {
			if r := p.GetToolResult(); r != nil {
				text := r.GetText()
				if j := r.GetJson(); j != nil {
					b, _ := json.Marshal(j.AsInterface())
					text = string(b)
				}
				texts, errs = append(texts, text), append(errs, r.GetIsError())
			}
		}
	}
	return texts, errs
}

// followChild attaches to the child run a call started, as a client that saw its id in
// tool_execution_started would, and returns its events to run_finished included.
func followChild(t *testing.T, c agentdv1.AgentServiceClient, id string) (*agentdv1.RunStarted, *agentdv1.RunFinished, []*agentdv1.RunEvent) {
	t.Helper()
	stream, err := c.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: id})
	if err != nil {
		t.Fatal(err)
	}
	var rs *agentdv1.RunStarted
	var evs []*agentdv1.RunEvent
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("attaching to the child %s: %v", id, err)
		}
		ev := resp.GetEvent()
		evs = append(evs, ev)
		if s := ev.GetRunStarted(); s != nil {
			rs = s
		}
		if f := ev.GetRunFinished(); f != nil {
			return rs, f, evs
		}
	}
}

// childRunOf returns the child_run_id of the run's one sub-agent call.
func childRunOf(t *testing.T, evs []*agentdv1.RunEvent) string {
	t.Helper()
	for _, ev := range evs {
		if id := ev.GetToolExecutionStarted().GetChildRunId(); id != "" {
			return id
		}
	}
	t.Fatalf("no tool_execution_started names a child run")
	return ""
}

// A sub-agent's call starts a child run of its own, which names its parent, call, root
// and depth; the call's result is the child's answer, text or typed.
func TestSubagents_ChildIsARun(t *testing.T) {
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model: &rt.Model{Steps: []rt.Step{
			rt.Call(0, "researcher", `{"task":"find the boiling point of water"}`, "weather", `{"task":"Oslo"}`),
			rt.Say("Water boils at 100 °C; Oslo is cold."),
		}},
		subagents: []runs.Subagent{{Agent: "researcher"}, {Agent: "forecaster", Tool: "weather", Description: "Tells the weather."}},
	}
	researcher := scripted{name: "researcher", goTools: []runtime.Tool{}, model: &rt.Model{Steps: []rt.Step{rt.Say("100 °C at sea level.")}}}
	forecaster := typedScript("forecaster", rt.Call(0, "final_answer", `{"city":"Oslo","celsius":-3}`))
	c := newTestServer(t, service.Config{}, lead, researcher, forecaster).Client

	s := servicetest.Open(t, c, servicetest.Input("lead", "two questions"))
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	texts, errs := callResults(fin)
	if len(texts) != 2 || errs[0] || errs[1] || texts[0] != "100 °C at sea level." || texts[1] != `{"celsius":-3,"city":"Oslo"}` {
		t.Fatalf("results %q (errors %v), want the researcher's text and the forecaster's typed answer", texts, errs)
	}
	// The model read each child's answer as its call's result.
	asked := lead.model.Requests()[1].Messages
	if got := rt.RenderMessage(asked[len(asked)-1]); !strings.Contains(got, "100 °C at sea level.") {
		t.Errorf("the lead's model read %s", got)
	}
	var root string
	var children []string
	for _, ev := range s.Events() {
		if rs := ev.GetRunStarted(); rs != nil {
			root = rs.GetRunId()
			if rs.GetParentRunId() != "" || rs.GetDepth() != 0 {
				t.Errorf("the root's run_started %v names a parent", rs)
			}
		}
		if es := ev.GetToolExecutionStarted(); es != nil {
			children = append(children, es.GetChildRunId())
		}
	}
	if len(children) != 2 || children[0] == "" || children[0] == children[1] {
		t.Fatalf("tool_execution_started child runs %q, want two of their own", children)
	}
	// The root's stream shows each child's lifecycle and text, marked with its origin.
	shown := map[string][]string{}
	text := map[string]string{}
	for _, ev := range s.Events() {
		ce := ev.GetChildEvent()
		if ce == nil {
			continue
		}
		if ce.GetParentRunId() != root || len(ce.GetAgentPath()) != 1 {
			t.Errorf("child_event %v, want it under the root with a one-agent path", ce)
		}
		agent := ce.GetAgentPath()[0]
		switch k := ce.GetEvent(); {
		case k.GetRunStarted() != nil:
			shown[agent] = append(shown[agent], "run_started")
		case k.GetRunFinished() != nil:
			shown[agent] = append(shown[agent], "run_finished")
		case k.GetTextDelta() != nil:
			text[agent] += k.GetTextDelta().GetDelta()
		case k.GetToolCallStarted() != nil, k.GetStepStarted() != nil, k.GetCheckpoint() != nil:
			t.Errorf("the default level showed %v", k)
		}
	}
	for _, agent := range []string{"researcher", "forecaster"} {
		if got := strings.Join(shown[agent], ","); got != "run_started,run_finished" {
			t.Errorf("the root's stream shows %s's %s, want its start and end", agent, got)
		}
	}
	if text["researcher"] != "100 °C at sea level." {
		t.Errorf("the root's stream shows the researcher saying %q", text["researcher"])
	}
	for i, agent := range []string{"researcher", "forecaster"} {
		rs, rf, _ := followChild(t, c, children[i])
		if rs.GetAgent() != agent || rs.GetParentRunId() != root || rs.GetRootRunId() != root || rs.GetDepth() != 1 || rs.GetParentToolCallId() == "" {
			t.Errorf("child %d run_started %v, want agent %s under %s at depth 1", i, rs, agent, root)
		}
		if rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Errorf("child %d finished %v", i, rf.GetReason())
		}
	}
}

// A child that fails, or needs a person in a run nobody answers, gives the call an
// error result the parent's model reads; the parent goes on.
func TestSubagents_ChildFailsIsAnErrorResult(t *testing.T) {
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model: &rt.Model{Steps: []rt.Step{
			rt.Call(0, "broken", `{"task":"x"}`, "careful", `{"task":"y"}`),
			rt.Say("Neither worked."),
		}},
		subagents: []runs.Subagent{{Agent: "broken"}, {Agent: "careful"}},
	}
	broken := scripted{name: "broken", goTools: []runtime.Tool{}, model: &rt.Model{Steps: []rt.Step{{Err: context.DeadlineExceeded}}}}
	careful := scripted{name: "careful", goTools: []runtime.Tool{rt.Tool("delete", rt.Echo)},
		goPolicy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"delete": {Approval: runtime.ApprovalAlways}}},
		model:    &rt.Model{Steps: []rt.Step{rt.Call(0, "delete", `{}`), rt.Say("deleted")}}}
	c := newTestServer(t, service.Config{}, lead, broken, careful).Client
	// A run nobody answers (INTERRUPT): its child cannot be answered either.
	spec := servicetest.Input("lead", "go")
	spec.Config = &agentdv1.RunConfig{ApprovalPolicy: agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT}
	fin, err := servicetest.Open(t, c, spec).Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v, want the lead to complete", fin.GetReason(), err)
	}
	texts, errs := callResults(fin)
	if len(texts) != 2 || !errs[0] || !errs[1] {
		t.Fatalf("results %q (errors %v), want two error results", texts, errs)
	}
	if !strings.Contains(texts[0], "the agent broken") || !strings.Contains(texts[0], "ended failed: MODEL_ERROR") {
		t.Errorf("the failed child's result %q, want its end and reason", texts[0])
	}
	if !strings.Contains(texts[1], "needs a decision") {
		t.Errorf("the child that waits for an approval: %q, want it to say so", texts[1])
	}
}

// Cancelling the parent cancels its child.
func TestSubagents_CancelMidChild(t *testing.T) {
	streaming := make(chan struct{})
	lead := scripted{name: "lead", goTools: []runtime.Tool{},
		model:     &rt.Model{Steps: []rt.Step{rt.Call(0, "slow", `{"task":"think"}`)}},
		subagents: []runs.Subagent{{Agent: "slow"}},
	}
	slow := scripted{name: "slow", goTools: []runtime.Tool{}, model: &rt.Model{Steps: []rt.Step{{Func: func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			if !yield(rt.Text("hmm"), nil) {
				return
			}
			close(streaming)
			<-ctx.Done()
			yield(runtime.ModelEvent{}, ctx.Err())
		}
	}}}}}
	c := newTestServer(t, service.Config{}, lead, slow).Client
	s := servicetest.Open(t, c, servicetest.Input("lead", "go"))
	started := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetToolExecutionStarted() != nil })
	<-streaming
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: "enough"}}})
	fin, _ := s.Finish()
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED {
		t.Errorf("the lead finished %v, want CANCELLED", fin.GetReason())
	}
	_, rf, _ := followChild(t, c, started.GetToolExecutionStarted().GetChildRunId())
	if rf.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED || rf.GetUsage().GetModelCalls() != 1 {
		t.Errorf("the child finished %v with usage %v, want CANCELLED with its model call counted", rf.GetReason(), rf.GetUsage())
	}
}

// Runs nest at most Config.MaxDepth deep: an agent that calls itself is stopped there,
// each level told why.
func TestSubagents_Depth(t *testing.T) {
	steps := make([]rt.Step, 0, 12)
	for range 3 {
		steps = append(steps, rt.Call(0, "again", `{"task":"deeper"}`))
	}
	for range 3 {
		steps = append(steps, rt.Say("done"))
	}
	loop := scripted{name: "loop", goTools: []runtime.Tool{}, model: &rt.Model{Steps: steps}, subagents: []runs.Subagent{{Agent: "loop", Tool: "again"}}}
	c := newTestServer(t, service.Config{Config: runs.Config{MaxDepth: 2}}, loop).Client
	s := servicetest.Open(t, c, servicetest.Input("loop", "go"))
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	// root → child (depth 1) → grandchild (depth 2), whose call is refused.
	_, child, childEvents := followChild(t, c, childRunOf(t, s.Events()))
	grandStarted, grand, _ := followChild(t, c, childRunOf(t, childEvents))
	if child.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || grandStarted.GetDepth() != 2 {
		t.Fatalf("child %v, grandchild at depth %d", child.GetReason(), grandStarted.GetDepth())
	}
	texts, errs := callResults(grand)
	if len(texts) != 1 || !errs[0] || !strings.Contains(texts[0], "runs nest at most 2 deep, and this one would be 3 deep") {
		t.Errorf("the grandchild's call: %q, want it refused for depth", texts)
	}
	// The root's stream shows the grandchild too, two agents down, under its own parent.
	var grandShown []string
	for _, ev := range s.Events() {
		if ce := ev.GetChildEvent(); ce.GetRunId() == grandStarted.GetRunId() {
			if len(ce.GetAgentPath()) != 2 || ce.GetParentRunId() != grandStarted.GetParentRunId() {
				t.Errorf("grandchild's child_event %v, want path loop/loop and its parent", ce)
			}
			if ce.GetEvent().GetRunStarted() != nil || ce.GetEvent().GetRunFinished() != nil {
				grandShown = append(grandShown, "lifecycle")
			}
		}
	}
	if len(grandShown) != 2 {
		t.Errorf("the root's stream shows %d of the grandchild's lifecycle events, want 2", len(grandShown))
	}
	if lead := loop.model.Calls(); lead != 6 {
		t.Errorf("%d model calls, want 6: three levels, each calling and answering", lead)
	}
}

// RunConfig.child_events chooses how much of the children the stream shows.
func TestSubagents_ChildEventLevels(t *testing.T) {
	for _, tt := range []struct {
		level        agentdv1.ChildEvents
		start, delta bool
		tool         bool
	}{
		{agentdv1.ChildEvents_CHILD_EVENTS_NONE, false, false, false},
		{agentdv1.ChildEvents_CHILD_EVENTS_LIFECYCLE, true, false, false},
		{agentdv1.ChildEvents_CHILD_EVENTS_DEFAULT, true, true, false},
		{agentdv1.ChildEvents_CHILD_EVENTS_ALL, true, true, true},
	} {
		t.Run(tt.level.String(), func(t *testing.T) {
			lead := scripted{name: "lead", goTools: []runtime.Tool{},
				model:     &rt.Model{Steps: []rt.Step{rt.Call(0, "helper", `{"task":"echo"}`), rt.Say("ok")}},
				subagents: []runs.Subagent{{Agent: "helper"}},
			}
			helper := scripted{name: "helper", goTools: []runtime.Tool{rt.Tool("echo", rt.Echo)},
				model: &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"x":1}`), rt.Say("echoed")}}}
			c := newTestServer(t, service.Config{}, lead, helper).Client
			spec := servicetest.Input("lead", "go")
			spec.Config = &agentdv1.RunConfig{ChildEvents: tt.level}
			s := servicetest.Open(t, c, spec)
			if _, err := s.Finish(); err != nil {
				t.Fatal(err)
			}
			var start, delta, tool bool
			for _, ev := range s.Events() {
				k := ev.GetChildEvent().GetEvent()
				start = start || k.GetRunStarted() != nil
				delta = delta || k.GetTextDelta() != nil
				tool = tool || k.GetToolCallResult() != nil
			}
			if start != tt.start || delta != tt.delta || tool != tt.tool {
				t.Errorf("shown: start %v, text %v, tool results %v; want %v, %v, %v", start, delta, tool, tt.start, tt.delta, tt.tool)
			}
		})
	}
}
