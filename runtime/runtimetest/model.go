// Package runtimetest provides fakes for testing code built on the runtime: a scripted
// [Model], tools from funcs, sequential ids and an event renderer for golden files. The
// benchmark workload's replay is a model of its own, in runtime/llm/workload.
package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/agentd/agentd/runtime"
)

// Model is a scripted runtime.Model: call i replays Steps[i]. It records every request it
// receives. It is safe for concurrent use.
type Model struct {
	// ModelName is returned by Name; empty means "test:scripted".
	ModelName string
	// Steps are the scripted calls, in order.
	Steps []Step
	// Native makes it a runtime.NativeOutputModel that can constrain its replies to a
	// schema (it replays its script all the same).
	Native bool
	// Forces makes it a runtime.ForcedToolModel that can be made to call a named tool.
	Forces bool

	mu       sync.Mutex
	calls    int
	requests []*runtime.ModelRequest
}

// Step is one scripted model call.
type Step struct {
	// Events are streamed in order.
	Events []runtime.ModelEvent
	// Err, when set, is yielded after Events instead of ending normally.
	Err error
	// Block, when set, makes the call wait after Events until its context is done, then
	// yield the context's error: a model that streams forever.
	Block bool
	// Func, when set, replaces the script: it is called with the request.
	Func func(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error]
}

// ForcesTool reports Forces (runtime.ForcedToolModel).
func (m *Model) ForcesTool() bool { return m.Forces }

// NativeOutput reports Native (runtime.NativeOutputModel).
func (m *Model) NativeOutput() bool { return m.Native }

// Name returns the model's name.
func (m *Model) Name() string {
	if m.ModelName == "" {
		return "test:scripted"
	}
	return m.ModelName
}

// Calls returns the number of calls made.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// Requests returns copies of the requests received, in order.
func (m *Model) Requests() []*runtime.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*runtime.ModelRequest(nil), m.requests...)
}

// ErrNoMoreSteps is yielded by a call beyond the script.
var ErrNoMoreSteps = errors.New("runtimetest: the model was called more often than scripted")

// Stream replays the next step.
func (m *Model) Stream(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	m.mu.Lock()
	i := m.calls
	m.calls++
	cp := *req
	cp.Messages = append([]runtime.Message(nil), req.Messages...)
	m.requests = append(m.requests, &cp)
	m.mu.Unlock()
	if i >= len(m.Steps) {
		return func(yield func(runtime.ModelEvent, error) bool) {
			yield(runtime.ModelEvent{}, fmt.Errorf("%w (call %d)", ErrNoMoreSteps, i+1))
		}
	}
	s := m.Steps[i]
	if s.Func != nil {
		return s.Func(ctx, req)
	}
	return func(yield func(runtime.ModelEvent, error) bool) {
		for _, ev := range s.Events {
			if ctx.Err() != nil {
				yield(runtime.ModelEvent{}, ctx.Err())
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
		switch {
		case s.Block:
			<-ctx.Done()
			yield(runtime.ModelEvent{}, ctx.Err())
		case s.Err != nil:
			yield(runtime.ModelEvent{}, s.Err)
		}
	}
}

// Text returns a text delta.
func Text(s string) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelTextDelta, Text: s, Index: -1}
}

// Reasoning returns a reasoning delta.
func Reasoning(s string) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelReasoningDelta, Text: s, Index: -1}
}

// ReasoningState returns opaque reasoning state.
func ReasoningState(b []byte) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelReasoningState, State: b, Index: -1}
}

// ToolDelta returns a tool-call fragment. index is -1 for none.
func ToolDelta(index int, id, name, args string) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: index, ID: id, Name: name, Text: args}
}

// Usage returns a usage snapshot.
func Usage(in, out int64) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelUsage, Usage: runtime.Usage{InputTokens: in, OutputTokens: out}, Index: -1}
}

// Finish returns a finish event.
func Finish(r runtime.FinishReason) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelFinish, Reason: r, Index: -1}
}

// ResponseInfo returns a report that model served the call.
func ResponseInfo(model string) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelResponseInfo, Name: model, Index: -1}
}

// Say returns a step that streams text in the given pieces and finishes with stop.
func Say(pieces ...string) Step {
	var evs []runtime.ModelEvent
	for _, p := range pieces {
		evs = append(evs, Text(p))
	}
	return Step{Events: append(evs, Finish(runtime.FinishStop))}
}

// Call returns a step that calls one tool per (name, arguments) pair, each in one
// fragment, and finishes with tool_calls. Call ids are "call_<step>_<n>" where step is
// given.
func Call(step int, nameArgs ...string) Step {
	var evs []runtime.ModelEvent
	for i := 0; i+1 < len(nameArgs); i += 2 {
		evs = append(evs, ToolDelta(i/2, fmt.Sprintf("call_%d_%d", step, i/2), nameArgs[i], nameArgs[i+1]))
	}
	return Step{Events: append(evs, Finish(runtime.FinishToolCalls))}
}

// Tool returns a runtime.Tool named name with a permissive schema that runs fn.
func Tool(name string, fn runtime.ToolFunc) runtime.Tool {
	return runtime.NewTool(runtime.ToolSpec{Name: name, Description: "test tool " + name}, fn)
}

// Echo is a ToolFunc that returns the call's arguments as JSON.
func Echo(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
	return runtime.Output{JSON: []byte(call.Arguments)}, nil
}
