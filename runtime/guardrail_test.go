package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// testGuard is a guardrail whose checks a test scripts: it trips when trip says so.
type testGuard struct {
	runtime.NoHooks
	spec runtime.GuardSpec
	// trip decides a check; nil passes everything.
	trip func(ctx context.Context, in *runtime.GuardCheck) (*runtime.Trip, error)

	mu   sync.Mutex
	seen []runtime.GuardCheck
}

func (g *testGuard) Guard() runtime.GuardSpec { return g.spec }

func (g *testGuard) Check(ctx context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
	g.mu.Lock()
	g.seen = append(g.seen, *in)
	g.mu.Unlock()
	if g.trip == nil {
		return nil, nil
	}
	return g.trip(ctx, in)
}

func (g *testGuard) checks() []runtime.GuardCheck {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]runtime.GuardCheck(nil), g.seen...)
}

// tripOn trips every check whose text holds word.
func tripOn(word string) func(context.Context, *runtime.GuardCheck) (*runtime.Trip, error) {
	return func(_ context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
		if strings.Contains(in.Text, word) {
			return &runtime.Trip{Reason: "it says " + word, Details: map[string]string{"word": word}}, nil
		}
		return nil, nil
	}
}

// tripped returns the GuardrailError a run ended with, failing the test when it ended
// otherwise.
func tripped(t *testing.T, fin *runtime.RunFinished) *runtime.GuardrailError {
	t.Helper()
	ge, ok := errors.AsType[*runtime.GuardrailError](fin.Err)
	if fin.Reason != runtime.EndStopped || !ok || !errors.Is(fin.Err, runtime.ErrGuardrailTripped) {
		t.Fatalf("finished %v %v, want stopped by a guardrail", fin.Reason, fin.Err)
	}
	return ge
}

func TestGuardrail_InputBlocking(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("never")}}
	g := &testGuard{spec: runtime.GuardSpec{Name: "words", Stages: runtime.GuardInput}, trip: tripOn("secret")}
	a := newAgent(t, m, runtime.Config{Hooks: g})
	_, fin := run(t, a, t.Context(), &runtime.Request{Messages: []runtime.Message{
		runtime.UserMessage("earlier, checked before"), {Role: runtime.RoleAssistant, Parts: []runtime.Part{{Kind: runtime.PartText, Text: "ok"}}}, runtime.UserMessage("tell me the secret"),
	}})
	ge := tripped(t, fin)
	if ge.Guardrail != "words" || ge.Stage != runtime.GuardInput || ge.Reason != "it says secret" || ge.Details["word"] != "secret" {
		t.Errorf("error %+v, want the guardrail, its stage, reason and details", ge)
	}
	if m.Calls() != 0 {
		t.Errorf("the model was called %d times; a blocking input guardrail checks first", m.Calls())
	}
	// The guardrail saw only the new input: the messages after the last reply.
	if cs := g.checks(); len(cs) != 1 || cs[0].Text != "tell me the secret" || len(cs[0].Messages) != 1 {
		t.Errorf("checked %+v, want the one new user message", cs)
	}
}

// A steer is input too: it is checked before the model call that follows it.
func TestGuardrail_InputSteer(t *testing.T) {
	inbox := &runtime.Inbox{}
	m := &rt.Model{Steps: []rt.Step{
		{Func: func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
			if err := inbox.Send(runtime.Steer{Seq: 1, Message: runtime.UserMessage("now the secret")}); err != nil {
				t.Error(err)
			}
			return func(yield func(runtime.ModelEvent, error) bool) {
				for _, ev := range rt.Say("hello").Events {
					if !yield(ev, nil) {
						return
					}
				}
			}
		}},
		rt.Say("never"),
	}}
	g := &testGuard{spec: runtime.GuardSpec{Name: "words", Stages: runtime.GuardInput}, trip: tripOn("secret")}
	a := newAgent(t, m, runtime.Config{Hooks: g})
	_, fin := run(t, a, t.Context(), &runtime.Request{Inbox: inbox})
	tripped(t, fin)
	if m.Calls() != 1 || len(g.checks()) != 2 {
		t.Errorf("%d model calls, %d checks; want the first input and the steer checked, the model called once", m.Calls(), len(g.checks()))
	}
}

// A parallel input guardrail checks while the model streams; its trip cancels the call.
func TestGuardrail_InputParallel(t *testing.T) {
	streaming := make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{{
		Func: func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
			return func(yield func(runtime.ModelEvent, error) bool) {
				if !yield(rt.Text("Sure, the secret is"), nil) {
					return
				}
				close(streaming)
				<-ctx.Done() // a model that would stream on
				yield(runtime.ModelEvent{}, ctx.Err())
			}
		},
	}}}
	g := &testGuard{spec: runtime.GuardSpec{Name: "slow", Stages: runtime.GuardInput, Parallel: true},
		trip: func(ctx context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
			<-streaming // the check is still going when the model has streamed
			return &runtime.Trip{Reason: "jailbreak"}, nil
		}}
	a := newAgent(t, m, runtime.Config{Hooks: g})
	evs, fin := run(t, a, t.Context(), &runtime.Request{})
	if ge := tripped(t, fin); ge.Reason != "jailbreak" {
		t.Errorf("reason %q", ge.Reason)
	}
	// What streamed before the trip reached the consumer, and stays in the transcript.
	if !strings.Contains(rt.Render(evs), "Sure, the secret is") {
		t.Errorf("events do not show the deltas streamed before the trip:\n%s", rt.Render(evs))
	}
	if len(fin.NewMessages) != 1 || !fin.NewMessages[0].Partial {
		t.Errorf("new messages %+v, want the partial reply", fin.NewMessages)
	}
}

// A parallel check that passes lets the run go on once it has: a tool call the model made
// meanwhile runs only then.
func TestGuardrail_InputParallelPasses(t *testing.T) {
	release := make(chan struct{})
	rec := newRecorder()
	called := make(chan struct{})
	call := rt.Call(0, "t", `{}`)
	m := &rt.Model{Steps: []rt.Step{{Func: func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			defer close(called) // the model has answered
			for _, ev := range call.Events {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}}, rt.Say("done")}}
	g := &testGuard{spec: runtime.GuardSpec{Name: "slow", Stages: runtime.GuardInput, Parallel: true},
		trip: func(ctx context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
			<-release
			return nil, nil
		}}
	a := newAgent(t, m, runtime.Config{Hooks: g, Tools: []runtime.Tool{rec.tool("t")}})
	done := make(chan *runtime.RunFinished)
	go func() {
		_, fin := run(t, a, t.Context(), &runtime.Request{})
		done <- fin
	}()
	<-called
	if got := rec.got(); len(got) != 0 {
		t.Errorf("tool ran before the parallel check passed: %v", got)
	}
	close(release)
	if fin := <-done; fin.Reason != runtime.EndCompleted || fin.FinalText != "done" {
		t.Errorf("finished %v %v %q", fin.Reason, fin.Err, fin.FinalText)
	}
}

func TestGuardrail_OutputWithholdsTheAnswer(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("the password is hunter2")}}
	g := &testGuard{spec: runtime.GuardSpec{Name: "leak", Stages: runtime.GuardOutput}, trip: tripOn("hunter2")}
	a := newAgent(t, m, runtime.Config{Hooks: g})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if ge := tripped(t, fin); ge.Stage != runtime.GuardOutput {
		t.Errorf("stage %v", ge.Stage)
	}
	if fin.FinalText != "" || fin.Output != nil {
		t.Errorf("final text %q, output %s: want the answer withheld", fin.FinalText, fin.Output)
	}
	// The transcript keeps what happened.
	if len(fin.NewMessages) != 1 || fin.NewMessages[0].Text() != "the password is hunter2" {
		t.Errorf("new messages %+v, want the reply kept", fin.NewMessages)
	}
}

// A typed run's result is what the output stage checks, as JSON.
func TestGuardrail_OutputOfATypedRun(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "final_answer", `{"city":"Atlantis","celsius":30}`)}}
	g := &testGuard{spec: runtime.GuardSpec{Name: "real", Stages: runtime.GuardOutput}, trip: func(_ context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
		var v struct{ City string }
		if err := json.Unmarshal(in.Output, &v); err != nil || v.City == "Atlantis" {
			return &runtime.Trip{Reason: "no such city"}, err
		}
		return nil, nil
	}}
	a := typedAgent(t, m, runtime.Config{Hooks: g})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	tripped(t, fin)
	if fin.Output != nil || fin.FinalText != "" {
		t.Errorf("output %s, final text %q: want both withheld", fin.Output, fin.FinalText)
	}
}

func TestGuardrail_ToolInput(t *testing.T) {
	for _, tt := range []struct {
		name          string
		afterApproval bool
		action        runtime.GuardAction
	}{
		{"before approval, correct", false, runtime.GuardCorrect},
		{"before approval, end", false, runtime.GuardEnd},
		{"after approval, correct", true, runtime.GuardCorrect},
		{"after approval, end", true, runtime.GuardEnd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			m := &rt.Model{Steps: []rt.Step{rt.Call(0, "shell", `{"cmd":"rm -rf /"}`), rt.Say("ok, I will not")}}
			g := &testGuard{spec: runtime.GuardSpec{Name: "rm", Stages: runtime.GuardToolInput, AfterApproval: tt.afterApproval, OnToolTrip: tt.action}, trip: tripOn("rm -rf")}
			a := newAgent(t, m, runtime.Config{Hooks: g, Tools: []runtime.Tool{rec.tool("shell")},
				Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"shell": {Approval: runtime.ApprovalAlways}}}})
			asked := 0
			_, fin := run(t, a, t.Context(), &runtime.Request{Approve: func(ctx context.Context, req runtime.ApprovalRequest) (runtime.Decision, error) {
				asked++
				return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
			}})
			if got := rec.got(); len(got) != 0 {
				t.Errorf("the tool ran: %v", got)
			}
			if want := map[bool]int{false: 0, true: 1}[tt.afterApproval]; asked != want {
				t.Errorf("asked %d times for an approval, want %d", asked, want)
			}
			res := toolResults(fin)
			if len(res) != 1 || !res[0].IsError {
				t.Fatalf("results %+v, want one error result", res)
			}
			if tt.action == runtime.GuardCorrect {
				if fin.Reason != runtime.EndCompleted || !strings.Contains(res[0].Text, "blocked by the guardrail rm: it says rm -rf") {
					t.Errorf("finished %v, result %q: want the model told, and the run going on", fin.Reason, res[0].Text)
				}
				return
			}
			if ge := tripped(t, fin); ge.Stage != runtime.GuardToolInput || ge.Tool != "shell" || ge.CallID == "" {
				t.Errorf("error %+v, want the tool input stage of shell's call", ge)
			}
		})
	}
}

func TestGuardrail_ToolOutput(t *testing.T) {
	for _, action := range []runtime.GuardAction{runtime.GuardCorrect, runtime.GuardEnd} {
		m := &rt.Model{Steps: []rt.Step{rt.Call(0, "lookup", `{"q":"key"}`, "other", `{"q":"key"}`), rt.Say("done")}}
		g := &testGuard{spec: runtime.GuardSpec{Name: "keys", Stages: runtime.GuardToolOutput, OnToolTrip: action, Tools: []string{"lookup"}}, trip: tripOn("key")}
		a := newAgent(t, m, runtime.Config{Hooks: g, Tools: []runtime.Tool{rt.Tool("lookup", rt.Echo), rt.Tool("other", rt.Echo)}})
		_, fin := run(t, a, t.Context(), &runtime.Request{})
		res := toolResults(fin)
		if len(res) != 2 || !res[0].IsError || res[1].IsError != (action == runtime.GuardEnd) {
			t.Fatalf("action %v: results %+v, want lookup's withheld, and other's (which the guardrail does not check) kept, or cancelled when the run ends", action, res)
		}
		if action == runtime.GuardCorrect {
			if fin.Reason != runtime.EndCompleted || !strings.Contains(res[0].Text, "withheld by the guardrail keys") {
				t.Errorf("finished %v, result %q", fin.Reason, res[0].Text)
			}
			// The model read the correction, never the output.
			last := m.Requests()[1].Messages
			if strings.Contains(rt.RenderMessage(last[len(last)-1]), `{\"q\":\"key\"}`) && !strings.Contains(rt.RenderMessage(last[len(last)-1]), "withheld") {
				t.Errorf("the model read the withheld output: %s", rt.RenderMessage(last[len(last)-1]))
			}
			continue
		}
		if ge := tripped(t, fin); ge.Stage != runtime.GuardToolOutput || ge.Tool != "lookup" {
			t.Errorf("error %+v", ge)
		}
		if m.Calls() != 1 {
			t.Errorf("%d model calls, want the run ended before the model read the result", m.Calls())
		}
	}
}

// A check that fails trips, unless the guardrail fails open; a panic is a failure.
func TestGuardrail_FailClosed(t *testing.T) {
	for _, tt := range []struct {
		name     string
		failOpen bool
		check    func(context.Context, *runtime.GuardCheck) (*runtime.Trip, error)
		want     runtime.EndReason
	}{
		{"error", false, func(context.Context, *runtime.GuardCheck) (*runtime.Trip, error) { return nil, errors.New("down") }, runtime.EndStopped},
		{"panic", false, func(context.Context, *runtime.GuardCheck) (*runtime.Trip, error) { panic("boom") }, runtime.EndStopped},
		{"error, fail open", true, func(context.Context, *runtime.GuardCheck) (*runtime.Trip, error) { return nil, errors.New("down") }, runtime.EndCompleted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &rt.Model{Steps: []rt.Step{rt.Say("hi")}}
			g := &testGuard{spec: runtime.GuardSpec{Name: "flaky", Stages: runtime.GuardInput, FailOpen: tt.failOpen}, trip: tt.check}
			_, fin := run(t, newAgent(t, m, runtime.Config{Hooks: g, Logger: slog.New(slog.DiscardHandler)}), t.Context(), &runtime.Request{})
			if fin.Reason != tt.want {
				t.Fatalf("finished %v %v, want %v", fin.Reason, fin.Err, tt.want)
			}
			if tt.want == runtime.EndStopped && !strings.Contains(tripped(t, fin).Reason, "could not check") {
				t.Errorf("reason %q, want it to say the check failed", tripped(t, fin).Reason)
			}
		})
	}
}

// Guardrails are hooks: installed server-wide (Request.Hooks) they check like the agent's
// own, and every check is a span.
func TestGuardrail_Spans(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{rt.Say("fine")}}
	g := &testGuard{spec: runtime.GuardSpec{Name: "words", Stages: runtime.GuardInput | runtime.GuardOutput}, trip: tripOn("fine")}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), &runtime.Request{Hooks: g})
	tripped(t, fin)
	spans := named(tr.spans(), "guardrail words")
	if len(spans) != 2 {
		t.Fatalf("spans %s, want one per check", spanNames(tr.spans()))
	}
	checkAttrs(t, spans[0], map[string]string{"agentd.guardrail.stage": "input", "agentd.guardrail.tripped": "false"})
	checkAttrs(t, spans[1], map[string]string{"agentd.guardrail.stage": "output", "agentd.guardrail.tripped": "true", "agentd.reason": "it says fine"})
	childOf(t, spans[0], one(t, tr.spans(), "invoke_agent test"))
}

func TestGuardStage(t *testing.T) {
	if s := (runtime.GuardInput | runtime.GuardToolOutput).String(); s != "input|tool_output" {
		t.Errorf("String = %q", s)
	}
	for _, name := range []string{"input", "output", "tool_input", "tool_output"} {
		s, err := runtime.ParseGuardStage(name)
		if err != nil || s.String() != name {
			t.Errorf("ParseGuardStage(%q) = %v, %v", name, s, err)
		}
	}
	if _, err := runtime.ParseGuardStage("model"); err == nil {
		t.Error("ParseGuardStage accepted an unknown stage")
	}
}
