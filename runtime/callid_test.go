package runtime_test

import (
	"context"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// A model that gives a call the id of an earlier call of the run (as servers that
// number calls per response do), or an id the request reserves, has the call renamed:
// no id names two calls, in the events or in the transcript the model is sent.
func TestCallIDs_ATakenIDIsRenamed(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "echo", `{"n":1}`), // call_0_0
		rt.Call(0, "echo", `{"n":2}`), // call_0_0 again
		rt.Call(5, "echo", `{"n":3}`), // call_5_0, reserved
		rt.Say("done"),
	}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("echo", rt.Echo)}})
	evs, fin := run(t, a, context.Background(), &runtime.Request{ReservedCallIDs: []string{"call_5_0"}})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run ended %v: %v", fin.Reason, fin.Err)
	}
	seen := map[string]bool{}
	for _, s := range eventsOf[*runtime.ToolCallStarted](evs) {
		if seen[s.CallID] {
			t.Errorf("two calls named %s", s.CallID)
		}
		seen[s.CallID] = true
	}
	if len(seen) != 3 || !seen["call_0_0"] || seen["call_5_0"] {
		t.Errorf("call ids %v, want call_0_0 and two new ones, not the reserved call_5_0", seen)
	}
	// The model is sent each call with its own result.
	last := m.Requests()[3].Messages
	results := map[string]string{}
	for _, msg := range last {
		for _, p := range msg.Parts {
			if p.Kind == runtime.PartToolResult {
				results[p.ToolResult.CallID] = p.ToolResult.Output.String()
			}
		}
	}
	for id := range seen {
		if results[id] == "" {
			t.Errorf("the transcript has no result for %s: %v", id, results)
		}
	}
}
