package runs

import (
	"testing"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
)

// TestAdmitRefusesOnceDraining: a start that passed Start's drain check just as
// draining began is refused where it would be counted, so no run is added to the
// WaitGroup that Shutdown waits on, and its slots are given back.
func TestAdmitRefusesOnceDraining(t *testing.T) {
	rt, err := runtime.New(runtime.Config{Name: "demo", Model: demo.New(demo.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	agents, err := NewAgents(&Agent{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{ContinuationKey: []byte("a continuation key for tests, 32+ bytes long"), MaxRunsPerCaller: 1}, agents, nil, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	s.Drain(0)
	_, err = s.admit("alice")
	if codeOf(err) != Unavailable {
		t.Fatalf("admit while draining = %v, want UNAVAILABLE", err)
	}
	if n := s.ActiveRuns(); n != 0 {
		t.Errorf("%d runs counted after a refused admission, want 0", n)
	}
	if !s.callers.add("alice", 1, 1) {
		t.Error("the caller's slot was not given back")
	}
}
