package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestChain_CallsHooksInOrderAtEveryPoint(t *testing.T) {
	var log callLog
	a, b := &fake{name: "a", log: &log}, &fake{name: "b", log: &log}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	ag, _ := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	_, fin := hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(a, b)})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
	want := []string{
		"a:OnEvent(RunStarted)", "b:OnEvent(RunStarted)",
		"a:BeforeRun", "b:BeforeRun",
		"a:BeforeModel", "b:BeforeModel", "a:AfterModel", "b:AfterModel",
		"a:BeforeTool", "b:BeforeTool", "a:AfterTool", "b:AfterTool",
		"a:BeforeModel", "b:BeforeModel", "a:AfterModel", "b:AfterModel",
		"a:AfterRun", "b:AfterRun",
	}
	if diff := cmp.Diff(want, log.get()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestChain_SkipsNilHooksAndFlattensChains(t *testing.T) {
	var log callLog
	a, b, c := &fake{name: "a", log: &log}, &fake{name: "b", log: &log}, &fake{name: "c", log: &log}
	h := hooks.Chain(nil, hooks.Chain(a, nil, b), c)
	h.BeforeRun(t.Context(), &runtime.RunInfo{})
	if diff := cmp.Diff([]string{"a:BeforeRun", "b:BeforeRun", "c:BeforeRun"}, log.get()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	hooks.Chain().BeforeRun(t.Context(), &runtime.RunInfo{}) // an empty chain is a no-op
}

func TestChain_AnErrorIsLoggedAndTheChainGoesOn(t *testing.T) {
	var log callLog
	a := &fake{name: "a", log: &log, beforeTool: func(*runtime.ToolCallInput) error { return errors.New("a's cache is down") }}
	b := &fake{name: "b", log: &log}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	ag, logs := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	_, fin := hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(a, b)})
	if fin.Reason != runtime.EndCompleted {
		t.Errorf("run ended %v (%v), want completed: an error is not a stop", fin.Reason, fin.Err)
	}
	if got := strings.Join(log.get(), " "); !strings.Contains(got, "a:BeforeTool b:BeforeTool") {
		t.Errorf("calls %s: want b's BeforeTool after a's failed one", got)
	}
	if got := logs.String(); !strings.Contains(got, "hook failed") || !strings.Contains(got, "a's cache is down") {
		t.Errorf("log %q: want the hook's failure", got)
	}
}

func TestChain_APanicIsRecoveredLoggedAndTheChainGoesOn(t *testing.T) {
	var log callLog
	var bSawFinish bool
	a := &fake{name: "a", log: &log,
		afterModel: func(*runtime.ModelResponse) error { panic("a is broken") },
		onEvent:    func(runtime.Event) { panic("a observes badly") },
		afterRun:   func(*runtime.RunFinished) { panic("a cannot finish") },
	}
	b := &fake{name: "b", log: &log, afterRun: func(fin *runtime.RunFinished) { bSawFinish = fin.Reason == runtime.EndCompleted }}
	m := &rt.Model{Steps: []rt.Step{rt.Say("done")}}
	ag, logs := newAgent(t, m, runtime.Config{})
	_, fin := hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(a, b)})
	if fin.Reason != runtime.EndCompleted {
		t.Errorf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
	got := strings.Join(log.get(), " ")
	for _, want := range []string{"a:OnEvent(RunStarted) b:OnEvent(RunStarted)", "a:AfterModel b:AfterModel", "a:AfterRun b:AfterRun"} {
		if !strings.Contains(got, want) {
			t.Errorf("calls %s: want %q", got, want)
		}
	}
	if !bSawFinish {
		t.Error("b's AfterRun did not see the completed run")
	}
	for _, want := range []string{"hook panicked", "a is broken", "a observes badly", "a cannot finish"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

func TestChain_BeforeModelThreadsItsRewrites(t *testing.T) {
	a := &fake{name: "a", beforeModel: func(in *runtime.ModelCall) error {
		in.Request.Messages = append(in.Request.Messages, runtime.UserMessage("from a"))
		return nil
	}}
	var bSaw string
	b := &fake{name: "b", beforeModel: func(in *runtime.ModelCall) error {
		bSaw = in.Request.Messages[len(in.Request.Messages)-1].Text()
		in.Request.Messages = append(in.Request.Messages, runtime.UserMessage("from b"))
		return nil
	}}
	m := &rt.Model{Steps: []rt.Step{rt.Say("done")}}
	ag, _ := newAgent(t, m, runtime.Config{})
	hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(a, b)})
	if bSaw != "from a" {
		t.Errorf("b saw last message %q, want a's rewrite", bSaw)
	}
	var got []string
	for _, msg := range m.Requests()[0].Messages {
		got = append(got, msg.Text())
	}
	if diff := cmp.Diff([]string{"go", "from a", "from b"}, got); diff != "" {
		t.Errorf("model got (-want +got):\n%s", diff)
	}
}

func TestChain_BeforeToolAndAfterToolThreadTheirRewrites(t *testing.T) {
	a := &fake{name: "a",
		beforeTool: func(in *runtime.ToolCallInput) error { in.Call.Arguments = `{"by":"a"}`; return nil },
		afterTool: func(in *runtime.ToolCallOutput) error {
			in.Output = runtime.Output{Text: "a:" + in.Output.String()}
			return nil
		},
	}
	var bSawArgs, bSawOut string
	b := &fake{name: "b",
		beforeTool: func(in *runtime.ToolCallInput) error {
			bSawArgs = in.Call.Arguments
			in.Call.Arguments = `{"by":"b"}`
			return nil
		},
		afterTool: func(in *runtime.ToolCallOutput) error {
			bSawOut = in.Output.String()
			in.Output.Text += " b"
			return nil
		},
	}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	ag, _ := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(a, b)})
	if bSawArgs != `{"by":"a"}` {
		t.Errorf("b's BeforeTool saw %s, want a's rewrite", bSawArgs)
	}
	if bSawOut != `a:{"by":"b"}` {
		t.Errorf("b's AfterTool saw %q, want a's rewrite of the tool's output for b's arguments", bSawOut)
	}
	if got := m.Requests()[1].Messages[2].Parts[0].ToolResult.Output.Text; got != `a:{"by":"b"} b` {
		t.Errorf("model read %q, want both rewrites", got)
	}
}

func TestChain_AStopWinsAndEndsTheChain(t *testing.T) {
	for _, point := range []string{"BeforeModel", "AfterModel", "BeforeTool", "AfterTool"} {
		t.Run(point, func(t *testing.T) {
			var log callLog
			stop := func() error { return runtime.Stop("b", "stop at "+point) }
			a := &fake{name: "a", log: &log}
			b := &fake{name: "b", log: &log}
			c := &fake{name: "c", log: &log}
			switch point {
			case "BeforeModel":
				b.beforeModel = func(*runtime.ModelCall) error { return stop() }
			case "AfterModel":
				b.afterModel = func(*runtime.ModelResponse) error { return stop() }
			case "BeforeTool":
				b.beforeTool = func(*runtime.ToolCallInput) error { return stop() }
			case "AfterTool":
				b.afterTool = func(*runtime.ToolCallOutput) error { return stop() }
			}
			m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
			ag, _ := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
			_, fin := hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(a, b, c)})
			if fin.Reason != runtime.EndStopped {
				t.Fatalf("run ended %v, want stopped", fin.Reason)
			}
			se, ok := errors.AsType[*runtime.StopError](fin.Err)
			if !ok || se.Hook != "b" || se.Reason != "stop at "+point {
				t.Errorf("RunFinished.Err = %v, want b's stop", fin.Err)
			}
			calls := log.get()
			if n := strings.Count(strings.Join(calls, " "), "c:"+point); n != 0 {
				t.Errorf("calls %v: c was called at %s after b stopped", calls, point)
			}
			if got := strings.Join(calls, " "); !strings.Contains(got, "c:AfterRun") {
				t.Errorf("calls %v: every hook's AfterRun still sees the stopped run", calls)
			}
		})
	}
}

func TestChain_OnErrorAsksEveryHookAndAnyRetryWins(t *testing.T) {
	boom := errors.New("model overloaded") // not retryable on its own
	for _, tc := range []struct {
		name    string
		retries []bool
		want    runtime.EndReason
	}{
		{"nobody retries", []bool{false, false, false}, runtime.EndFailed},
		{"the middle hook retries", []bool{false, true, false}, runtime.EndCompleted},
		{"all retry", []bool{true, true, true}, runtime.EndCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log callLog
			var hs []runtime.Hooks
			for i, retry := range tc.retries {
				hs = append(hs, &fake{name: string(rune('a' + i)), log: &log, onError: func(*runtime.ModelFailure) bool { return retry }})
			}
			m := &rt.Model{Steps: []rt.Step{{Err: boom}, rt.Say("done")}}
			ag, _ := newAgent(t, m, runtime.Config{})
			_, fin := hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(hs...)})
			if fin.Reason != tc.want {
				t.Errorf("run ended %v (%v), want %v", fin.Reason, fin.Err, tc.want)
			}
			var asked []string
			for _, c := range log.get() {
				if strings.HasSuffix(c, ":OnError") {
					asked = append(asked, c)
				}
			}
			if diff := cmp.Diff([]string{"a:OnError", "b:OnError", "c:OnError"}, asked); diff != "" {
				t.Errorf("OnError calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChain_RequestHooksRunBeforeTheAgentsHooks(t *testing.T) {
	var log callLog
	m := &rt.Model{Steps: []rt.Step{rt.Say("done")}}
	ag, _ := newAgent(t, m, runtime.Config{Hooks: &fake{name: "agent", log: &log}})
	ctx := hooks.NewContext(context.Background(), &fake{name: "first", log: &log}, &fake{name: "second", log: &log})
	hooktest.Run(t, ag, &runtime.Request{Hooks: hooks.Chain(hooks.FromContext(ctx)...)})
	var got []string
	for _, c := range log.get() {
		if strings.HasSuffix(c, ":BeforeRun") {
			got = append(got, c)
		}
	}
	if diff := cmp.Diff([]string{"first:BeforeRun", "second:BeforeRun", "agent:BeforeRun"}, got); diff != "" {
		t.Errorf("BeforeRun calls (-want +got):\n%s", diff)
	}
}
