package loopdetect_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/hooks/loopdetect"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// repeat returns a script that calls tool with each of args, one call per step, then says
// "done".
func repeat(tool string, args ...string) *rt.Model {
	var steps []rt.Step
	for i, a := range args {
		steps = append(steps, rt.Call(i, tool, a))
	}
	return &rt.Model{Steps: append(steps, rt.Say("done"))}
}

func times(n int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestHook_BelowTheSoftLimitNothingHappens(t *testing.T) {
	h := loopdetect.New()
	var tool hooktest.Counter
	a := hooktest.Agent(t, repeat("lookup", times(2, `{"q":"x"}`)...), runtime.Config{Tools: []runtime.Tool{rt.Tool("lookup", tool.Func)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndCompleted {
		t.Errorf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
	if n := len(hooktest.Events[*runtime.HookEvent](evs)); n != 0 {
		t.Errorf("%d hook events, want none", n)
	}
	if diff := cmp.Diff(times(2, `{"q":"x"}`), hooktest.Results(evs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestHook_AtTheSoftLimitTheCallRunsAndTheModelIsWarned(t *testing.T) {
	h := loopdetect.New() // soft 3, hard 5
	var tool hooktest.Counter
	m := repeat("lookup", times(4, `{"q":"x"}`)...)
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("lookup", tool.Func)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
	if tool.Calls() != 4 {
		t.Errorf("the tool ran %d times, want 4: warned calls still run", tool.Calls())
	}
	var got []loopdetect.Warning
	for _, e := range hooktest.HookEvents(evs, loopdetect.WarningEvent) {
		got = append(got, e.Value.(loopdetect.Warning))
	}
	want := []loopdetect.Warning{
		{Tool: "lookup", CallID: "call_2_0", Count: 3, SoftLimit: 3, HardLimit: 5},
		{Tool: "lookup", CallID: "call_3_0", Count: 4, SoftLimit: 3, HardLimit: 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	results := hooktest.Results(evs)
	for i, r := range results {
		warned := strings.Contains(r, "[loopdetect]")
		if warned != (i >= 2) {
			t.Errorf("result %d = %q: warned %t, want %t", i, r, warned, i >= 2)
		}
	}
	wantNote := `{"q":"x"}` + "\n\n[loopdetect] You have called lookup with these same arguments 3 times in this run. Repeating the call will not give you anything new: use the results you have, change the arguments, or take another approach. The run will be stopped at 5 identical calls."
	if results[2] != wantNote {
		t.Errorf("third result:\n%s\nwant:\n%s", results[2], wantNote)
	}
	// The model read the note in the transcript.
	req := m.Requests()[3]
	if got := req.Messages[len(req.Messages)-1].Parts[0].ToolResult.Output.String(); got != wantNote {
		t.Errorf("the model read %q, want the note", got)
	}
	// The warning goes out before the call runs.
	var order []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *runtime.HookEvent:
			order = append(order, "warning")
		case *runtime.ToolExecutionStarted:
			order = append(order, "run "+e.CallID)
		}
	}
	if diff := cmp.Diff([]string{"run call_0_0", "run call_1_0", "warning", "run call_2_0", "warning", "run call_3_0"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestHook_AtTheHardLimitTheRunStopsAndTheCallDoesNotRun(t *testing.T) {
	h := loopdetect.New()
	var tool hooktest.Counter
	a := hooktest.Agent(t, repeat("lookup", times(6, `{"q":"x"}`)...), runtime.Config{Tools: []runtime.Tool{rt.Tool("lookup", tool.Func)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndStopped {
		t.Fatalf("run ended %v (%v), want stopped", fin.Reason, fin.Err)
	}
	se, ok := errors.AsType[*runtime.StopError](fin.Err)
	if !ok || se.Hook != loopdetect.Name || se.Reason != "tool lookup was called 5 times with the same arguments (limit 5)" {
		t.Errorf("RunFinished.Err = %v, want loopdetect's stop", fin.Err)
	}
	if tool.Calls() != 4 {
		t.Errorf("the tool ran %d times, want 4", tool.Calls())
	}
	if n := len(hooktest.HookEvents(evs, loopdetect.WarningEvent)); n != 2 {
		t.Errorf("%d warnings, want 2 (calls 3 and 4)", n)
	}
}

func TestHook_ComparesArgumentsCanonically(t *testing.T) {
	h := loopdetect.New(loopdetect.WithSoftLimit(2), loopdetect.WithHardLimit(0))
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "a", `{"x":1,"y":[1,{"p":true,"q":null}]}`, "b", `{"x":1,"y":[1,{"p":true,"q":null}]}`),
		rt.Call(1, "a", "{ \"y\": [1, {\"q\": null, \"p\": true}],\n \"x\": 1.0 }"), // the same as call_0_0
		rt.Call(2, "a", `{"x":2,"y":[1,{"p":true,"q":null}]}`),                      // different
		rt.Call(3, "b", `{"y":[{"p":true,"q":null},1],"x":1}`),                      // order in arrays matters
		rt.Say("done"),
	}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("a", rt.Echo), rt.Tool("b", rt.Echo)}, Hooks: h})
	evs, _ := hooktest.Run(t, a, nil)
	var warned []string
	for _, e := range hooktest.HookEvents(evs, loopdetect.WarningEvent) {
		warned = append(warned, e.Value.(loopdetect.Warning).CallID)
	}
	if diff := cmp.Diff([]string{"call_1_0"}, warned); diff != "" {
		t.Errorf("warned calls (-want +got):\n%s", diff)
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":{"d":2,"c":3}}`, `{"a":{"c":3,"d":2},"b":1}`},
		{" [ 1.0 , \"\\u0041\" ] ", `[1,"A"]`},
		{`not json`, `not json`},
		{`{"a":1`, `{"a":1`},
		{``, ``},
	} {
		if got := string(loopdetect.Canonical(tc.in)); got != tc.want {
			t.Errorf("canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHook_NonJSONArgumentsCompareRaw(t *testing.T) {
	// The runtime never passes arguments that are not JSON to BeforeTool; a hook chain
	// called directly may.
	info := &runtime.RunInfo{RunID: "r"}
	h := loopdetect.New(loopdetect.WithSoftLimit(0), loopdetect.WithHardLimit(2)).ForRun(info)
	call := func(args string) error {
		return h.BeforeTool(t.Context(), &runtime.ToolCallInput{RunInfo: info, Call: runtime.ToolCall{ID: "c", Name: "t", Arguments: args}})
	}
	for _, args := range []string{"a  b", "a b"} {
		if err := call(args); err != nil {
			t.Fatalf("first call of %q: %v", args, err)
		}
	}
	if err := call("a b"); err == nil {
		t.Error("the second call of \"a b\" did not stop the run")
	}
}

func TestHook_JSONResultBecomesTextWithTheNote(t *testing.T) {
	h := loopdetect.New(loopdetect.WithSoftLimit(1), loopdetect.WithHardLimit(0))
	tool := rt.Tool("t", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{JSON: []byte(`{"ok":true}`)}, nil
	})
	a := hooktest.Agent(t, repeat("t", `{}`), runtime.Config{Tools: []runtime.Tool{tool}, Hooks: h})
	evs, _ := hooktest.Run(t, a, nil)
	out := hooktest.Events[*runtime.ToolCallResult](evs)[0].Result.Output
	if out.JSON != nil || !strings.HasPrefix(out.Text, "{\"ok\":true}\n\n[loopdetect] You have called t with these same arguments 1 times") || strings.Contains(out.Text, "stopped") {
		t.Errorf("output %+v, want the JSON as text, then the note, with no hard limit", out)
	}
}

func TestHook_LimitsOff(t *testing.T) {
	h := loopdetect.New(loopdetect.WithSoftLimit(0), loopdetect.WithHardLimit(-1))
	a := hooktest.Agent(t, repeat("t", times(8, `{}`)...), runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndCompleted || len(hooktest.Events[*runtime.HookEvent](evs)) != 0 {
		t.Errorf("run ended %v with %d hook events, want completed with none", fin.Reason, len(hooktest.Events[*runtime.HookEvent](evs)))
	}
}

func TestHook_CountsPerRunAndForgetsEndedRuns(t *testing.T) {
	h := loopdetect.New(loopdetect.WithSoftLimit(3), loopdetect.WithHardLimit(4))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3 {
				a := hooktest.Agent(t, repeat("t", times(3, `{}`)...), runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h})
				evs, fin := hooktest.Run(t, a, nil)
				if fin.Reason != runtime.EndCompleted {
					t.Errorf("run ended %v (%v): counts leaked from another run", fin.Reason, fin.Err)
				}
				if n := len(hooktest.HookEvents(evs, loopdetect.WarningEvent)); n != 1 {
					t.Errorf("%d warnings, want 1", n)
				}
			}
		})
	}
	wg.Wait()
}

// TestHook_KeepsNothingPerRun: one Hook serves many runs, ended every way a run ends;
// what it holds does not grow with them.
func TestHook_KeepsNothingPerRun(t *testing.T) {
	h := loopdetect.New(loopdetect.WithSoftLimit(2), loopdetect.WithHardLimit(3))
	hooktest.Runs(t, h, 6)
	before := hooktest.Footprint(h)
	hooktest.Runs(t, h, 120)
	if after := hooktest.Footprint(h); after != before {
		t.Errorf("the hook holds %d map entries, slice elements and pointers after 126 runs, %d after 6", after, before)
	}
}
