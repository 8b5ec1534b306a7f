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

// pointLog records hook calls as "name:Point". It is safe for concurrent use, though a
// run calls its hooks one at a time.
type pointLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *pointLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *pointLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// with returns the calls at point, in order.
func (l *pointLog) with(point string) []string {
	var out []string
	for _, c := range l.get() {
		if strings.HasSuffix(c, ":"+point) {
			out = append(out, c)
		}
	}
	return out
}

// logged is a Hooks that logs every point it is called at, then runs funcHooks' funcs.
type logged struct {
	funcHooks
	name string
	log  *pointLog
}

func (h *logged) rec(point string) { h.log.add(h.name + ":" + point) }

func (h *logged) BeforeRun(ctx context.Context, in *runtime.RunInfo) error {
	h.rec("BeforeRun")
	return h.funcHooks.BeforeRun(ctx, in)
}

func (h *logged) AfterRun(ctx context.Context, in *runtime.RunInfo, fin *runtime.RunFinished) {
	h.rec("AfterRun")
	h.funcHooks.AfterRun(ctx, in, fin)
}

func (h *logged) BeforeModel(ctx context.Context, in *runtime.ModelCall) error {
	h.rec("BeforeModel")
	return h.funcHooks.BeforeModel(ctx, in)
}

func (h *logged) AfterModel(ctx context.Context, in *runtime.ModelResponse) error {
	h.rec("AfterModel")
	return h.funcHooks.AfterModel(ctx, in)
}

func (h *logged) BeforeTool(ctx context.Context, in *runtime.ToolCallInput) error {
	h.rec("BeforeTool")
	return h.funcHooks.BeforeTool(ctx, in)
}

func (h *logged) AfterTool(ctx context.Context, in *runtime.ToolCallOutput) error {
	h.rec("AfterTool")
	return h.funcHooks.AfterTool(ctx, in)
}

func (h *logged) OnEvent(_ context.Context, _ *runtime.RunInfo, ev runtime.Event) {
	switch ev.(type) {
	case *runtime.RunStarted:
		h.rec("OnEvent(RunStarted)")
	case *runtime.RunFinished:
		h.rec("OnEvent(RunFinished)")
	}
}

func TestChain_CallsHooksInOrderAtEveryPoint(t *testing.T) {
	log := &pointLog{}
	a, b := &logged{name: "a", log: log}, &logged{name: "b", log: log}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	ag := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	_, fin := run(t, ag, t.Context(), &runtime.Request{Hooks: runtime.Chain(nil, a, b)})
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
		"a:OnEvent(RunFinished)", "b:OnEvent(RunFinished)",
	}
	if diff := cmp.Diff(want, log.get()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestChain_SkipsNilHooksAndFlattensChains(t *testing.T) {
	log := &pointLog{}
	a, b, c := &logged{name: "a", log: log}, &logged{name: "b", log: log}, &logged{name: "c", log: log}
	h := runtime.Chain(nil, nil, runtime.Chain(nil, a, nil, b), c)
	h.BeforeRun(t.Context(), &runtime.RunInfo{})
	if diff := cmp.Diff([]string{"a:BeforeRun", "b:BeforeRun", "c:BeforeRun"}, log.get()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	runtime.Chain(nil).BeforeRun(t.Context(), &runtime.RunInfo{}) // an empty chain is a no-op
}

// TestChain_TheServersHooksRunBeforeTheAgentsOwn: one order, whichever way a run gets
// its hooks: the request's (a server's interceptors', outermost first) before the
// agent's, at every point.
func TestChain_TheServersHooksRunBeforeTheAgentsOwn(t *testing.T) {
	log := &pointLog{}
	agent := &logged{name: "agent", log: log}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	ag := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: agent})
	server := runtime.Chain(nil, &logged{name: "outer", log: log}, &logged{name: "inner", log: log})
	run(t, ag, t.Context(), &runtime.Request{Hooks: server})
	for _, point := range []string{"BeforeRun", "BeforeModel", "AfterModel", "BeforeTool", "AfterTool", "AfterRun"} {
		got := log.with(point)
		want := []string{"outer:" + point, "inner:" + point, "agent:" + point}
		if point == "BeforeModel" || point == "AfterModel" {
			want = append(want, want...) // two steps
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s calls (-want +got):\n%s", point, diff)
		}
	}
}

func TestChain_BeforeToolAndAfterToolThreadTheirRewrites(t *testing.T) {
	a := &funcHooks{
		beforeTool: func(in *runtime.ToolCallInput) error { in.Call.Arguments = `{"by":"a"}`; return nil },
		afterTool: func(in *runtime.ToolCallOutput) error {
			in.Output = runtime.Output{Text: "a:" + in.Output.String()}
			return nil
		},
	}
	var bSawArgs, bSawOut string
	b := &funcHooks{
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
	ag := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	run(t, ag, t.Context(), &runtime.Request{Hooks: runtime.Chain(nil, a, b)})
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

// TestChain_TheHooksAfterOneSeeWhatItDecided: every hook gets the same *ToolCallInput,
// so one that keeps it reads, once the call has its result, what the hooks after it
// decided.
func TestChain_TheHooksAfterOneSeeWhatItDecided(t *testing.T) {
	var kept []*runtime.ToolCallInput
	first := &funcHooks{beforeTool: func(in *runtime.ToolCallInput) error { kept = append(kept, in); return nil }}
	second := &funcHooks{beforeTool: func(in *runtime.ToolCallInput) error {
		if in.Call.Name == "rm" {
			in.Deny = "not here"
		}
		return nil
	}}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "rm", `{}`, "ls", `{}`), rt.Say("done")}}
	ag := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("rm", rt.Echo), rt.Tool("ls", rt.Echo)}})
	run(t, ag, t.Context(), &runtime.Request{Hooks: runtime.Chain(nil, first, second)})
	if len(kept) != 2 || kept[0].Deny != "not here" || kept[1].Deny != "" {
		t.Errorf("the first hook's inputs read %+v, want rm denied by the second hook and ls not", kept)
	}
}

func TestChain_AStopWinsAndEndsTheChain(t *testing.T) {
	for _, point := range []string{"BeforeModel", "AfterModel", "BeforeTool", "AfterTool"} {
		t.Run(point, func(t *testing.T) {
			log := &pointLog{}
			stop := func() error { return runtime.Stop("b", "stop at "+point) }
			a, b, c := &logged{name: "a", log: log}, &logged{name: "b", log: log}, &logged{name: "c", log: log}
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
			ag := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
			_, fin := run(t, ag, t.Context(), &runtime.Request{Hooks: runtime.Chain(nil, a, b, c)})
			if fin.Reason != runtime.EndStopped {
				t.Fatalf("run ended %v, want stopped", fin.Reason)
			}
			if se, ok := errors.AsType[*runtime.StopError](fin.Err); !ok || se.Hook != "b" || se.Reason != "stop at "+point {
				t.Errorf("RunFinished.Err = %v, want b's stop", fin.Err)
			}
			if got := log.with(point); len(got) != 2 || got[0] != "a:"+point || got[1] != "b:"+point {
				t.Errorf("%s calls %v, want a's and b's only", point, got)
			}
			if got := log.with("AfterRun"); len(got) != 3 {
				t.Errorf("AfterRun calls %v: every hook still sees the stopped run", got)
			}
		})
	}
}
