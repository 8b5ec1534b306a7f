package guardrail_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// run runs one request ("go" when msgs is empty) on an agent over model with g among its
// hooks, and returns its events and RunFinished.
func run(t *testing.T, model *rt.Model, g runtime.Guardrail, tools []runtime.Tool, msgs ...runtime.Message) ([]runtime.Event, *runtime.RunFinished) {
	t.Helper()
	a := hooktest.Agent(t, model, runtime.Config{Tools: tools, Hooks: g})
	return hooktest.Run(t, a, &runtime.Request{Messages: msgs})
}

// tripped returns the *runtime.GuardrailError a run stopped with, failing t unless it
// finished EndStopped with one.
func tripped(t *testing.T, fin *runtime.RunFinished) *runtime.GuardrailError {
	t.Helper()
	if fin.Reason != runtime.EndStopped {
		t.Fatalf("run ended %v (%v), want stopped", fin.Reason, fin.Err)
	}
	if !errors.Is(fin.Err, runtime.ErrGuardrailTripped) {
		t.Errorf("run's error %v does not wrap ErrGuardrailTripped", fin.Err)
	}
	ge, ok := errors.AsType[*runtime.GuardrailError](fin.Err)
	if !ok {
		t.Fatalf("run's error %v (%T) holds no *runtime.GuardrailError", fin.Err, fin.Err)
	}
	return ge
}

// check calls g.Check with in and returns its trip, failing t on an error.
func check(t *testing.T, g runtime.Guardrail, in *runtime.GuardCheck) *runtime.Trip {
	t.Helper()
	trip, err := g.Check(t.Context(), in)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return trip
}

// wantTrip compares a trip with want; nil is a pass.
func wantTrip(t *testing.T, what string, got, want *runtime.Trip) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: trip (-want +got):\n%s", what, diff)
	}
}

// ruleOf returns the rule a deny list's trip names; "" for a pass.
func ruleOf(trip *runtime.Trip) string {
	if trip == nil {
		return ""
	}
	return trip.Details["rule"]
}
