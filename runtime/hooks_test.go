package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// funcHooks is a Hooks with func fields; unset ones do nothing.
type funcHooks struct {
	runtime.NoHooks
	beforeRun   func(*runtime.RunInfo) error
	beforeModel func(*runtime.ModelCall) error
	afterModel  func(*runtime.ModelResponse) error
	beforeTool  func(*runtime.ToolCallInput) error
	afterTool   func(*runtime.ToolCallOutput) error
	afterRun    func(*runtime.RunFinished)
}

func (h *funcHooks) BeforeRun(_ context.Context, in *runtime.RunInfo) error {
	if h.beforeRun != nil {
		return h.beforeRun(in)
	}
	return nil
}

func (h *funcHooks) BeforeModel(_ context.Context, in *runtime.ModelCall) error {
	if h.beforeModel != nil {
		return h.beforeModel(in)
	}
	return nil
}

func (h *funcHooks) AfterModel(_ context.Context, in *runtime.ModelResponse) error {
	if h.afterModel != nil {
		return h.afterModel(in)
	}
	return nil
}

func (h *funcHooks) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	if h.beforeTool != nil {
		return h.beforeTool(in)
	}
	return nil
}

func (h *funcHooks) AfterTool(_ context.Context, in *runtime.ToolCallOutput) error {
	if h.afterTool != nil {
		return h.afterTool(in)
	}
	return nil
}

func (h *funcHooks) AfterRun(_ context.Context, _ *runtime.RunInfo, fin *runtime.RunFinished) {
	if h.afterRun != nil {
		h.afterRun(fin)
	}
}

func TestHooks_BeforeModelRewritesThreadThroughTheChain(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("ok")}}
	first := &funcHooks{beforeModel: func(in *runtime.ModelCall) error {
		in.Request.Messages = append(in.Request.Messages, runtime.UserMessage("added by first"))
		return nil
	}}
	var secondSaw int
	second := &funcHooks{beforeModel: func(in *runtime.ModelCall) error {
		secondSaw = len(in.Request.Messages)
		in.Request.Tools = nil
		return nil
	}}
	a := newAgent(t, m, runtime.Config{Hooks: second, Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	run(t, a, t.Context(), &runtime.Request{Hooks: first})
	if secondSaw != 2 {
		t.Errorf("the agent's hook saw %d messages, want 2: the request's hook runs first and its rewrite threads through", secondSaw)
	}
	req := m.Requests()[0]
	if len(req.Messages) != 2 || len(req.Tools) != 0 {
		t.Errorf("model got %d messages and %d tools, want the rewrites", len(req.Messages), len(req.Tools))
	}
}

func TestHooks_BeforeToolRewriteAnswerDenyRequireApproval(t *testing.T) {
	rec := newRecorder()
	h := &funcHooks{beforeTool: func(in *runtime.ToolCallInput) error {
		switch in.Call.ID {
		case "call_0_0":
			in.Call.Arguments = `{"a":100}`
		case "call_0_1":
			in.Answer = &runtime.Output{Text: "cached answer"}
		case "call_0_2":
			in.Deny = "looks like a loop"
		case "call_0_3":
			in.RequireApproval = true
		case "call_0_4":
			in.Call.Arguments = `{"a":"not an int"}`
		}
		return nil
	}}
	tool := schemaTool("t", func(ctx context.Context, c runtime.ToolCall) (runtime.Output, error) {
		return rec.tool("t").Execute(ctx, c)
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"a":0}`, "t", `{"a":1}`, "t", `{"a":2}`, "t", `{"a":3}`, "t", `{"a":4}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{tool}})
	ap := &approvals{by: map[string]runtime.Decision{"call_0_3": {Outcome: runtime.OutcomeApproved}}}
	evs, fin := run(t, a, t.Context(), &runtime.Request{Hooks: h, Approve: ap.approve})
	if diff := cmp.Diff([]string{`{"a":100}`, `{"a":3}`}, rec.got()); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	var got []string
	for _, r := range eventsOf[*runtime.ToolCallResult](evs) {
		got = append(got, r.Result.Output.Text)
	}
	want := []string{`ok {"a":100}`, "cached answer", "tool t was denied: looks like a loop", `ok {"a":3}`, `tool t got, from a hook, invalid arguments: validating root: validating /properties/a: type: not an int has type "string", want "integer"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"call_0_3"}, ap.asked); diff != "" {
		t.Errorf("approvals asked (-want +got):\n%s", diff)
	}
	if args := fin.NewMessages[0].ToolCalls()[0].Arguments; args != `{"a":100}` {
		t.Errorf("transcript records %s, want the rewritten arguments", args)
	}
}

func TestHooks_AfterToolRewritesResults(t *testing.T) {
	h := &funcHooks{afterTool: func(in *runtime.ToolCallOutput) error {
		in.Output.Text = strings.ToUpper(in.Output.Text)
		return nil
	}}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{Text: "secret"}, nil
	})}})
	evs, _ := run(t, a, t.Context(), &runtime.Request{Hooks: h})
	if got := eventsOf[*runtime.ToolCallResult](evs)[0].Result.Output.Text; got != "SECRET" {
		t.Errorf("reported result %q, want the rewrite", got)
	}
	if got := m.Requests()[1].Messages[2].Parts[0].ToolResult.Output.Text; got != "SECRET" {
		t.Errorf("model saw %q, want the rewrite", got)
	}
}

func TestHooks_AnyHookCanStopTheRun(t *testing.T) {
	stop := runtime.Stop("budget", "over budget")
	tests := []struct {
		name       string
		hooks      *funcHooks
		wantModels int
		wantRan    int
	}{
		{"BeforeRun", &funcHooks{beforeRun: func(*runtime.RunInfo) error { return stop }}, 0, 0},
		{"BeforeModel", &funcHooks{beforeModel: func(*runtime.ModelCall) error { return stop }}, 0, 0},
		{"AfterModel", &funcHooks{afterModel: func(*runtime.ModelResponse) error { return stop }}, 1, 0},
		{"BeforeTool", &funcHooks{beforeTool: func(*runtime.ToolCallInput) error { return stop }}, 1, 0},
		{"AfterTool", &funcHooks{afterTool: func(*runtime.ToolCallOutput) error { return stop }}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("never")}}
			a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("t")}})
			_, fin := run(t, a, t.Context(), &runtime.Request{Hooks: tt.hooks})
			se, ok := errors.AsType[*runtime.StopError](fin.Err)
			if fin.Reason != runtime.EndStopped || !ok || se.Reason != "over budget" || se.Hook != "budget" {
				t.Errorf("finished %v %v, want stopped by budget", fin.Reason, fin.Err)
			}
			if m.Calls() != tt.wantModels || len(rec.got()) != tt.wantRan {
				t.Errorf("%d model calls and %d tool runs, want %d and %d", m.Calls(), len(rec.got()), tt.wantModels, tt.wantRan)
			}
		})
	}
}

func TestHooks_PanicsAndErrorsAreLoggedAndTheChainGoesOn(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	panicky := &funcHooks{beforeModel: func(*runtime.ModelCall) error { panic("hook bug") }}
	failing := &funcHooks{beforeModel: func(*runtime.ModelCall) error { return errors.New("hook error") }}
	reached := false
	last := &funcHooks{beforeModel: func(*runtime.ModelCall) error { reached = true; return nil }}
	m := &rt.Model{Steps: []rt.Step{rt.Say("fine")}}
	a := newAgent(t, m, runtime.Config{Logger: log, Hooks: runtime.Chain(log, panicky, failing, last)})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || !reached {
		t.Errorf("finished %v, last hook reached %t", fin.Reason, reached)
	}
	if !strings.Contains(logs.String(), "hook bug") || !strings.Contains(logs.String(), "hook error") {
		t.Errorf("logs do not mention both failures:\n%s", logs.String())
	}
}

type emitter struct{ runtime.NoHooks }

func (emitter) BeforeModel(_ context.Context, in *runtime.ModelCall) error {
	in.Emit("loopdetect.warning", map[string]any{"step": in.Step})
	return nil
}

func TestHooks_EmitSendsAHookEvent(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Hooks: emitter{}})
	evs, _ := run(t, a, t.Context(), &runtime.Request{})
	he := eventsOf[*runtime.HookEvent](evs)
	if len(he) != 1 || he[0].Name != "loopdetect.warning" {
		t.Fatalf("hook events = %+v", he)
	}
	if _, ok := evs[2].(*runtime.HookEvent); !ok {
		t.Errorf("hook event at %d, want right after step_started", 2)
	}
}

func TestClientToolParksTheRunAndResumes(t *testing.T) {
	parked := true
	client := runtime.NewTool(runtime.ToolSpec{Name: "pick_file"}, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		if parked {
			return runtime.Output{}, runtime.ErrInterrupt // the client is not on the stream
		}
		return runtime.Output{Text: "report.pdf"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_file", `{}`), rt.Say("got it")}}
	cfg := runtime.Config{NewID: rt.SequentialIDs()}
	a := newAgent(t, m, cfg)
	evs, fin := run(t, a, t.Context(), &runtime.Request{ClientTools: []runtime.Tool{client}})
	if fin.Reason != runtime.EndAwaitingInput || fin.Pending.Calls[0].State != runtime.CallReady {
		t.Fatalf("finished %v %+v, want awaiting the client's result", fin.Reason, fin.Pending)
	}
	if e := eventsOf[*runtime.ToolCallStarted](evs)[0]; e.Executor != runtime.ExecutorClient {
		t.Errorf("executor %v, want client", e.Executor)
	}
	parked = false
	_, fin = run(t, newAgent(t, m, cfg), t.Context(), &runtime.Request{ClientTools: []runtime.Tool{client}, Resume: fin.Pending, Messages: append([]runtime.Message{runtime.UserMessage("hi")}, fin.NewMessages...)})
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "got it" {
		t.Errorf("resumed run finished %v %q", fin.Reason, fin.FinalText)
	}
}

func TestShutdownParksTheRunWithItsCallsPending(t *testing.T) {
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"n":1}`, "t", `{"n":2}`)}}
	a := guardedAgent(t, m, rec.tool("t"))
	ctx, cancel := context.WithCancelCause(t.Context())
	_, fin := run(t, a, ctx, &runtime.Request{Approve: func(ctx context.Context, r runtime.ApprovalRequest) (runtime.Decision, error) {
		if r.Call.ID == "call_0_0" {
			return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
		}
		cancel(runtime.ErrShutdown)
		<-ctx.Done()
		return runtime.Decision{}, ctx.Err()
	}})
	if fin.Reason != runtime.EndShutdown || fin.Pending == nil {
		t.Fatalf("finished %v, want shutdown with a pending step", fin.Reason)
	}
	states := []runtime.CallState{fin.Pending.Calls[0].State, fin.Pending.Calls[1].State}
	if diff := cmp.Diff([]runtime.CallState{runtime.CallReady, runtime.CallAwaitingApproval}, states); diff != "" {
		t.Errorf("pending states (-want +got):\n%s", diff)
	}
	if len(rec.got()) != 0 {
		t.Error("a call ran during shutdown")
	}
}

func TestHooks_AStoppedStepLeavesEveryCallAResult(t *testing.T) {
	stop := runtime.Stop("test", "enough")
	tests := []struct {
		name  string
		hooks *funcHooks
		ran   int
	}{
		{"BeforeTool on the second call, after an answered first", &funcHooks{beforeTool: func(in *runtime.ToolCallInput) error {
			if in.Call.ID == "call_0_0" {
				in.Answer = &runtime.Output{Text: "cached"}
				return nil
			}
			return stop
		}}, 0},
		{"AfterTool on the first call: later calls do not run", &funcHooks{afterTool: func(*runtime.ToolCallOutput) error { return stop }}, 1},
		{"AfterModel", &funcHooks{afterModel: func(*runtime.ModelResponse) error { return stop }}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"n":1}`, "t", `{"n":2}`, "t", `{"n":3}`)}}
			a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("t")}})
			evs, fin := run(t, a, t.Context(), &runtime.Request{Hooks: tt.hooks})
			if fin.Reason != runtime.EndStopped {
				t.Fatalf("finished %v", fin.Reason)
			}
			if n := len(rec.got()); n != tt.ran {
				t.Errorf("%d calls ran, want %d", n, tt.ran)
			}
			last := fin.NewMessages[len(fin.NewMessages)-1]
			if last.Role != runtime.RoleTool || len(last.Parts) != 3 {
				t.Fatalf("last new message %s, want a result for each of the 3 calls", rt.RenderMessage(last))
			}
			ended := map[string]bool{}
			for _, r := range eventsOf[*runtime.ToolCallResult](evs) {
				ended[r.Result.CallID] = true
			}
			for _, c := range eventsOf[*runtime.ToolCallsCancelled](evs) {
				for _, id := range c.CallIDs {
					ended[id] = true
				}
			}
			if len(ended) != 3 {
				t.Errorf("%d calls got a terminal event, want 3", len(ended))
			}
		})
	}
}

func TestHooks_AfterRunRunsWhenTheConsumerStopsReading(t *testing.T) {
	var got *runtime.RunFinished
	h := &funcHooks{afterRun: func(fin *runtime.RunFinished) { got = fin }}
	m := &rt.Model{Steps: []rt.Step{rt.Say("a", "b", "c")}}
	a := newAgent(t, m, runtime.Config{Hooks: h})
	for ev := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("x")}}) {
		if _, ok := ev.(*runtime.TextDelta); ok {
			break
		}
	}
	if got == nil || got.Reason != runtime.EndCancelled {
		t.Errorf("AfterRun saw %+v, want cancelled", got)
	}
}

// afterRuns is a hook that records every AfterRun; BeforeRun emits a hook event.
type afterRuns struct {
	runtime.NoHooks
	fins []*runtime.RunFinished
}

func (h *afterRuns) BeforeRun(_ context.Context, in *runtime.RunInfo) error {
	in.Emit("before_run", nil)
	return nil
}

func (h *afterRuns) AfterRun(_ context.Context, _ *runtime.RunInfo, fin *runtime.RunFinished) {
	h.fins = append(h.fins, fin)
}

func (h *afterRuns) check(t *testing.T) {
	t.Helper()
	if len(h.fins) != 1 || h.fins[0].Reason != runtime.EndCancelled {
		t.Fatalf("AfterRun ran %d times (%+v), want once, cancelled", len(h.fins), h.fins)
	}
	if !strings.Contains(fmt.Sprint(h.fins[0].Err), "stopped reading") {
		t.Errorf("AfterRun saw error %v, want the consumer's leaving", h.fins[0].Err)
	}
}

func TestHooks_AfterRunRunsWhenTheConsumerStopsOnABeforeRunEvent(t *testing.T) {
	h := &afterRuns{}
	m := &rt.Model{Steps: []rt.Step{rt.Say("never")}}
	a := newAgent(t, m, runtime.Config{Hooks: h})
	for ev := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("x")}}) {
		if _, ok := ev.(*runtime.HookEvent); ok {
			break
		}
	}
	h.check(t)
	if m.Calls() != 0 {
		t.Errorf("the model was called %d times after the consumer left", m.Calls())
	}
}

func TestHooks_AfterRunRunsWhenTheConsumerStopsOnADroppedSteer(t *testing.T) {
	h := &afterRuns{}
	sq := newSteerQueue(t)
	done := runtime.NewTool(runtime.ToolSpec{Name: "done", CompletesRun: true}, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		sq.push(1, "too late", false) // the run completes before it can be applied
		return runtime.Output{Text: "finished"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "done", `{}`)}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{done}, Hooks: h})
	dropped := false
	for ev := range a.Run(t.Context(), sq.attach(&runtime.Request{Messages: []runtime.Message{runtime.UserMessage("x")}})) {
		if s, ok := ev.(*runtime.SteerApplied); ok && s.Dropped {
			dropped = true
			break
		}
	}
	if !dropped {
		t.Fatal("the steer was not reported dropped")
	}
	h.check(t)
}
