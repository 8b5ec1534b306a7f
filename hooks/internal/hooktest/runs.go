package hooktest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// Runs makes n runs with h among the agent's hooks, ended in each way a run can end:
// completed after repeated and failed tool calls, stopped by a hook, cancelled, parked
// for an approval, left by their consumer at RunStarted and midway. They go two at a
// time, sharing a run id.
func Runs(t testing.TB, h runtime.Hooks, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { oneRun(t, h, i%6) })
		if i%2 == 1 {
			wg.Wait()
		}
	}
	wg.Wait()
}

// stopAtAfterTool stops the run at the first AfterTool.
type stopAtAfterTool struct{ runtime.NoHooks }

func (stopAtAfterTool) AfterTool(context.Context, *runtime.ToolCallOutput) error {
	return runtime.Stop("test", "enough")
}

func oneRun(t testing.TB, h runtime.Hooks, ending int) {
	fail := rt.Tool("fail", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.ErrorOutput("broken"), nil
	})
	m := &rt.Model{Steps: []rt.Step{
		withUsage(rt.Call(0, "t", `{"a":1}`, "fail", `{}`)),
		withUsage(rt.Call(1, "t", `{"a":1}`, "t", `{"a":1}`)),
		rt.Say("done"),
	}}
	cfg := runtime.Config{Name: "hooktest", Tools: []runtime.Tool{rt.Tool("t", rt.Echo), fail}, Hooks: h}
	req := &runtime.Request{RunID: "run_shared", Messages: []runtime.Message{runtime.UserMessage("go")}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	switch ending {
	case 1:
		cfg.Hooks = runtime.Chain(nil, h, stopAtAfterTool{})
	case 2:
		cfg.Policy = runtime.Policy{Tools: map[string]runtime.ToolPolicy{"fail": {Approval: runtime.ApprovalAsk}}}
	}
	a := Agent(t, m, cfg)
	for ev, err := range a.Run(ctx, req) {
		if err != nil {
			t.Errorf("Run: %v", err)
			return
		}
		switch ending {
		case 3:
			if _, ok := ev.(*runtime.ToolExecutionStarted); ok {
				cancel()
			}
		case 4:
			return // at RunStarted
		case 5:
			if _, ok := ev.(*runtime.ToolCallResult); ok {
				return
			}
		}
		if fin, ok := ev.(*runtime.RunFinished); ok && fin.Reason == runtime.EndFailed {
			t.Errorf("run ended %v: %v", fin.Reason, fin.Err)
		}
	}
}

// withUsage adds a usage event to the start of s.
func withUsage(s rt.Step) rt.Step {
	s.Events = append([]runtime.ModelEvent{rt.Usage(10, 5)}, s.Events...)
	return s
}

// Footprint counts what v holds: the entries of every map and the elements of every
// slice reachable from it, and the distinct pointers on the way. Funcs, channels and
// what they hold are not counted. A long-lived hook whose footprint after many runs is
// what it was after a few keeps nothing per run.
func Footprint(v any) int {
	seen := map[string]bool{}
	var walk func(reflect.Value) int
	walk = func(v reflect.Value) int {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return 0
			}
			key := fmt.Sprintf("%s@%x", v.Type(), v.Pointer())
			if seen[key] {
				return 0
			}
			seen[key] = true
			return 1 + walk(v.Elem())
		case reflect.Interface:
			if v.IsNil() {
				return 0
			}
			return walk(v.Elem())
		case reflect.Struct:
			n := 0
			for i := range v.NumField() {
				n += walk(v.Field(i))
			}
			return n
		case reflect.Array:
			n := 0
			for i := range v.Len() {
				n += walk(v.Index(i))
			}
			return n
		case reflect.Slice:
			n := v.Len()
			for i := range v.Len() {
				n += walk(v.Index(i))
			}
			return n
		case reflect.Map:
			n := v.Len()
			for it := v.MapRange(); it.Next(); {
				n += walk(it.Key()) + walk(it.Value())
			}
			return n
		}
		return 0
	}
	return walk(reflect.ValueOf(v))
}
