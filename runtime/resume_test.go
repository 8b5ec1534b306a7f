package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// parkOnApproval runs a step calling t (which asks for an approval) and parks it.
func parkOnApproval(t *testing.T, m *rt.Model, tools ...runtime.Tool) ([]runtime.Message, *runtime.RunFinished) {
	t.Helper()
	a := guardedAgent(t, m, tools...)
	history := []runtime.Message{runtime.UserMessage("go")}
	_, fin := run(t, a, t.Context(), &runtime.Request{Messages: history})
	if fin.Reason != runtime.EndAwaitingInput || len(fin.Pending.AwaitingApproval()) == 0 {
		t.Fatalf("finished %v %+v, want parked on an approval", fin.Reason, fin.Pending)
	}
	return append(history, fin.NewMessages...), fin
}

// A resumed call is checked against the agent's policy as it is where the run resumes:
// a tool disabled since the run parked does not run, even with the client's approval.
func TestResume_ToolDisabledSinceTheParkDoesNotRun(t *testing.T) {
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "save", `{"n":1}`), rt.Say("done")}}
	history, fin := parkOnApproval(t, m, rec.tool("save"))

	// The replica that resumes has the tool disabled.
	a2 := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("save")}, Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"save": {Disabled: true}}}})
	ap := &approvals{by: map[string]runtime.Decision{"call_0_0": {Outcome: runtime.OutcomeApproved}}}
	evs, fin2 := run(t, a2, t.Context(), &runtime.Request{Messages: history, Resume: fin.Pending, Approve: ap.approve})
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("the disabled tool ran with %v", got)
	}
	res := eventsOf[*runtime.ToolCallResult](evs)
	if len(res) != 1 || !res[0].Result.Output.IsError || !strings.Contains(res[0].Result.Output.Text, "disabled") {
		t.Errorf("result = %+v, want an error saying the tool is disabled", res)
	}
	if fin2.Reason != runtime.EndCompleted {
		t.Errorf("resumed run finished %v, want completed (the model reads the error)", fin2.Reason)
	}
}

// BeforeTool hooks see a resumed call again, and may deny it.
func TestResume_BeforeToolHooksRunAgain(t *testing.T) {
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "save", `{"n":1}`), rt.Say("done")}}
	history, fin := parkOnApproval(t, m, rec.tool("save"))

	var seen []string
	deny := &funcHooks{beforeTool: func(in *runtime.ToolCallInput) error {
		seen = append(seen, in.Call.ID)
		in.Deny = "not on this replica"
		return nil
	}}
	a2 := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("save")}, Hooks: deny, Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}})
	ap := &approvals{by: map[string]runtime.Decision{"call_0_0": {Outcome: runtime.OutcomeApproved}}}
	evs, _ := run(t, a2, t.Context(), &runtime.Request{Messages: history, Resume: fin.Pending, Approve: ap.approve})
	if diff := cmp.Diff([]string{"call_0_0"}, seen); diff != "" {
		t.Errorf("BeforeTool saw (-want +got):\n%s", diff)
	}
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("the denied call ran with %v", got)
	}
	res := eventsOf[*runtime.ToolCallResult](evs)
	if len(res) != 1 || !strings.Contains(res[0].Result.Output.Text, "not on this replica") {
		t.Errorf("result = %+v, want the hook's denial", res)
	}
}

// A call approved before the run parked (on another call's approval) is not asked again
// while the approval still binds its arguments; a call that needed no approval then but
// does now is asked.
func TestResume_ApprovalsCarryOverAndNewPolicyIsAsked(t *testing.T) {
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "a", `{"n":1}`, "b", `{"n":2}`, "free", `{"n":3}`), rt.Say("done")}}
	cfg := runtime.Config{
		Tools:  []runtime.Tool{rec.tool("a"), rec.tool("b"), rec.tool("free")},
		Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"a": {Approval: runtime.ApprovalAsk}, "b": {Approval: runtime.ApprovalAsk}}},
	}
	a := newAgent(t, m, cfg)
	history := []runtime.Message{runtime.UserMessage("go")}
	first := &approvals{by: map[string]runtime.Decision{"call_0_0": {Outcome: runtime.OutcomeApproved}}} // b parks
	_, fin := run(t, a, t.Context(), &runtime.Request{Messages: history, Approve: first.approve})
	if fin.Reason != runtime.EndAwaitingInput {
		t.Fatalf("finished %v, want parked on b", fin.Reason)
	}
	if c := fin.Pending.Calls[0]; c.State != runtime.CallReady || !c.Approved {
		t.Fatalf("pending a = %+v, want ready and approved", c)
	}

	// Where the run resumes, free needs an approval too.
	cfg.Policy.Tools["free"] = runtime.ToolPolicy{Approval: runtime.ApprovalAsk}
	a2 := newAgent(t, m, cfg)
	second := &approvals{by: map[string]runtime.Decision{
		"call_0_1": {Outcome: runtime.OutcomeApproved},
		"call_0_2": {Outcome: runtime.OutcomeApproved},
	}}
	_, fin2 := run(t, a2, t.Context(), &runtime.Request{Messages: append(history, fin.NewMessages...), Resume: fin.Pending, Approve: second.approve})
	if diff := cmp.Diff([]string{"call_0_1", "call_0_2"}, second.asked); diff != "" {
		t.Errorf("asked on resume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`{"n":1}`, `{"n":2}`, `{"n":3}`}, rec.got()); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	if fin2.Reason != runtime.EndCompleted {
		t.Errorf("resumed run finished %v", fin2.Reason)
	}
}

// A steer queued while the run waits for a decision, and not yet applied when it parks,
// travels in the Pending and enters the transcript where the run resumes.
func TestResume_SteersQueuedAtTheParkAreAppliedOnResume(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "save", `{"n":1}`), rt.Say("saved"), rt.Say("and more")}}
	a := guardedAgent(t, m, newRecorder().tool("save"))
	var inbox runtime.Inbox
	history := []runtime.Message{runtime.UserMessage("go")}
	evs, fin := run(t, a, t.Context(), &runtime.Request{
		Messages: history,
		Inbox:    &inbox,
		Approve: func(context.Context, runtime.ApprovalRequest) (runtime.Decision, error) {
			if err := inbox.Send(runtime.Steer{Seq: 7, Message: runtime.UserMessage("also note the date")}); err != nil {
				t.Errorf("Send while waiting for a decision = %v", err)
			}
			return runtime.Decision{}, runtime.ErrInterrupt
		},
	})
	if fin.Reason != runtime.EndAwaitingInput || len(fin.Pending.Steers) != 1 || fin.Pending.Steers[0].Seq != 7 {
		t.Fatalf("finished %v, pending steers %+v; want parked with the steer", fin.Reason, fin.Pending)
	}
	if n := len(eventsOf[*runtime.SteerApplied](evs)); n != 0 {
		t.Errorf("%d steer_applied before the resume, want none (the steer is neither applied nor dropped)", n)
	}

	ap := &approvals{by: map[string]runtime.Decision{"call_0_0": {Outcome: runtime.OutcomeApproved}}}
	evs2, fin2 := run(t, guardedAgent(t, m, newRecorder().tool("save")), t.Context(), &runtime.Request{Messages: append(history, fin.NewMessages...), Resume: fin.Pending, Approve: ap.approve})
	applied := eventsOf[*runtime.SteerApplied](evs2)
	if len(applied) != 1 || applied[0].Seq != 7 || applied[0].Dropped {
		t.Fatalf("steer_applied on resume = %+v, want seq 7 applied", applied)
	}
	var texts []string
	for _, msg := range fin2.NewMessages {
		if msg.Role == runtime.RoleUser {
			texts = append(texts, msg.Text())
		}
	}
	if diff := cmp.Diff([]string{"also note the date"}, texts); diff != "" {
		t.Errorf("user messages the resumed run added (-want +got):\n%s", diff)
	}
}

// A client tool whose result is awaited when the server shuts down is not failed: it
// parks as pending, so that the replica that resumes the run takes the client's result.
func TestShutdown_ClientToolAwaitedParksAsPending(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	client := runtime.NewTool(runtime.ToolSpec{Name: "pick_file"}, func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
		cancel(runtime.ErrShutdown)
		<-ctx.Done()
		return runtime.Output{}, ctx.Err()
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_file", `{}`), rt.Say("got it")}}
	a := newAgent(t, m, runtime.Config{})
	history := []runtime.Message{runtime.UserMessage("go")}
	evs, fin := run(t, a, ctx, &runtime.Request{Messages: history, ClientTools: []runtime.Tool{client}})
	if fin.Reason != runtime.EndShutdown || fin.Pending == nil || len(fin.Pending.Calls) != 1 {
		t.Fatalf("finished %v %+v, want shutdown with the call pending", fin.Reason, fin.Pending)
	}
	if c := fin.Pending.Calls[0]; c.State != runtime.CallReady {
		t.Errorf("pending call %+v, want ready (awaiting the client's result)", c)
	}
	if n := len(eventsOf[*runtime.ToolCallResult](evs)); n != 0 {
		t.Errorf("%d tool results, want none: the call did not fail", n)
	}
	answer := runtime.NewTool(runtime.ToolSpec{Name: "pick_file"}, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{Text: "report.pdf"}, nil
	})
	evs2, fin2 := run(t, newAgent(t, m, runtime.Config{}), t.Context(), &runtime.Request{Messages: append(history, fin.NewMessages...), Resume: fin.Pending, ClientTools: []runtime.Tool{answer}})
	res := eventsOf[*runtime.ToolCallResult](evs2)
	if len(res) != 1 || res[0].Result.Output.Text != "report.pdf" || fin2.Reason != runtime.EndCompleted {
		t.Errorf("resumed: results %+v, finished %v", res, fin2.Reason)
	}
}

// A steer that arrives as the run is about to complete continues the run instead of
// being lost, and once the run has closed its inbox, Send refuses every steer.
func TestInbox_ClosesOnlyWhenNothingIsQueued(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("first"), rt.Say("second")}}
	a := newAgent(t, m, runtime.Config{})
	var inbox runtime.Inbox
	var sendErrs []error // of the steers sent as each step finished
	evs, fin := run(t, a, t.Context(), &runtime.Request{
		Inbox: &inbox,
		Hooks: onEvent(func(ev runtime.Event) {
			if _, ok := ev.(*runtime.StepFinished); ok && m.Calls() == 1 {
				// After the step's model call, before the run looks for steers to go on.
				sendErrs = append(sendErrs, inbox.Send(runtime.Steer{Seq: 3, Message: runtime.UserMessage("one more thing")}))
			}
		}),
	})
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "second" {
		t.Fatalf("finished %v %q, want completed after a second step", fin.Reason, fin.FinalText)
	}
	if len(sendErrs) != 1 || sendErrs[0] != nil {
		t.Errorf("Send as the first step finished = %v, want accepted", sendErrs)
	}
	if applied := eventsOf[*runtime.SteerApplied](evs); len(applied) != 1 || applied[0].Seq != 3 || applied[0].Dropped {
		t.Errorf("steer_applied = %+v, want the late steer applied", applied)
	}
	if err := inbox.Send(runtime.Steer{Seq: 4, Message: runtime.UserMessage("too late")}); !errors.Is(err, runtime.ErrInboxClosed) {
		t.Errorf("Send after the run completed = %v, want ErrInboxClosed", err)
	}
}

// A client tool's result that came in just as the server shut down is the call's result:
// it was acked, so it is used, not parked.
func TestShutdown_AClientToolResultThatCameInIsKept(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	client := runtime.NewTool(runtime.ToolSpec{Name: "pick_file"}, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		cancel(runtime.ErrShutdown)
		return runtime.Output{Text: "report.pdf"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_file", `{}`), rt.Say("got it")}}
	_, fin := run(t, newAgent(t, m, runtime.Config{}), ctx, &runtime.Request{ClientTools: []runtime.Tool{client}})
	if fin.Reason != runtime.EndShutdown || fin.Pending == nil || len(fin.Pending.Calls) != 1 {
		t.Fatalf("finished %v %+v, want shutdown with the call's step pending", fin.Reason, fin.Pending)
	}
	if c := fin.Pending.Calls[0]; c.State != runtime.CallDone || c.Result.Text != "report.pdf" {
		t.Errorf("pending call %+v, want done with the client's result", c)
	}
}

// Tools read the run they serve from their context; parallel tools may do so at once.
func TestRunInfoFromContext_ToolsSeeTheRun(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	tool := runtime.NewTool(runtime.ToolSpec{Name: "who", Parallel: true}, func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
		info := runtime.RunInfoFromContext(ctx)
		info.Emit("ignored", 1) // only hooks emit; from a tool it does nothing
		mu.Lock()
		seen = append(seen, info.Caller+"/"+info.ThreadID)
		mu.Unlock()
		return runtime.Output{Text: "ok"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "who", `{}`, "who", `{}`, "who", `{}`), rt.Say("done")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{tool}, ParallelTools: 3})
	evs, _ := run(t, a, t.Context(), &runtime.Request{Caller: "token:ab12", ThreadID: "thread_1"})
	if diff := cmp.Diff([]string{"token:ab12/thread_1", "token:ab12/thread_1", "token:ab12/thread_1"}, seen); diff != "" {
		t.Errorf("tools saw (-want +got):\n%s", diff)
	}
	if n := len(eventsOf[*runtime.HookEvent](evs)); n != 0 {
		t.Errorf("%d hook events from tools, want none", n)
	}
	if runtime.RunInfoFromContext(t.Context()) != nil {
		t.Error("a RunInfo outside a run")
	}
}
