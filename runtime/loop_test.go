package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestRule4_AssemblyKeepsArrivalOrder(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		{Events: []runtime.ModelEvent{
			rt.Reasoning("think "), rt.Reasoning("more"), rt.ReasoningState([]byte("sig")),
			rt.Text("let me "), rt.Text("look"),
			rt.ToolDelta(0, "c1", "look", `{"a":`), rt.ToolDelta(0, "", "", `1}`),
			rt.Text("and "), rt.Text("also"),
			rt.ToolDelta(1, "c2", "look", `{"a":2}`),
			rt.Usage(10, 7), rt.Finish(runtime.FinishToolCalls),
		}},
		rt.Say("done"),
	}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("look", rt.Echo)}})
	evs, fin := run(t, a, t.Context(), &runtime.Request{})
	golden(t, rt.Render(evs))
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "done" {
		t.Errorf("finished %v %q, want completed \"done\"", fin.Reason, fin.FinalText)
	}
}

func TestRule4_ToolFragmentsJoin(t *testing.T) {
	tests := []struct {
		name   string
		events []runtime.ModelEvent
		want   []runtime.ToolCall
	}{{
		name: "by id with the id only once and an index",
		events: []runtime.ModelEvent{
			rt.ToolDelta(0, "a", "t", `{"a"`), rt.ToolDelta(1, "b", "t", `{"a"`),
			rt.ToolDelta(0, "", "", `:1}`), rt.ToolDelta(1, "", "", `:2}`),
		},
		want: []runtime.ToolCall{{ID: "a", Name: "t", Arguments: `{"a":1}`}, {ID: "b", Name: "t", Arguments: `{"a":2}`}},
	}, {
		name: "by id on every fragment, interleaved",
		events: []runtime.ModelEvent{
			rt.ToolDelta(-1, "a", "t", `{"a"`), rt.ToolDelta(-1, "b", "t", `{"a"`),
			rt.ToolDelta(-1, "b", "", `:2}`), rt.ToolDelta(-1, "a", "", `:1}`),
		},
		want: []runtime.ToolCall{{ID: "a", Name: "t", Arguments: `{"a":1}`}, {ID: "b", Name: "t", Arguments: `{"a":2}`}},
	}, {
		name: "index 0 for every call (Ollama)",
		events: []runtime.ModelEvent{
			rt.ToolDelta(0, "a", "t", `{"a":1}`), rt.ToolDelta(0, "b", "t", `{"a":2}`), rt.ToolDelta(0, "c", "t", `{"a":`), rt.ToolDelta(0, "", "", `3}`),
		},
		want: []runtime.ToolCall{{ID: "a", Name: "t", Arguments: `{"a":1}`}, {ID: "b", Name: "t", Arguments: `{"a":2}`}, {ID: "c", Name: "t", Arguments: `{"a":3}`}},
	}, {
		name: "no index and no id after the first fragment",
		events: []runtime.ModelEvent{
			rt.ToolDelta(-1, "a", "t", `{"a"`), rt.ToolDelta(-1, "", "", `:1}`), rt.ToolDelta(-1, "b", "t", `{"a":`), rt.ToolDelta(-1, "", "", `2}`),
		},
		want: []runtime.ToolCall{{ID: "a", Name: "t", Arguments: `{"a":1}`}, {ID: "b", Name: "t", Arguments: `{"a":2}`}},
	}, {
		name: "name after the first fragment",
		events: []runtime.ModelEvent{
			rt.ToolDelta(0, "a", "", `{"a"`), rt.ToolDelta(0, "", "t", `:1}`),
		},
		want: []runtime.ToolCall{{ID: "a", Name: "t", Arguments: `{"a":1}`}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &rt.Model{Steps: []rt.Step{{Events: append(tt.events, rt.Finish(runtime.FinishToolCalls))}, rt.Say("ok")}}
			rec := newRecorder()
			a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("t")}})
			evs, _ := run(t, a, t.Context(), &runtime.Request{})
			var got []runtime.ToolCall
			for _, s := range eventsOf[*runtime.StepFinished](evs)[0].NewMessages[0].ToolCalls() {
				s.Executor = 0
				got = append(got, s)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			// Each call's argument deltas add up to its arguments, and args_done says so.
			deltas := map[string]string{}
			for _, d := range eventsOf[*runtime.ToolCallArgsDelta](evs) {
				deltas[d.CallID] += d.Delta
			}
			for _, d := range eventsOf[*runtime.ToolCallArgsDone](evs) {
				if deltas[d.CallID] != d.Arguments {
					t.Errorf("call %s: deltas add up to %q, args_done says %q", d.CallID, deltas[d.CallID], d.Arguments)
				}
			}
			if n := len(eventsOf[*runtime.ToolCallStarted](evs)); n != len(tt.want) {
				t.Errorf("%d tool_call_started events, want %d", n, len(tt.want))
			}
		})
	}
}

func TestRule7_InvalidArgumentsAreNotRunAndTheModelIsTold(t *testing.T) {
	tests := []struct{ name, args, wantErr string }{
		{"invalid JSON", `{"a":1`, `tool add got invalid arguments: not valid JSON`},
		{"not an object", `[1]`, `must be a JSON object, got an array`},
		{"schema: wrong type", `{"a":"x"}`, `want "integer"`},
		{"schema: missing property", `{}`, `missing properties: ["a"]`},
		{"schema: unknown property", `{"a":1,"b":2}`, `unexpected additional properties ["b"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Bool
			tool := schemaTool("add", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
				ran.Store(true)
				return runtime.Output{Text: "ran"}, nil
			})
			m := &rt.Model{Steps: []rt.Step{rt.Call(0, "add", tt.args), rt.Say("sorry")}}
			a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{tool}})
			evs, fin := run(t, a, t.Context(), &runtime.Request{})
			if ran.Load() {
				t.Error("the tool ran with invalid arguments")
			}
			res := eventsOf[*runtime.ToolCallResult](evs)
			if len(res) != 1 || !res[0].Result.Output.IsError || !strings.Contains(res[0].Result.Output.Text, tt.wantErr) {
				t.Fatalf("results = %+v, want one error containing %q", res, tt.wantErr)
			}
			if len(eventsOf[*runtime.ToolExecutionStarted](evs)) != 0 {
				t.Error("tool_execution_started for a call that must not run")
			}
			// The model's next call sees the error result.
			reqs := m.Requests()
			last := reqs[1].Messages[len(reqs[1].Messages)-1]
			if last.Role != runtime.RoleTool || !last.Parts[0].ToolResult.Output.IsError {
				t.Errorf("second model call's last message = %s, want the error result", rt.RenderMessage(last))
			}
			if fin.Reason != runtime.EndCompleted {
				t.Errorf("run finished %v, want completed", fin.Reason)
			}
		})
	}
}

func TestRule7_UnknownToolGetsAnErrorResult(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "nope", `{}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	evs, _ := run(t, a, t.Context(), &runtime.Request{})
	res := eventsOf[*runtime.ToolCallResult](evs)
	if len(res) != 1 || !strings.Contains(res[0].Result.Output.Text, `unknown tool "nope"; the available tools are: t`) {
		t.Fatalf("results = %+v", res)
	}
}

func TestRule7_PolicyDisabledToolGetsAnErrorResult(t *testing.T) {
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("t")}})
	evs, _ := run(t, a, t.Context(), &runtime.Request{Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"t": {Disabled: true}}}})
	if len(rec.got()) != 0 {
		t.Error("a disabled tool ran")
	}
	res := eventsOf[*runtime.ToolCallResult](evs)
	if len(res) != 1 || res[0].Result.Output.Text != "tool t is disabled for this run" {
		t.Fatalf("results = %+v", res)
	}
	if tools := m.Requests()[0].Tools; len(tools) != 0 {
		t.Errorf("a disabled tool was offered to the model: %v", tools)
	}
}

func TestPolicy_RequestCanTightenButNeverLoosen(t *testing.T) {
	agentPolicy := runtime.Policy{Tools: map[string]runtime.ToolPolicy{"guarded": {Approval: runtime.ApprovalAlways}, "off": {Disabled: true}}}
	loosen := runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAuto}, Tools: map[string]runtime.ToolPolicy{"guarded": {}, "off": {}}}
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "guarded", `{}`, "off", `{}`, "free", `{}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Policy: agentPolicy, Tools: []runtime.Tool{rec.tool("guarded"), rec.tool("off"), rec.tool("free")}})
	evs, fin := run(t, a, t.Context(), &runtime.Request{Policy: loosen, Approve: nil})
	if fin.Reason != runtime.EndAwaitingInput {
		t.Fatalf("finished %v, want awaiting_input: the guarded tool still needs an approval", fin.Reason)
	}
	if reqs := eventsOf[*runtime.ApprovalRequested](evs); len(reqs) != 1 || reqs[0].ToolName != "guarded" {
		t.Errorf("approval requests = %+v, want one for guarded", reqs)
	}
	if got := fin.Pending.Calls[1].Result.Text; got != "tool off is disabled for this run" {
		t.Errorf("off's result = %q, want it still disabled", got)
	}
	if len(rec.got()) != 0 {
		t.Error("a call ran while an approval was pending")
	}

	// Tightening works: the free tool now needs an approval too.
	m2 := &rt.Model{Steps: []rt.Step{rt.Call(0, "free", `{}`)}}
	a2 := newAgent(t, m2, runtime.Config{Tools: []runtime.Tool{rec.tool("free")}})
	evs, fin = run(t, a2, t.Context(), &runtime.Request{Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAlways}}})
	if fin.Reason != runtime.EndAwaitingInput || len(eventsOf[*runtime.ApprovalRequested](evs)) != 1 {
		t.Errorf("tightened: finished %v with %d requests, want awaiting_input with 1", fin.Reason, len(eventsOf[*runtime.ApprovalRequested](evs)))
	}
}

// approvals answers approval requests from a table keyed by call id.
type approvals struct {
	mu    sync.Mutex
	by    map[string]runtime.Decision
	asked []string
}

func (ap *approvals) approve(_ context.Context, req runtime.ApprovalRequest) (runtime.Decision, error) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.asked = append(ap.asked, req.Call.ID)
	d, ok := ap.by[req.Call.ID]
	if !ok {
		return runtime.Decision{}, runtime.ErrInterrupt
	}
	return d, nil
}

func guardedAgent(t *testing.T, m runtime.Model, tools ...runtime.Tool) *runtime.Agent {
	return newAgent(t, m, runtime.Config{Tools: tools, Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}})
}

func TestRule7_ApprovalOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		decision   runtime.Decision
		wantRan    []string
		wantResult string
		wantError  bool
	}{
		{"approve", runtime.Decision{Outcome: runtime.OutcomeApproved}, []string{`{"a":1}`}, `ok {"a":1}`, false},
		{"approve with edited arguments runs them byte for byte", runtime.Decision{Outcome: runtime.OutcomeApproved, EditedArguments: `{ "a" : 42 }`}, []string{`{ "a" : 42 }`}, `ok { "a" : 42 }`, false},
		{"edited arguments are validated again", runtime.Decision{Outcome: runtime.OutcomeApproved, EditedArguments: `{"a":"x"}`}, nil, `the edited arguments are not valid`, true},
		{"deny with a reason", runtime.Decision{Outcome: runtime.OutcomeDenied, Reason: "not today"}, nil, `the call of add was denied: not today`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			m := &rt.Model{Steps: []rt.Step{rt.Call(0, "add", `{"a":1}`), rt.Say("ok")}}
			a := guardedAgent(t, m, schemaTool("add", func(ctx context.Context, c runtime.ToolCall) (runtime.Output, error) {
				return rec.tool("add").Execute(ctx, c)
			}))
			ap := &approvals{by: map[string]runtime.Decision{"call_0_0": tt.decision}}
			evs, fin := run(t, a, t.Context(), &runtime.Request{Approve: ap.approve})
			if diff := cmp.Diff(tt.wantRan, rec.got()); diff != "" {
				t.Errorf("tool ran with (-want +got):\n%s", diff)
			}
			res := eventsOf[*runtime.ToolCallResult](evs)
			if len(res) != 1 || res[0].Result.Output.IsError != tt.wantError || !strings.Contains(res[0].Result.Output.Text, tt.wantResult) {
				t.Errorf("result = %+v, want error=%t containing %q", res, tt.wantError, tt.wantResult)
			}
			resolved := eventsOf[*runtime.ApprovalResolved](evs)
			if len(resolved) != 1 || resolved[0].DecidedBy != runtime.DecidedByClient {
				t.Fatalf("approval_resolved = %+v", resolved)
			}
			if !tt.wantError {
				// What ran is what the transcript records and what approval_resolved said.
				call := fin.NewMessages[0].ToolCalls()[0]
				if call.Arguments != tt.wantRan[0] || resolved[0].Arguments != tt.wantRan[0] {
					t.Errorf("transcript has %q, approval_resolved %q, the tool ran with %q", call.Arguments, resolved[0].Arguments, tt.wantRan[0])
				}
			}
		})
	}
}

func TestRule7_EveryApprovalRequestGoesOutBeforeTheFirstWait(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"n":1}`, "t", `{"n":2}`, "t", `{"n":3}`), rt.Say("ok")}}
	rec := newRecorder()
	a := guardedAgent(t, m, rec.tool("t"))
	var requested atomic.Int32
	var seenAtFirstWait int32 = -1
	// Decisions arrive in reverse order: the broker buffers them by id.
	decided := map[string]chan runtime.Decision{"call_0_0": make(chan runtime.Decision, 1), "call_0_1": make(chan runtime.Decision, 1), "call_0_2": make(chan runtime.Decision, 1)}
	go func() {
		decided["call_0_2"] <- runtime.Decision{Outcome: runtime.OutcomeApproved}
		decided["call_0_1"] <- runtime.Decision{Outcome: runtime.OutcomeDenied}
		decided["call_0_0"] <- runtime.Decision{Outcome: runtime.OutcomeApproved}
	}()
	req := &runtime.Request{
		Hooks: onEvent(func(ev runtime.Event) {
			if _, ok := ev.(*runtime.ApprovalRequested); ok {
				requested.Add(1)
			}
		}),
		Approve: func(ctx context.Context, r runtime.ApprovalRequest) (runtime.Decision, error) {
			if seenAtFirstWait < 0 {
				seenAtFirstWait = requested.Load()
			}
			return <-decided[r.Call.ID], nil
		},
	}
	evs, _ := run(t, a, t.Context(), req)
	if seenAtFirstWait != 3 {
		t.Errorf("%d approval requests were out at the first wait, want 3", seenAtFirstWait)
	}
	if diff := cmp.Diff([]string{`{"n":1}`, `{"n":3}`}, rec.got()); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	golden(t, rt.Render(evs))
}

// onEvent is a hook that sees every event.
type onEventHook struct {
	runtime.NoHooks
	f func(runtime.Event)
}

func (h onEventHook) OnEvent(_ context.Context, _ *runtime.RunInfo, ev runtime.Event) { h.f(ev) }

func onEvent(f func(runtime.Event)) runtime.Hooks { return onEventHook{f: f} }

func TestRule7_ApprovalTimeoutExpiresAndTheModelIsTold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("ok")}}
		a := guardedAgent(t, m, rec.tool("t"))
		start := time.Now()
		evs, fin := run(t, a, t.Context(), &runtime.Request{
			ApprovalTimeout: 30 * time.Second,
			Approve: func(ctx context.Context, _ runtime.ApprovalRequest) (runtime.Decision, error) {
				<-ctx.Done() // nobody answers
				return runtime.Decision{}, ctx.Err()
			},
		})
		if waited := time.Since(start); waited != 30*time.Second {
			t.Errorf("waited %v, want the 30s timeout", waited)
		}
		res := eventsOf[*runtime.ApprovalResolved](evs)
		if len(res) != 1 || res[0].Outcome != runtime.OutcomeExpired || res[0].DecidedBy != runtime.DecidedByTimeout {
			t.Fatalf("approval_resolved = %+v, want expired by timeout", res)
		}
		req := eventsOf[*runtime.ApprovalRequested](evs)[0]
		if !req.ExpiresAt.Equal(start.Add(30 * time.Second)) {
			t.Errorf("expires_at = %v, want start+30s", req.ExpiresAt)
		}
		if len(rec.got()) != 0 {
			t.Error("an expired call ran")
		}
		result := eventsOf[*runtime.ToolCallResult](evs)[0].Result.Output
		if !result.IsError || !strings.Contains(result.Text, "not approved in time") {
			t.Errorf("result = %+v", result)
		}
		if fin.Reason != runtime.EndCompleted {
			t.Errorf("finished %v", fin.Reason)
		}
	})
}

func TestRule7_ParkAndResumeWithoutCallingTheModel(t *testing.T) {
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "free", `{"n":0}`, "t", `{"n":1}`, "t", `{"n":2}`),
		rt.Say("all done"),
	}}
	cfg := runtime.Config{Tools: []runtime.Tool{rec.tool("t"), rec.tool("free")}, Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"t": {Approval: runtime.ApprovalAsk}}}, NewID: rt.SequentialIDs()}
	a := newAgent(t, m, cfg)
	history := []runtime.Message{runtime.UserMessage("go")}
	evs, fin := run(t, a, t.Context(), &runtime.Request{Messages: history}) // Approve nil: park
	if fin.Reason != runtime.EndAwaitingInput || fin.Pending == nil {
		t.Fatalf("finished %v pending=%v, want awaiting_input", fin.Reason, fin.Pending)
	}
	if len(rec.got()) != 0 {
		t.Fatal("calls ran before every decision was in")
	}
	if n := len(fin.Pending.AwaitingApproval()); n != 2 {
		t.Fatalf("%d calls await approval, want 2", n)
	}

	// Resume on a fresh agent (another replica): decisions for both, any order.
	a2 := newAgent(t, m, cfg)
	p := fin.Pending
	ap := &approvals{by: map[string]runtime.Decision{
		"call_0_2": {Outcome: runtime.OutcomeApproved, EditedArguments: `{"n":22}`},
		"call_0_1": {Outcome: runtime.OutcomeDenied, Reason: "no"},
	}}
	evs2, fin2 := run(t, a2, t.Context(), &runtime.Request{Messages: append(history, fin.NewMessages...), Resume: p, Approve: ap.approve})
	if m.Calls() != 2 {
		t.Errorf("model called %d times in all, want 2 (none before the resumed calls ran)", m.Calls())
	}
	if diff := cmp.Diff([]string{`{"n":0}`, `{"n":22}`}, rec.got()); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	if fin2.Reason != runtime.EndCompleted || fin2.FinalText != "all done" {
		t.Errorf("resumed run finished %v %q", fin2.Reason, fin2.FinalText)
	}
	if !eventsOf[*runtime.RunStarted](evs2)[0].Resumed {
		t.Error("run_started.resumed is false")
	}
	golden(t, rt.Render(evs)+"resumed:\n"+rt.Render(evs2))
}

func TestRule7_ResumeRefusesAMismatchedTranscript(t *testing.T) {
	m := &rt.Model{}
	a := newAgent(t, m, runtime.Config{})
	p := &runtime.Pending{Calls: []runtime.PendingCall{{Call: runtime.ToolCall{ID: "x", Name: "t"}, State: runtime.CallReady}}}
	for _, err := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("hi")}, Resume: p}) {
		if !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Fatalf("err = %v, want ErrInvalidRequest", err)
		}
		return
	}
	t.Fatal("no error")
}

func TestRule7_CancelWhileApprovalsAreOpenResolvesThemCancelledAndRunsNone(t *testing.T) {
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"n":1}`, "t", `{"n":2}`)}}
	a := guardedAgent(t, m, rec.tool("t"))
	ctx, cancel := context.WithCancel(t.Context())
	evs, fin := run(t, a, ctx, &runtime.Request{Approve: func(ctx context.Context, _ runtime.ApprovalRequest) (runtime.Decision, error) {
		cancel()
		<-ctx.Done()
		return runtime.Decision{}, ctx.Err()
	}})
	if fin.Reason != runtime.EndCancelled || !errors.Is(fin.Err, context.Canceled) {
		t.Fatalf("finished %v %v, want cancelled", fin.Reason, fin.Err)
	}
	for _, r := range eventsOf[*runtime.ApprovalResolved](evs) {
		if r.Outcome != runtime.OutcomeCancelled || r.DecidedBy != runtime.DecidedByRunEnd {
			t.Errorf("approval_resolved %+v, want cancelled by run end", r)
		}
	}
	if n := len(eventsOf[*runtime.ApprovalResolved](evs)); n != 2 {
		t.Errorf("%d approvals resolved, want 2", n)
	}
	if len(rec.got()) != 0 {
		t.Error("a call ran after the cancel")
	}
	// The transcript stays whole: each call has a result saying it did not run.
	last := fin.NewMessages[len(fin.NewMessages)-1]
	if last.Role != runtime.RoleTool || len(last.Parts) != 2 {
		t.Fatalf("last new message = %s, want both results", rt.RenderMessage(last))
	}
}

func TestRule8_ParallelToolsReportResultsInCallOrder(t *testing.T) {
	var running, peak atomic.Int32
	bothRunning := make(chan struct{}, 2)
	secondDone := make(chan struct{})
	par := runtime.NewTool(runtime.ToolSpec{Name: "p", Parallel: true}, func(ctx context.Context, c runtime.ToolCall) (runtime.Output, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
		}
		switch c.Arguments {
		case `{"n":0}`: // runs alongside n=1, and finishes after it
			bothRunning <- struct{}{}
			<-secondDone
		case `{"n":1}`:
			bothRunning <- struct{}{}
			for len(bothRunning) < 2 && running.Load() < 2 {
				time.Sleep(time.Millisecond)
			}
			defer close(secondDone)
		}
		return runtime.Output{Text: c.Arguments}, nil
	})
	solo := rt.Tool("q", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		if running.Load() != 0 {
			return runtime.Output{}, errors.New("ran alongside a parallel call")
		}
		return runtime.Output{Text: "q"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "p", `{"n":0}`, "p", `{"n":1}`, "p", `{"n":2}`, "q", `{}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{par, solo}, ParallelTools: 2})
	evs, _ := run(t, a, t.Context(), &runtime.Request{})
	var order []string
	for _, r := range eventsOf[*runtime.ToolCallResult](evs) {
		order = append(order, r.Result.CallID)
		if r.Result.Output.IsError {
			t.Errorf("%s: %s", r.Result.CallID, r.Result.Output.Text)
		}
	}
	if diff := cmp.Diff([]string{"call_0_0", "call_0_1", "call_0_2", "call_0_3"}, order); diff != "" {
		t.Errorf("result order (-want +got):\n%s", diff)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak parallelism %d, want the limit 2", p)
	}
}

func TestRule8_ToolTimeoutPanicAndErrorBecomeErrorResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := runtime.NewTool(runtime.ToolSpec{Name: "hang", Timeout: 5 * time.Second}, func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
			<-ctx.Done()
			return runtime.Output{}, ctx.Err()
		})
		boom := rt.Tool("boom", func(context.Context, runtime.ToolCall) (runtime.Output, error) { panic("kaboom") })
		fail := rt.Tool("fail", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
			return runtime.Output{}, errors.New("disk full")
		})
		m := &rt.Model{Steps: []rt.Step{rt.Call(0, "hang", `{}`, "boom", `{}`, "fail", `{}`), rt.Say("ok")}}
		a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{hang, boom, fail}})
		evs, fin := run(t, a, t.Context(), &runtime.Request{})
		var got []string
		for _, r := range eventsOf[*runtime.ToolCallResult](evs) {
			if !r.Result.Output.IsError {
				t.Errorf("%s: not an error result", r.Result.CallID)
			}
			got = append(got, r.Result.Output.Text)
		}
		want := []string{"tool hang timed out after 5s", "tool boom failed: panic: kaboom", "tool fail failed: disk full"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if d := eventsOf[*runtime.ToolCallResult](evs)[0].Duration; d != 5*time.Second {
			t.Errorf("timed-out call's duration = %v, want 5s", d)
		}
		if fin.Reason != runtime.EndCompleted {
			t.Errorf("finished %v, want completed: tool failures never end the run", fin.Reason)
		}
	})
}

func TestRule10_CompletingToolEndsTheRun(t *testing.T) {
	submit := runtime.NewTool(runtime.ToolSpec{Name: "submit", CompletesRun: true}, func(_ context.Context, c runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{Text: "submitted " + c.Arguments}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "submit", `{"x":1}`)}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{submit}})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || fin.FinalText != `submitted {"x":1}` || m.Calls() != 1 {
		t.Errorf("finished %v %q after %d model calls", fin.Reason, fin.FinalText, m.Calls())
	}
}

func TestRule11_StepLimitIsATypedFailure(t *testing.T) {
	steps := make([]rt.Step, 10)
	for i := range steps {
		steps[i] = rt.Call(i, "t", `{}`)
	}
	m := &rt.Model{Steps: steps}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, MaxSteps: 5})
	_, fin := run(t, a, t.Context(), &runtime.Request{MaxSteps: 3})
	if fin.Reason != runtime.EndMaxSteps || !errors.Is(fin.Err, runtime.ErrMaxSteps) {
		t.Errorf("finished %v %v, want max_steps", fin.Reason, fin.Err)
	}
	if m.Calls() != 3 {
		t.Errorf("%d model calls, want the request's lower limit 3", m.Calls())
	}
	// A request cannot raise the agent's limit.
	m2 := &rt.Model{Steps: steps}
	a2 := newAgent(t, m2, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, MaxSteps: 2})
	run(t, a2, t.Context(), &runtime.Request{MaxSteps: 9})
	if m2.Calls() != 2 {
		t.Errorf("%d model calls, want the agent's limit 2", m2.Calls())
	}
}

func TestRule1_CancelWhileStreamingKeepsThePartialMessage(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("half an "), rt.Text("answ"), rt.ToolDelta(0, "c", "t", `{"a"`)}, Block: true}}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	ctx, cancel := context.WithCancel(t.Context())
	req := &runtime.Request{Hooks: onEvent(func(ev runtime.Event) {
		if _, ok := ev.(*runtime.ToolCallStarted); ok {
			cancel()
		}
	})}
	evs, fin := run(t, a, ctx, req)
	if fin.Reason != runtime.EndCancelled {
		t.Fatalf("finished %v, want cancelled", fin.Reason)
	}
	golden(t, rt.Render(evs))
	if len(fin.NewMessages) != 1 || !fin.NewMessages[0].Partial || fin.NewMessages[0].Text() != "half an answ" || len(fin.NewMessages[0].ToolCalls()) != 0 {
		t.Errorf("new messages = %s, want the partial text without the unfinished call", rt.RenderMessage(fin.NewMessages[0]))
	}
}

func TestRule4_MissingFinishReasonIsAnError(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("cut")}}}}
	a := newAgent(t, m, runtime.Config{})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndFailed || !errors.Is(fin.Err, runtime.ErrMissingFinishReason) {
		t.Fatalf("finished %v %v, want failed with ErrMissingFinishReason", fin.Reason, fin.Err)
	}
	if _, ok := errors.AsType[*runtime.ModelError](fin.Err); !ok {
		t.Errorf("error %T is not a *ModelError", fin.Err)
	}
	if !fin.NewMessages[0].Partial || fin.NewMessages[0].Text() != "cut" {
		t.Errorf("partial output not kept: %v", fin.NewMessages)
	}
}

// retryableErr is a model failure that says a retry may help.
type retryableErr struct{}

func (retryableErr) Error() string   { return "503 overloaded" }
func (retryableErr) Retryable() bool { return true }

// TestModelFailure_TheRunCallsTheModelOnceAndFails: retries are the adapter's; the loop
// never calls a failed model again, even for an error that says a retry may help, and
// reports the failure as a *ModelError wrapping the model's error.
func TestModelFailure_TheRunCallsTheModelOnceAndFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		step rt.Step
	}{
		{"before the first event", rt.Step{Err: retryableErr{}}},
		{"after a delta", rt.Step{Events: []runtime.ModelEvent{rt.Text("par")}, Err: retryableErr{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &rt.Model{ModelName: "flaky", Steps: []rt.Step{tc.step, rt.Say("never")}}
			h := &lifecycle{}
			a := newAgent(t, m, runtime.Config{Hooks: h})
			_, fin := run(t, a, t.Context(), &runtime.Request{})
			if fin.Reason != runtime.EndFailed || m.Calls() != 1 {
				t.Fatalf("finished %v (%v) after %d calls, want failed after 1", fin.Reason, fin.Err, m.Calls())
			}
			me, ok := errors.AsType[*runtime.ModelError](fin.Err)
			if !ok || me.Model != "flaky" || !errors.Is(fin.Err, retryableErr{}) {
				t.Errorf("error %v (%T), want a *ModelError of model flaky wrapping the model's error", fin.Err, fin.Err)
			}
			if got := runtime.ErrorType(fin.Err); got != "model_error" {
				t.Errorf("ErrorType = %q, want model_error", got)
			}
			if h.after == nil || h.after.Reason != runtime.EndFailed || h.after.Err != fin.Err {
				t.Errorf("AfterRun saw %+v, want the failure", h.after)
			}
		})
	}
}

func TestCancellationReachesAfterRunAsCancelled(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Block: true}}}
	h := &lifecycle{}
	a := newAgent(t, m, runtime.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	h.onStart = cancel
	_, fin := run(t, a, ctx, &runtime.Request{Hooks: h})
	if fin.Reason != runtime.EndCancelled {
		t.Fatalf("finished %v", fin.Reason)
	}
	if _, ok := errors.AsType[*runtime.ModelError](fin.Err); ok {
		t.Errorf("error %v: a cancel is not a model failure", fin.Err)
	}
	if h.after == nil || h.after.Reason != runtime.EndCancelled {
		t.Errorf("AfterRun saw %+v, want cancelled", h.after)
	}
}

type lifecycle struct {
	runtime.NoHooks
	onStart func()
	after   *runtime.RunFinished
}

func (h *lifecycle) BeforeModel(context.Context, *runtime.ModelCall) error {
	if h.onStart != nil {
		h.onStart()
	}
	return nil
}

func (h *lifecycle) AfterRun(_ context.Context, _ *runtime.RunInfo, fin *runtime.RunFinished) {
	h.after = fin
}

func TestBreakingOutOfTheSequenceCancelsRunningTools(t *testing.T) {
	toolCtxDone := make(chan struct{})
	block := runtime.NewTool(runtime.ToolSpec{Name: "block", Parallel: true}, func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
		<-ctx.Done()
		close(toolCtxDone)
		return runtime.Output{}, ctx.Err()
	})
	quick := runtime.NewTool(runtime.ToolSpec{Name: "quick", Parallel: true}, rt.Echo)
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "block", `{}`, "quick", `{}`)}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{block, quick}, ParallelTools: 2})
	for ev := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("x")}}) {
		if e, ok := ev.(*runtime.ToolExecutionStarted); ok && e.Name == "quick" {
			break // "block" is running now
		}
	}
	select {
	case <-toolCtxDone:
	default:
		t.Fatal("Run returned before the running tool saw its context cancelled")
	}
}

func TestRule4_DeltasNeverSplitACharacter(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{
		rt.Text("Z\xc3"), rt.Text("\xbcrich "), rt.Text("\xe6\x97"), rt.Text("\xa5"), rt.Text("!"),
		rt.Reasoning("\xf0\x9f"), rt.Reasoning("\x98\x80"),
		rt.Finish(runtime.FinishStop),
	}}}}
	a := newAgent(t, m, runtime.Config{})
	evs, fin := run(t, a, t.Context(), &runtime.Request{})
	var text, reasoning []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *runtime.TextDelta:
			text = append(text, e.Delta)
		case *runtime.ReasoningDelta:
			reasoning = append(reasoning, e.Delta)
		}
	}
	if diff := cmp.Diff([]string{"Z", "ürich ", "日", "!"}, text); diff != "" {
		t.Errorf("text deltas (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"😀"}, reasoning); diff != "" {
		t.Errorf("reasoning deltas (-want +got):\n%s", diff)
	}
	if got := fin.FinalText; got != "Zürich 日!" {
		t.Errorf("final text %q", got)
	}
}

func TestToolOutputLongerThanTheLimitIsCutWithANote(t *testing.T) {
	big := rt.Tool("big", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{Text: strings.Repeat("é", 100)}, nil // 200 bytes
	})
	bigJSON := rt.Tool("bigjson", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{JSON: []byte(`{"rows":"` + strings.Repeat("x", 200) + `"}`)}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "big", `{}`, "bigjson", `{}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{big, bigJSON}, MaxToolOutput: 51})
	evs, _ := run(t, a, t.Context(), &runtime.Request{})
	res := eventsOf[*runtime.ToolCallResult](evs)
	if got := res[0].Result.Output.Text; !strings.HasPrefix(got, strings.Repeat("é", 25)+"\n\n[the output was 200 bytes; only the first 50 are shown") {
		t.Errorf("text output %q, want it cut at a character boundary with a note", got)
	}
	if o := res[1].Result.Output; o.JSON != nil || !strings.Contains(o.Text, "only the first 51 are shown") {
		t.Errorf("JSON output %+v, want it cut to text with a note", o)
	}
	if got := m.Requests()[1].Messages; !strings.Contains(got[len(got)-1].Parts[0].ToolResult.Output.Text, "the output was 200 bytes") {
		t.Error("the model did not read the note")
	}
}
