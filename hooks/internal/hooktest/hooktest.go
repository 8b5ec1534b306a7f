// Package hooktest holds helpers for the tests of the built-in hooks: an agent over a
// scripted model, a run collected to its end, event filters, a buffer to log to, and
// runs of every ending with a measure of what a long-lived hook keeps.
package hooktest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// Agent returns an agent over model with sequential ids; cfg.Model is set to model.
func Agent(t testing.TB, model runtime.Model, cfg runtime.Config) *runtime.Agent {
	t.Helper()
	cfg.Model = model
	if cfg.NewID == nil {
		cfg.NewID = rt.SequentialIDs()
	}
	a, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Run runs req (a user message "go" when it has none) to its end and returns its events
// and its RunFinished.
func Run(t testing.TB, a *runtime.Agent, req *runtime.Request) ([]runtime.Event, *runtime.RunFinished) {
	t.Helper()
	return RunContext(t, context.Background(), a, req)
}

// RunContext is Run with a context.
func RunContext(t testing.TB, ctx context.Context, a *runtime.Agent, req *runtime.Request) ([]runtime.Event, *runtime.RunFinished) {
	t.Helper()
	if req == nil {
		req = &runtime.Request{}
	}
	if req.Messages == nil {
		req.Messages = []runtime.Message{runtime.UserMessage("go")}
	}
	var evs []runtime.Event
	var fin *runtime.RunFinished
	for ev, err := range a.Run(ctx, req) {
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		evs = append(evs, ev)
		if f, ok := ev.(*runtime.RunFinished); ok {
			fin = f
		}
	}
	if fin == nil {
		t.Fatal("the run reported no RunFinished")
	}
	return evs, fin
}

// Events returns the events of type T.
func Events[T runtime.Event](evs []runtime.Event) []T {
	var out []T
	for _, ev := range evs {
		if e, ok := ev.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

// HookEvents returns the hook events named name.
func HookEvents(evs []runtime.Event, name string) []*runtime.HookEvent {
	var out []*runtime.HookEvent
	for _, e := range Events[*runtime.HookEvent](evs) {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// Results returns the outputs of the ToolCallResult events, as the model reads them.
func Results(evs []runtime.Event) []string {
	var out []string
	for _, e := range Events[*runtime.ToolCallResult](evs) {
		out = append(out, e.Result.Output.String())
	}
	return out
}

// Counter is a tool func that counts its calls and echoes the arguments. It is safe for
// concurrent use.
type Counter struct{ n atomic.Int64 }

// Func is the runtime.ToolFunc.
func (c *Counter) Func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
	c.n.Add(1)
	return rt.Echo(ctx, call)
}

// Calls returns the number of calls.
func (c *Counter) Calls() int { return int(c.n.Load()) }
