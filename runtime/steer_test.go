package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// steerQueue sends a client's steers to a run's inbox.
type steerQueue struct {
	t     *testing.T
	inbox runtime.Inbox
}

func newSteerQueue(t *testing.T) *steerQueue { return &steerQueue{t: t} }

func (s *steerQueue) push(seq int64, text string, interrupt bool) {
	if err := s.inbox.Send(runtime.Steer{Seq: seq, Message: runtime.UserMessage(text), Interrupt: interrupt}); err != nil {
		s.t.Errorf("Send(steer %d) = %v, want it queued", seq, err)
	}
}

func (s *steerQueue) attach(req *runtime.Request) *runtime.Request {
	req.Inbox = &s.inbox
	return req
}

func TestRule2_SteerNextStepEntersBeforeTheNextModelCall(t *testing.T) {
	sq := newSteerQueue(t)
	tool := rt.Tool("t", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		sq.push(7, "also check the weather", false) // arrives while the tool runs
		return runtime.Output{Text: "ok"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{tool}})
	evs, fin := run(t, a, t.Context(), sq.attach(&runtime.Request{}))
	golden(t, rt.Render(evs))
	second := m.Requests()[1].Messages
	if last := second[len(second)-1]; last.Role != runtime.RoleUser || last.Text() != "also check the weather" {
		t.Errorf("second model call ends with %s, want the steer", rt.RenderMessage(last))
	}
	applied := eventsOf[*runtime.SteerApplied](evs)
	steps := eventsOf[*runtime.StepStarted](evs)
	if len(applied) != 1 || applied[0].Seq != 7 || applied[0].StepID != steps[1].StepID || applied[0].Dropped {
		t.Errorf("steer_applied = %+v, want seq 7 in the second step", applied)
	}
	if steps[1].Turn != 1 || steps[1].IndexInTurn != 0 {
		t.Errorf("second step turn=%d in_turn=%d, want a new turn", steps[1].Turn, steps[1].IndexInTurn)
	}
	if fin.Reason != runtime.EndCompleted {
		t.Errorf("finished %v", fin.Reason)
	}
}

func TestRule6_SteerQueuedWhenTheModelFinishesContinuesTheRun(t *testing.T) {
	sq := newSteerQueue(t)
	m := &rt.Model{Steps: []rt.Step{rt.Say("first answer"), rt.Say("second answer")}}
	a := newAgent(t, m, runtime.Config{})
	req := sq.attach(&runtime.Request{Hooks: onEvent(func(ev runtime.Event) {
		if d, ok := ev.(*runtime.TextDelta); ok && d.Delta == "first answer" {
			sq.push(1, "and then?", false)
		}
	})})
	_, fin := run(t, a, t.Context(), req)
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "second answer" || m.Calls() != 2 {
		t.Fatalf("finished %v %q after %d calls, want the steer to continue the run", fin.Reason, fin.FinalText, m.Calls())
	}
	var roles []string
	for _, msg := range fin.NewMessages {
		roles = append(roles, msg.Role.String()+":"+msg.Text())
	}
	if got := strings.Join(roles, "|"); got != "assistant:first answer|user:and then?|assistant:second answer" {
		t.Errorf("new messages %s", got)
	}
}

func TestRule2_SteerStartsATurnWithAFreshStepBudget(t *testing.T) {
	sq := newSteerQueue(t)
	steps := make([]rt.Step, 6)
	for i := range steps {
		steps[i] = rt.Call(i, "t", `{}`)
	}
	calls := 0
	tool := rt.Tool("t", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		calls++
		if calls == 2 {
			sq.push(1, "keep going", false)
		}
		return runtime.Output{Text: "ok"}, nil
	})
	m := &rt.Model{Steps: steps}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{tool}, MaxSteps: 2})
	evs, fin := run(t, a, t.Context(), sq.attach(&runtime.Request{}))
	if fin.Reason != runtime.EndMaxSteps || m.Calls() != 4 {
		t.Errorf("finished %v after %d model calls, want max_steps after 2+2", fin.Reason, m.Calls())
	}
	last := eventsOf[*runtime.StepStarted](evs)[3]
	if last.Turn != 1 || last.IndexInTurn != 1 {
		t.Errorf("fourth step turn=%d in_turn=%d, want turn 1 step 1", last.Turn, last.IndexInTurn)
	}
}

func TestRule4_SteerInterruptStopsGenerationCancelsUnrunCallsAndInjects(t *testing.T) {
	sq := newSteerQueue(t)
	m := &rt.Model{Steps: []rt.Step{
		{Events: []runtime.ModelEvent{rt.Text("I will write a very long ")}, Block: true},
		rt.Say("ok, switching"),
	}}
	a := newAgent(t, m, runtime.Config{})
	var once sync.Once
	req := sq.attach(&runtime.Request{Hooks: onEvent(func(ev runtime.Event) {
		if _, ok := ev.(*runtime.TextDelta); ok {
			once.Do(func() { sq.push(3, "stop, do this instead", true) })
		}
	})})
	evs, fin := run(t, a, t.Context(), req)
	golden(t, rt.Render(evs))
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "ok, switching" {
		t.Fatalf("finished %v %q", fin.Reason, fin.FinalText)
	}
	if !fin.NewMessages[0].Partial || fin.NewMessages[1].Text() != "stop, do this instead" {
		t.Errorf("new messages: %s, %s", rt.RenderMessage(fin.NewMessages[0]), rt.RenderMessage(fin.NewMessages[1]))
	}
}

func TestRule4_SteerInterruptCancelsCallsNotYetRun(t *testing.T) {
	sq := newSteerQueue(t)
	rec := newRecorder()
	first := rt.Tool("first", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		sq.push(1, "change of plan", true)
		return runtime.Output{Text: "first ran"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "first", `{}`, "second", `{}`), rt.Say("replanned")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{first, rec.tool("second")}})
	evs, fin := run(t, a, t.Context(), sq.attach(&runtime.Request{}))
	if len(rec.got()) != 0 {
		t.Error("a call not yet run when the interrupt came ran anyway")
	}
	cancelled := eventsOf[*runtime.ToolCallsCancelled](evs)
	if len(cancelled) != 1 || len(cancelled[0].CallIDs) != 1 || cancelled[0].CallIDs[0] != "call_0_1" || cancelled[0].Reason != "interrupted by a steer" {
		t.Fatalf("tool_calls_cancelled = %+v", cancelled)
	}
	// Every call keeps a result in the transcript; the steer follows.
	tool := fin.NewMessages[1]
	if tool.Role != runtime.RoleTool || len(tool.Parts) != 2 || !tool.Parts[1].ToolResult.Output.IsError {
		t.Errorf("tool message = %s", rt.RenderMessage(tool))
	}
	if fin.NewMessages[2].Text() != "change of plan" || fin.FinalText != "replanned" {
		t.Errorf("new messages after the tools: %v", fin.NewMessages[2:])
	}
}

func TestSteerLeftWhenTheRunEndsIsReportedDropped(t *testing.T) {
	sq := newSteerQueue(t)
	ctx, cancel := context.WithCancel(t.Context())
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`)}}
	tool := rt.Tool("t", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		sq.push(9, "too late", false)
		cancel()
		return runtime.Output{Text: "ok"}, nil
	})
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{tool}})
	evs, fin := run(t, a, ctx, sq.attach(&runtime.Request{}))
	if fin.Reason != runtime.EndCancelled {
		t.Fatalf("finished %v", fin.Reason)
	}
	applied := eventsOf[*runtime.SteerApplied](evs)
	if len(applied) != 1 || applied[0].Seq != 9 || !applied[0].Dropped || !strings.Contains(applied[0].DropReason, "cancelled") {
		t.Fatalf("steer_applied = %+v, want seq 9 dropped because the run was cancelled", applied)
	}
}
