package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/hooks/budget"
	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// callWithUsage is a step that calls tool t once and reports usage.
func callWithUsage(step int, in, out int64) rt.Step {
	s := rt.Call(step, "t", `{}`)
	s.Events = append([]runtime.ModelEvent{rt.Usage(in, out)}, s.Events...)
	return s
}

// checkStop checks that fin is a stop by the budget hook for want, announced by a hook
// event.
func checkStop(t *testing.T, evs []runtime.Event, fin *runtime.RunFinished, want budget.Exceeded) {
	t.Helper()
	if fin.Reason != runtime.EndStopped {
		t.Fatalf("run ended %v (%v), want stopped", fin.Reason, fin.Err)
	}
	se, ok := errors.AsType[*runtime.StopError](fin.Err)
	if !ok || se.Hook != budget.Name || se.Reason != want.String() {
		t.Errorf("RunFinished.Err = %v, want the budget's stop %q", fin.Err, want.String())
	}
	var got []budget.Exceeded
	for _, e := range hooktest.HookEvents(evs, budget.ExceededEvent) {
		got = append(got, e.Value.(budget.Exceeded))
	}
	if diff := cmp.Diff([]budget.Exceeded{want}, got); diff != "" {
		t.Errorf("exceeded events (-want +got):\n%s", diff)
	}
}

func TestHook_TokensStopTheRunAfterTheCallThatGoesOver(t *testing.T) {
	h := budget.New(budget.WithMaxTokens(250))
	var tool hooktest.Counter
	m := &rt.Model{Steps: []rt.Step{callWithUsage(0, 100, 20), callWithUsage(1, 150, 30), rt.Say("never")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", tool.Func)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	checkStop(t, evs, fin, budget.Exceeded{Kind: budget.Tokens, Limit: 250, Used: 300})
	if tool.Calls() != 1 {
		t.Errorf("the tool ran %d times, want 1: the calls of the step that went over do not run", tool.Calls())
	}
	if c := hooktest.Events[*runtime.ToolCallsCancelled](evs); len(c) != 1 || c[0].CallIDs[0] != "call_1_0" {
		t.Errorf("cancelled %v, want call_1_0", c)
	}
	if got := fin.Usage.InputTokens + fin.Usage.OutputTokens; got != 300 {
		t.Errorf("the run reports %d tokens, the hook counted 300", got)
	}
}

func TestHook_TokensAtTheLimitAreWithinBudget(t *testing.T) {
	h := budget.New(budget.WithMaxTokens(300))
	m := &rt.Model{Steps: []rt.Step{callWithUsage(0, 100, 20), callWithUsage(1, 150, 30), rt.Say("done")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndCompleted || len(hooktest.Events[*runtime.HookEvent](evs)) != 0 {
		t.Errorf("run ended %v (%v), want completed with no event", fin.Reason, fin.Err)
	}
}

func TestHook_TokensOfAnInterruptedCallCount(t *testing.T) {
	h := budget.New(budget.WithMaxTokens(300))
	inbox := &runtime.Inbox{}
	m := &rt.Model{Steps: []rt.Step{
		{Func: func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
			return func(yield func(runtime.ModelEvent, error) bool) {
				if !yield(rt.Text("thinking aloud…"), nil) || !yield(rt.Usage(500, 10), nil) {
					return
				}
				inbox.Send(runtime.Steer{Seq: 1, Message: runtime.UserMessage("stop that"), Interrupt: true})
				<-ctx.Done()
				yield(runtime.ModelEvent{}, ctx.Err())
			}
		}},
		rt.Say("never"),
	}}
	a := hooktest.Agent(t, m, runtime.Config{Hooks: h})
	req := &runtime.Request{Inbox: inbox}
	evs, fin := hooktest.Run(t, a, req)
	checkStop(t, evs, fin, budget.Exceeded{Kind: budget.Tokens, Limit: 300, Used: 510})
	if m.Calls() != 1 {
		t.Errorf("the model was called %d times, want 1: the next call is over budget", m.Calls())
	}
}

func TestHook_ToolCallsStopTheRunBeforeTheCallThatGoesOver(t *testing.T) {
	h := budget.New(budget.WithMaxToolCalls(2))
	var tool hooktest.Counter
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"n":1}`, "t", `{"n":2}`), rt.Call(1, "t", `{"n":3}`), rt.Say("never")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", tool.Func)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	checkStop(t, evs, fin, budget.Exceeded{Kind: budget.ToolCalls, Limit: 2, Used: 3})
	if tool.Calls() != 2 {
		t.Errorf("the tool ran %d times, want 2", tool.Calls())
	}
}

// cache answers calls whose arguments are {"cached":true}.
type cache struct{ runtime.NoHooks }

func (cache) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	if in.Call.Arguments == `{"cached":true}` {
		in.Answer = &runtime.Output{Text: "from cache"}
	}
	return nil
}

func TestHook_CallsAnsweredByAnEarlierHookDoNotCount(t *testing.T) {
	h := budget.New(budget.WithMaxToolCalls(1))
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"cached":true}`, "t", `{"cached":true}`, "t", `{}`), rt.Say("done")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: runtime.Chain(nil, cache{}, h)})
	evs, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndCompleted {
		t.Errorf("run ended %v (%v), want completed: answered calls are not tool calls", fin.Reason, fin.Err)
	}
	if diff := cmp.Diff([]string{"from cache", "from cache", "{}"}, hooktest.Results(evs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// clock is a fake clock safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestHook_WallTimeStopsTheRunAtTheNextCall(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := budget.New(budget.WithMaxDuration(time.Minute), budget.WithClock(clk.Now))
	slow := rt.Tool("slow", func(ctx context.Context, c runtime.ToolCall) (runtime.Output, error) {
		clk.Advance(40 * time.Second)
		return rt.Echo(ctx, c)
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "slow", `{}`), rt.Call(1, "slow", `{}`, "slow", `{}`), rt.Say("never")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{slow}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	// 0 s: step 0, its call runs to 40 s; step 1 and its calls are prepared at 40 s, and run
	// to 120 s: a running call is not interrupted. Step 2's model call is refused.
	checkStop(t, evs, fin, budget.Exceeded{Kind: budget.Duration, Limit: 60_000, Used: 120_000})
	if m.Calls() != 2 {
		t.Errorf("the model was called %d times, want 2", m.Calls())
	}
}

// slowCall is a step that takes d on clk, then calls tool t.
func slowCall(clk *clock, d time.Duration) rt.Step {
	script := rt.Call(0, "t", `{}`)
	return rt.Step{Func: func(context.Context, *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			clk.Advance(d)
			for _, ev := range script.Events {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}}
}

func TestHook_WallTimeStopsBeforeATool(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := budget.New(budget.WithMaxDuration(time.Second), budget.WithClock(clk.Now))
	m := &rt.Model{Steps: []rt.Step{slowCall(clk, 2*time.Second), rt.Say("never")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h})
	evs, fin := hooktest.Run(t, a, nil)
	checkStop(t, evs, fin, budget.Exceeded{Kind: budget.Duration, Limit: 1000, Used: 2000})
	if n := len(hooktest.Events[*runtime.ToolExecutionStarted](evs)); n != 0 {
		t.Errorf("%d calls ran, want none", n)
	}
}

func TestHook_NoBudgetNeverStops(t *testing.T) {
	h := budget.New(budget.WithMaxTokens(0), budget.WithMaxToolCalls(-1), budget.WithMaxDuration(0))
	m := &rt.Model{Steps: []rt.Step{callWithUsage(0, 1e9, 1e9), callWithUsage(1, 1e9, 1e9), rt.Say("done")}}
	a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h})
	_, fin := hooktest.Run(t, a, nil)
	if fin.Reason != runtime.EndCompleted {
		t.Errorf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
}

func TestHook_BudgetsArePerRun(t *testing.T) {
	h := budget.New(budget.WithMaxTokens(300), budget.WithMaxToolCalls(2))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3 {
				m := &rt.Model{Steps: []rt.Step{callWithUsage(0, 100, 50), callWithUsage(1, 100, 50), rt.Say("done")}}
				a := hooktest.Agent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h})
				_, fin := hooktest.Run(t, a, nil)
				if fin.Reason != runtime.EndCompleted {
					t.Errorf("run ended %v (%v): another run's spending counted", fin.Reason, fin.Err)
				}
			}
		})
	}
	wg.Wait()
}

func TestExceeded(t *testing.T) {
	for _, tc := range []struct {
		e          budget.Exceeded
		text, json string
	}{
		{budget.Exceeded{Kind: budget.Tokens, Limit: 1000, Used: 1234}, "token budget of 1000 exceeded: 1234 tokens used", `{"kind":"tokens","limit":1000,"used":1234}`},
		{budget.Exceeded{Kind: budget.ToolCalls, Limit: 10, Used: 11}, "tool call budget of 10 exceeded: call 11 refused", `{"kind":"tool_calls","limit":10,"used":11}`},
		{budget.Exceeded{Kind: budget.Duration, Limit: 60_000, Used: 65_500}, "time budget of 1m0s exceeded: 1m5.5s elapsed", `{"kind":"duration","limit":60000,"used":65500}`},
		{budget.Exceeded{Kind: "dollars", Limit: 5, Used: 6}, "dollars budget of 5 exceeded: 6 used", `{"kind":"dollars","limit":5,"used":6}`},
	} {
		if got := tc.e.String(); got != tc.text {
			t.Errorf("String() = %q, want %q", got, tc.text)
		}
		b, err := json.Marshal(tc.e)
		if err != nil || string(b) != tc.json {
			t.Errorf("JSON = %s (%v), want %s", b, err, tc.json)
		}
	}
}

// TestHook_KeepsNothingPerRun: one Hook serves many runs, ended every way a run ends;
// what it holds does not grow with them.
func TestHook_KeepsNothingPerRun(t *testing.T) {
	h := budget.New(budget.WithMaxTokens(1000), budget.WithMaxToolCalls(10), budget.WithMaxDuration(time.Hour))
	hooktest.Runs(t, h, 6)
	before := hooktest.Footprint(h)
	hooktest.Runs(t, h, 120)
	if after := hooktest.Footprint(h); after != before {
		t.Errorf("the hook holds %d map entries, slice elements and pointers after 126 runs, %d after 6", after, before)
	}
}
