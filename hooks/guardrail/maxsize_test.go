package guardrail_test

import (
	"fmt"
	"testing"

	"github.com/agentd/agentd/hooks/guardrail"
	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMaxSize_OutputTripWithholdsTheAnswer(t *testing.T) {
	g, err := guardrail.MaxSize(runtime.GuardSpec{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, fin := run(t, &rt.Model{Steps: []rt.Step{rt.Say("far too ", "long an answer")}}, g, nil)
	ge := tripped(t, fin)
	if ge.Guardrail != guardrail.MaxSizeName || ge.Stage != runtime.GuardOutput {
		t.Errorf("tripped %s at %v, want %s at output", ge.Guardrail, ge.Stage, guardrail.MaxSizeName)
	}
	if want := "the output is 22 bytes; the limit is 10"; ge.Reason != want {
		t.Errorf("reason %q, want %q", ge.Reason, want)
	}
	if ge.Details["bytes"] != "22" || ge.Details["limit"] != "10" {
		t.Errorf("details %v, want bytes 22 and limit 10", ge.Details)
	}
	if fin.FinalText != "" {
		t.Errorf("FinalText = %q, want it withheld", fin.FinalText)
	}
}

func TestMaxSize_AtTheLimitPasses(t *testing.T) {
	g, err := guardrail.MaxSize(runtime.GuardSpec{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, fin := run(t, &rt.Model{Steps: []rt.Step{rt.Say("0123456789")}}, g, nil)
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "0123456789" {
		t.Errorf("run ended %v (%v) with %q, want completed", fin.Reason, fin.Err, fin.FinalText)
	}
}

func TestMaxSize_ToolOutput(t *testing.T) {
	g, err := guardrail.MaxSize(runtime.GuardSpec{Name: "small_results", Stages: runtime.GuardToolOutput}, 8)
	if err != nil {
		t.Fatal(err)
	}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"text":"a long result"}`), rt.Say("unreachable")}}
	evs, fin := run(t, m, g, []runtime.Tool{rt.Tool("echo", rt.Echo)})
	ge := tripped(t, fin)
	if ge.Guardrail != "small_results" || ge.Stage != runtime.GuardToolOutput || ge.Tool != "echo" || ge.CallID != "call_0_0" {
		t.Errorf("tripped %+v, want small_results at tool_output of echo's call_0_0", ge)
	}
	if want := "the tool_output is 24 bytes; the limit is 8"; ge.Reason != want {
		t.Errorf("reason %q, want %q", ge.Reason, want)
	}
	if r := hooktest.Results(evs); len(r) != 1 || r[0] == `{"text":"a long result"}` {
		t.Errorf("results %q, want the one result withheld", r)
	}
}

func TestMaxSize_Spec(t *testing.T) {
	g, err := guardrail.MaxSize(runtime.GuardSpec{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s := g.Guard(); s.Name != "max_size" || s.Stages != runtime.GuardOutput {
		t.Errorf("Guard() = %q at %v, want max_size at output", s.Name, s.Stages)
	}
	wantTrip(t, "input", check(t, g, &runtime.GuardCheck{Stage: runtime.GuardInput, Text: "héllo"}),
		&runtime.Trip{Reason: "the input is 6 bytes; the limit is 1", Details: map[string]string{"bytes": "6", "limit": "1"}})
}

func TestMaxSize_Errors(t *testing.T) {
	for _, n := range []int{0, -1} {
		g, err := guardrail.MaxSize(runtime.GuardSpec{Name: "cap"}, n)
		if err == nil {
			t.Errorf("MaxSize(%d) = %v, want an error", n, g)
			continue
		}
		if want := fmt.Sprintf("guardrail cap: the limit is %d bytes; it must be more than 0", n); err.Error() != want {
			t.Errorf("MaxSize(%d): %q, want %q", n, err, want)
		}
	}
}

func TestMaxSize_ConcurrentChecks(t *testing.T) {
	g, err := guardrail.MaxSize(runtime.GuardSpec{Stages: runtime.GuardInput | runtime.GuardOutput | runtime.GuardToolInput | runtime.GuardToolOutput}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	hooktest.Runs(t, g, 12)
}
