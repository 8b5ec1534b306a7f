package audit_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/hooks/errorbreaker"
	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newLogger returns a logger whose JSON records, without times, collect in the buffer;
// a duration reads ">0" or "0".
func newLogger() (*slog.Logger, *logtest.Buffer) {
	var b logtest.Buffer
	return slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		switch a.Key {
		case slog.TimeKey:
			return slog.Attr{}
		case "duration":
			if a.Value.Duration() > 0 {
				return slog.String("duration", ">0")
			}
			return slog.String("duration", "0")
		}
		return a
	}})), &b
}

type record = map[string]any

// base returns the fields every record of the test runs has, plus kv.
func base(msg string, kv ...any) record {
	r := record{"level": "INFO", "msg": msg, "run_id": "run_1", "thread_id": "thread_1", "agent": "clerk"}
	for i := 0; i+1 < len(kv); i += 2 {
		r[kv[i].(string)] = kv[i+1]
	}
	return r
}

const secretArgs = `{"card":"4111 1111 1111 1111"}`

func TestHook_OneRecordPerToolCallWithArgumentsAndOutputsRedacted(t *testing.T) {
	log, buf := newLogger()
	h := audit.New(log)
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pay", secretArgs, "nope", `{}`), rt.Say("done")}}
	a := hooktest.Agent(t, m, runtime.Config{Name: "clerk", Tools: []runtime.Tool{rt.Tool("pay", rt.Echo)}, Hooks: h})
	hooktest.Run(t, a, nil)
	unknown := `unknown tool "nope"; the available tools are: pay`
	want := []record{
		base("tool call", "tool", "pay", "call_id", "call_0_0", "executed", true, "is_error", false, "duration", ">0",
			"arguments", "[redacted]", "arguments_bytes", float64(len(secretArgs)), "output", "[redacted]", "output_bytes", float64(len(secretArgs))),
		base("tool call", "tool", "nope", "call_id", "call_0_1", "executed", false, "is_error", true, "duration", "0",
			"arguments", "[redacted]", "arguments_bytes", float64(2), "output", "[redacted]", "output_bytes", float64(len(unknown))),
	}
	if diff := cmp.Diff(want, buf.Records(t)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if strings.Contains(buf.String(), "4111") {
		t.Errorf("the log holds the arguments:\n%s", buf)
	}
}

func TestHook_WithArgumentsAndOutputs(t *testing.T) {
	log, buf := newLogger()
	h := audit.New(log, audit.WithArguments(true), audit.WithOutputs(true))
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pay", secretArgs), rt.Say("done")}}
	tool := rt.Tool("pay", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{Text: "paid"}, nil
	})
	a := hooktest.Agent(t, m, runtime.Config{Name: "clerk", Tools: []runtime.Tool{tool}, Hooks: h})
	hooktest.Run(t, a, nil)
	want := []record{base("tool call", "tool", "pay", "call_id", "call_0_0", "executed", true, "is_error", false, "duration", ">0",
		"arguments", secretArgs, "arguments_bytes", float64(len(secretArgs)), "output", "paid", "output_bytes", float64(4))}
	if diff := cmp.Diff(want, buf.Records(t)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestHook_ApprovalDecisions(t *testing.T) {
	log, buf := newLogger()
	h := audit.New(log, audit.WithArguments(true))
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pay", `{"amount":5}`, "pay", `{"amount":500}`), rt.Say("done")}}
	a := hooktest.Agent(t, m, runtime.Config{
		Name: "clerk", Tools: []runtime.Tool{rt.Tool("pay", rt.Echo)}, Hooks: h,
		Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}},
	})
	approve := func(_ context.Context, req runtime.ApprovalRequest) (runtime.Decision, error) {
		if req.Call.ID == "call_0_0" {
			return runtime.Decision{Outcome: runtime.OutcomeApproved, EditedArguments: `{"amount":4}`}, nil
		}
		return runtime.Decision{Outcome: runtime.OutcomeDenied, Reason: "too much"}, nil
	}
	hooktest.Run(t, a, &runtime.Request{Approve: approve})
	denied := "the call of pay was denied: too much"
	want := []record{
		base("tool call decision", "tool", "pay", "call_id", "call_0_0", "approval_id", "appr_1", "decision", "approved", "decided_by", "client", "reason", "",
			"arguments", `{"amount":4}`, "arguments_bytes", float64(12)),
		base("tool call decision", "tool", "pay", "call_id", "call_0_1", "approval_id", "appr_2", "decision", "denied", "decided_by", "client", "reason", "too much",
			"arguments", `{"amount":500}`, "arguments_bytes", float64(14)),
		base("tool call", "tool", "pay", "call_id", "call_0_0", "executed", true, "is_error", false, "duration", ">0",
			"arguments", `{"amount":4}`, "arguments_bytes", float64(12), "output", "[redacted]", "output_bytes", float64(12)),
		base("tool call", "tool", "pay", "call_id", "call_0_1", "executed", false, "is_error", true, "duration", "0",
			"arguments", `{"amount":500}`, "arguments_bytes", float64(14), "output", "[redacted]", "output_bytes", float64(len(denied))),
	}
	if diff := cmp.Diff(want, buf.Records(t)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// gate answers calls of "cached", denies calls of "rm" and stops the run at "halt".
type gate struct{ runtime.NoHooks }

func (gate) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	switch in.Call.Name {
	case "cached":
		in.Answer = &runtime.Output{Text: "42"}
	case "rm":
		in.Deny = "not here"
	case "halt":
		return runtime.Stop("gate", "halt")
	}
	return nil
}

// TestHook_DecisionsOfOtherHooksWhereverAuditIs: audit records the answers and denials
// of the other hooks, and the calls a stop cancelled, the same wherever it is: before
// them in the chain, after them, or installed server-wide (Request.Hooks), which runs
// before the agent's own hooks.
func TestHook_DecisionsOfOtherHooksWhereverAuditIs(t *testing.T) {
	denied := "tool rm was denied: not here"
	want := []record{
		base("tool call decision", "tool", "cached", "call_id", "call_0_0", "decision", "answered", "decided_by", "hook", "output", "[redacted]", "output_bytes", float64(2)),
		base("tool call", "tool", "cached", "call_id", "call_0_0", "executed", false, "is_error", false, "duration", "0",
			"arguments", "[redacted]", "arguments_bytes", float64(2), "output", "[redacted]", "output_bytes", float64(2)),
		base("tool call decision", "tool", "rm", "call_id", "call_0_1", "decision", "denied", "decided_by", "hook", "reason", "not here"),
		base("tool call", "tool", "rm", "call_id", "call_0_1", "executed", false, "is_error", true, "duration", "0",
			"arguments", "[redacted]", "arguments_bytes", float64(2), "output", "[redacted]", "output_bytes", float64(len(denied))),
		base("tool call", "tool", "ls", "call_id", "call_0_2", "executed", true, "is_error", false, "duration", ">0",
			"arguments", "[redacted]", "arguments_bytes", float64(2), "output", "[redacted]", "output_bytes", float64(2)),
		// The stop at halt reports the answered call's result and cancels every call
		// without one: the halted one and the one after it.
		base("tool call decision", "tool", "cached", "call_id", "call_1_0", "decision", "answered", "decided_by", "hook", "output", "[redacted]", "output_bytes", float64(2)),
		base("tool call", "tool", "cached", "call_id", "call_1_0", "executed", false, "is_error", false, "duration", "0",
			"arguments", "[redacted]", "arguments_bytes", float64(2), "output", "[redacted]", "output_bytes", float64(2)),
		base("tool call cancelled", "tool", "halt", "call_id", "call_1_1", "reason", "the run was stopped"),
		base("tool call cancelled", "tool", "rm", "call_id", "call_1_2", "reason", "the run was stopped"),
	}
	for _, place := range []string{"after the other hooks", "before the other hooks", "server-wide"} {
		t.Run(place, func(t *testing.T) {
			log, buf := newLogger()
			h := audit.New(log)
			m := &rt.Model{Steps: []rt.Step{
				rt.Call(0, "cached", `{}`, "rm", `{}`, "ls", `{}`),
				rt.Call(1, "cached", `{}`, "halt", `{}`, "rm", `{}`),
			}}
			var ts []runtime.Tool
			for _, n := range []string{"cached", "rm", "halt", "ls"} {
				ts = append(ts, rt.Tool(n, rt.Echo))
			}
			cfg := runtime.Config{Name: "clerk", Tools: ts}
			req := &runtime.Request{}
			switch place {
			case "after the other hooks":
				cfg.Hooks = runtime.Chain(nil, gate{}, h)
			case "before the other hooks":
				cfg.Hooks = runtime.Chain(nil, h, gate{})
			case "server-wide":
				cfg.Hooks, req.Hooks = gate{}, h
			}
			_, fin := hooktest.Run(t, hooktest.Agent(t, m, cfg), req)
			if fin.Reason != runtime.EndStopped {
				t.Fatalf("run ended %v, want stopped", fin.Reason)
			}
			if diff := cmp.Diff(want, buf.Records(t)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHook_AnAnswerWinsOverADenial: the record says what the run applied.
func TestHook_AnAnswerWinsOverADenial(t *testing.T) {
	log, buf := newLogger()
	answer := hookFunc(func(in *runtime.ToolCallInput) { in.Answer = &runtime.Output{Text: "42"} })
	deny := hookFunc(func(in *runtime.ToolCallInput) { in.Deny = "no" })
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	a := hooktest.Agent(t, m, runtime.Config{Name: "clerk", Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: runtime.Chain(nil, audit.New(log), deny, answer)})
	evs, _ := hooktest.Run(t, a, nil)
	if got := hooktest.Results(evs); len(got) != 1 || got[0] != "42" {
		t.Fatalf("results %v, want the answer", got)
	}
	if recs := buf.Records(t); len(recs) != 2 || recs[0]["decision"] != "answered" {
		t.Errorf("records %v, want the answer's decision and the call", recs)
	}
}

// hookFunc is a BeforeTool hook.
type hookFunc func(*runtime.ToolCallInput)

func (f hookFunc) BeforeRun(context.Context, *runtime.RunInfo) error                { return nil }
func (f hookFunc) AfterRun(context.Context, *runtime.RunInfo, *runtime.RunFinished) {}
func (f hookFunc) BeforeModel(context.Context, *runtime.ModelCall) error            { return nil }
func (f hookFunc) AfterModel(context.Context, *runtime.ModelResponse) error         { return nil }
func (f hookFunc) AfterTool(context.Context, *runtime.ToolCallOutput) error         { return nil }
func (f hookFunc) OnEvent(context.Context, *runtime.RunInfo, runtime.Event)         {}
func (f hookFunc) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	f(in)
	return nil
}

func TestHook_RecordsACallWhoseAfterToolStoppedTheRun(t *testing.T) {
	log, buf := newLogger()
	h := audit.New(log)
	failing := rt.Tool("t", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.ErrorOutput("broken"), nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("never")}}
	// The breaker comes first and stops the chain at AfterTool; audit still records the call.
	a := hooktest.Agent(t, m, runtime.Config{Name: "clerk", Tools: []runtime.Tool{failing}, Hooks: runtime.Chain(nil, errorbreaker.New(errorbreaker.WithThreshold(1)), h)})
	_, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndStopped {
		t.Fatalf("run ended %v, want stopped", fin.Reason)
	}
	recs := buf.Records(t)
	if len(recs) != 1 || recs[0]["msg"] != "tool call" || recs[0]["is_error"] != true {
		t.Errorf("records %v, want the failed call", recs)
	}
}

func TestHook_ConcurrentRuns(t *testing.T) {
	log, buf := newLogger()
	h := audit.New(log)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`, "t", `{"a":1}`), rt.Say("done")}}
			a := hooktest.Agent(t, m, runtime.Config{Name: "clerk", Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h, ParallelTools: 2})
			hooktest.Run(t, a, nil)
		})
	}
	wg.Wait()
	if n := len(buf.Records(t)); n != 16 {
		t.Errorf("%d records, want 16", n)
	}
}

func TestNew_NilLoggerUsesTheDefault(t *testing.T) {
	log, buf := newLogger()
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log)
	h := audit.New(nil)
	in := &runtime.RunInfo{RunID: "r"}
	h.ForRun(in).OnEvent(t.Context(), in, &runtime.ToolCallResult{Result: runtime.ToolResult{CallID: "c", Name: "t"}, Duration: time.Second})
	if !strings.Contains(buf.String(), `"msg":"tool call"`) {
		t.Errorf("default log %q, want the record", buf)
	}
}

// TestHook_KeepsNothingPerRun: one Hook serves many runs, ended every way a run ends;
// what it holds does not grow with them.
func TestHook_KeepsNothingPerRun(t *testing.T) {
	h := audit.New(slog.New(slog.DiscardHandler), audit.WithArguments(true), audit.WithOutputs(true))
	hooktest.Runs(t, h, 6)
	before := hooktest.Footprint(h)
	hooktest.Runs(t, h, 120)
	if after := hooktest.Footprint(h); after != before {
		t.Errorf("the hook holds %d map entries, slice elements and pointers after 126 runs, %d after 6", after, before)
	}
}

// TestHook_DecisionsOfAParkedStep: a hook's denial in a step that parks (another call of
// it awaits an approval) has no result event, in this run or in the resumed one; audit
// records it once, when the parked run ends.
func TestHook_DecisionsOfAParkedStep(t *testing.T) {
	log, buf := newLogger()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "rm", `{}`, "pay", `{}`), rt.Say("done")}}
	a := hooktest.Agent(t, m, runtime.Config{
		Name: "clerk", Tools: []runtime.Tool{rt.Tool("rm", rt.Echo), rt.Tool("pay", rt.Echo)},
		Hooks:  runtime.Chain(nil, audit.New(log), gate{}),
		Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"pay": {Approval: runtime.ApprovalAsk}}},
	})
	_, fin := hooktest.Run(t, a, &runtime.Request{})
	if fin.Reason != runtime.EndAwaitingInput || fin.Pending == nil {
		t.Fatalf("run ended %v, want parked", fin.Reason)
	}
	want := []record{
		base("tool call decision", "tool", "rm", "call_id", "call_0_0", "decision", "denied", "decided_by", "hook", "reason", "not here"),
	}
	if diff := cmp.Diff(want, buf.Records(t)); diff != "" {
		t.Fatalf("records of the parked run (-want +got):\n%s", diff)
	}

	approve := func(context.Context, runtime.ApprovalRequest) (runtime.Decision, error) {
		return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
	}
	hooktest.Run(t, a, &runtime.Request{Messages: fin.NewMessages, Resume: fin.Pending, Approve: approve})
	for _, r := range buf.Records(t)[1:] {
		if r["call_id"] == "call_0_0" {
			t.Errorf("the resumed run recorded the denied call again: %v", r)
		}
	}
}
