package errorbreaker_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/hooks/errorbreaker"
	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tools are a tool that fails when its arguments say so, one that panics, and one that
// takes an integer.
func tools() []runtime.Tool {
	return []runtime.Tool{
		rt.Tool("t", func(ctx context.Context, c runtime.ToolCall) (runtime.Output, error) {
			if c.Arguments == `{"fail":true}` {
				return runtime.Output{}, errors.New("backend down")
			}
			return rt.Echo(ctx, c)
		}),
		rt.Tool("panics", func(context.Context, runtime.ToolCall) (runtime.Output, error) { panic("oops") }),
		runtime.NewTool(runtime.ToolSpec{Name: "typed", Parameters: []byte(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}, rt.Echo),
	}
}

const (
	fail = `{"fail":true}`
	ok   = `{}`
)

// script is one step per (tool, arguments) pair, then "done".
func script(nameArgs ...string) *rt.Model {
	var steps []rt.Step
	for i := 0; i+1 < len(nameArgs); i += 2 {
		steps = append(steps, rt.Call(i/2, nameArgs[i], nameArgs[i+1]))
	}
	return &rt.Model{Steps: append(steps, rt.Say("done"))}
}

func TestHook_StopsAtTheThresholdOfFailuresInARow(t *testing.T) {
	h := errorbreaker.New()
	// Five failures of different kinds: an error, a panic, invalid arguments, an unknown
	// tool, an error again.
	m := script("t", fail, "panics", ok, "typed", `{"n":"x"}`, "nope", ok, "t", fail, "t", ok)
	a := hooktest.Agent(t, m, runtime.Config{Tools: tools(), Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndStopped {
		t.Fatalf("run ended %v (%v), want stopped", fin.Reason, fin.Err)
	}
	se, isStop := errors.AsType[*runtime.StopError](fin.Err)
	if want := "5 tool calls failed in a row; the last was t (call call_4_0)"; !isStop || se.Hook != errorbreaker.Name || se.Reason != want {
		t.Errorf("RunFinished.Err = %v, want errorbreaker's stop %q", fin.Err, want)
	}
	if n := len(hooktest.Events[*runtime.ToolCallResult](evs)); n != 5 {
		t.Errorf("%d results reported, want 5: the tripping result is reported too", n)
	}
	if m.Calls() != 5 {
		t.Errorf("the model was called %d times, want 5: no turn after the breaker trips", m.Calls())
	}
}

func TestHook_ASuccessResetsTheCount(t *testing.T) {
	h := errorbreaker.New(errorbreaker.WithThreshold(3))
	m := script("t", fail, "t", fail, "t", ok, "t", fail, "t", fail, "t", ok)
	a := hooktest.Agent(t, m, runtime.Config{Tools: tools(), Hooks: h})
	_, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndCompleted {
		t.Errorf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
}

func TestHook_FailuresInOneStepCount(t *testing.T) {
	h := errorbreaker.New(errorbreaker.WithThreshold(3))
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", fail, "t", fail, "t", fail), rt.Say("never")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: tools(), Hooks: h})
	_, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndStopped || m.Calls() != 1 {
		t.Errorf("run ended %v after %d model calls, want stopped after 1", fin.Reason, m.Calls())
	}
}

func TestHook_ThresholdOneAndOff(t *testing.T) {
	for _, tc := range []struct {
		threshold int
		want      runtime.EndReason
	}{{1, runtime.EndStopped}, {0, runtime.EndCompleted}, {-1, runtime.EndCompleted}} {
		h := errorbreaker.New(errorbreaker.WithThreshold(tc.threshold))
		a := hooktest.Agent(t, script("t", fail, "t", fail, "t", fail, "t", fail, "t", fail, "t", fail), runtime.Config{Tools: tools(), Hooks: h})
		if _, fin := hooktest.Run(t, a, nil); fin.Reason != tc.want {
			t.Errorf("threshold %d: run ended %v, want %v", tc.threshold, fin.Reason, tc.want)
		}
	}
}

func TestHook_CountsPerRun(t *testing.T) {
	h := errorbreaker.New(errorbreaker.WithThreshold(3))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3 {
				a := hooktest.Agent(t, script("t", fail, "t", fail), runtime.Config{Tools: tools(), Hooks: h})
				if _, fin := hooktest.Run(t, a, nil); fin.Reason != runtime.EndCompleted {
					t.Errorf("run ended %v (%v): another run's failures counted", fin.Reason, fin.Err)
				}
			}
		})
	}
	wg.Wait()
}

// TestHook_KeepsNothingPerRun: one Hook serves many runs, ended every way a run ends;
// what it holds does not grow with them.
func TestHook_KeepsNothingPerRun(t *testing.T) {
	h := errorbreaker.New(errorbreaker.WithThreshold(2))
	hooktest.Runs(t, h, 6)
	before := hooktest.Footprint(h)
	hooktest.Runs(t, h, 120)
	if after := hooktest.Footprint(h); after != before {
		t.Errorf("the hook holds %d map entries, slice elements and pointers after 126 runs, %d after 6", after, before)
	}
}
