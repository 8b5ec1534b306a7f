package guardrail_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/hooks/guardrail"
	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestDenyList_InputTripStopsTheRunBeforeTheModel(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{}, nil, []string{"password"})
	if err != nil {
		t.Fatal(err)
	}
	m := &rt.Model{Steps: []rt.Step{rt.Say("noted")}}
	_, fin := run(t, m, g, nil, runtime.UserMessage("my PASSWORD is hunter2"))
	ge := tripped(t, fin)
	if ge.Guardrail != guardrail.DenyListName || ge.Stage != runtime.GuardInput {
		t.Errorf("tripped %s at %v, want %s at input", ge.Guardrail, ge.Stage, guardrail.DenyListName)
	}
	if want := `matched the rule "password"`; ge.Reason != want {
		t.Errorf("reason %q, want %q", ge.Reason, want)
	}
	if got := ge.Details["rule"]; got != "password" {
		t.Errorf(`Details["rule"] = %q, want "password"`, got)
	}
	if m.Calls() != 0 {
		t.Errorf("the model was called %d times, want none: blocking input checks come first", m.Calls())
	}
}

func TestDenyList_InputOfLaterTurnsOnly(t *testing.T) {
	// The earlier turns of the transcript were checked when they were new; only the
	// trailing user messages are this run's input.
	g, err := guardrail.DenyList(runtime.GuardSpec{}, nil, []string{"password"})
	if err != nil {
		t.Fatal(err)
	}
	old := runtime.Message{Role: runtime.RoleAssistant, Parts: []runtime.Part{runtime.TextPart("your password was reset")}}
	_, fin := run(t, &rt.Model{Steps: []rt.Step{rt.Say("fine")}}, g, nil, runtime.UserMessage("hello"), old, runtime.UserMessage("thanks"))
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "fine" {
		t.Errorf("run ended %v (%v) with %q, want completed with \"fine\"", fin.Reason, fin.Err, fin.FinalText)
	}
}

func TestDenyList_OutputTripWithholdsTheAnswer(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{}, []string{`\b\d{3}-\d{2}-\d{4}\b`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &rt.Model{Steps: []rt.Step{rt.Say("Their SSN is ", "078-05-1120.")}}
	_, fin := run(t, m, g, nil)
	ge := tripped(t, fin)
	if ge.Stage != runtime.GuardOutput {
		t.Errorf("tripped at %v, want output", ge.Stage)
	}
	if want := `matched the rule "\\b\\d{3}-\\d{2}-\\d{4}\\b"`; ge.Reason != want {
		t.Errorf("reason %q, want %q", ge.Reason, want)
	}
	if fin.FinalText != "" {
		t.Errorf("FinalText = %q, want it withheld", fin.FinalText)
	}
}

func TestDenyList_CleanRunCompletes(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{}, []string{`(?i)\bssn\b`}, []string{"password"})
	if err != nil {
		t.Fatal(err)
	}
	_, fin := run(t, &rt.Model{Steps: []rt.Step{rt.Say("all ", "clear")}}, g, nil)
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "all clear" {
		t.Errorf("run ended %v (%v) with %q, want completed with \"all clear\"", fin.Reason, fin.Err, fin.FinalText)
	}
}

func TestDenyList_ToolInputWithCorrection(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{Stages: runtime.GuardToolInput, OnToolTrip: runtime.GuardCorrect}, []string{`rm\s+-rf`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var shell hooktest.Counter
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "shell", `{"cmd":"rm -rf /"}`), rt.Call(1, "shell", `{"cmd":"ls"}`), rt.Say("done")}}
	evs, fin := run(t, m, g, []runtime.Tool{rt.Tool("shell", shell.Func)})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
	if shell.Calls() != 1 {
		t.Errorf("the tool ran %d times, want once: the refused call does not run", shell.Calls())
	}
	results := hooktest.Results(evs)
	if len(results) != 2 || !strings.Contains(results[0], `matched the rule "rm\\s+-rf"`) || results[1] != `{"cmd":"ls"}` {
		t.Errorf("results %q, want the refusal, then the listing", results)
	}
}

func TestDenyList_Matching(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{},
		[]string{`(?i)api[_-]?key`, `xyz`, `\d{16}`},
		[]string{"secret", "strasse", "naïve"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		rule string // "" passes
	}{
		{"nothing to see", ""},
		{"my API_KEY is", `(?i)api[_-]?key`},
		// The (?i) of the first pattern does not reach the second.
		{"XYZ", ""},
		{"xyz", "xyz"},
		// The first pattern in the list that matches is named, not the leftmost match.
		{"xyz then apikey", `(?i)api[_-]?key`},
		{"card 4111111111111111", `\d{16}`},
		{"top SECRET", "secret"},
		{"Secretary", "secret"},
		{"ＳＥＣＲＥＴ", "secret"},
		{"Hauptstraße 1", "strasse"},
		{"NAÏVE", "naïve"},
		{"nai\u0308ve", "naïve"}, // decomposed
		{"secre t", ""},
		// Patterns are tried before keywords.
		{"secret xyz", "xyz"},
	} {
		var want *runtime.Trip
		if tc.rule != "" {
			want = &runtime.Trip{Reason: `matched the rule "` + strings.ReplaceAll(tc.rule, `\`, `\\`) + `"`, Details: map[string]string{"rule": tc.rule}}
		}
		wantTrip(t, tc.text, check(t, g, &runtime.GuardCheck{Stage: runtime.GuardInput, Text: tc.text}), want)
	}
}

func TestDenyList_PatternsThatDoNotCombine(t *testing.T) {
	// \Q quotes to the end of its pattern: joined with the others it would swallow them.
	g, err := guardrail.DenyList(runtime.GuardSpec{}, []string{`a.b`, `\Q1+1`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for text, rule := range map[string]string{"a-b": "a.b", "1+1=2": `\Q1+1`, "11": ""} {
		trip := check(t, g, &runtime.GuardCheck{Stage: runtime.GuardOutput, Text: text})
		if got := ruleOf(trip); got != rule {
			t.Errorf("%q matched %q, want %q", text, got, rule)
		}
	}
}

func TestDenyList_Spec(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{}, []string{"x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := g.Guard(); s.Name != "deny_list" || s.Stages != runtime.GuardInput|runtime.GuardOutput {
		t.Errorf("Guard() = %q at %v, want deny_list at input|output", s.Name, s.Stages)
	}
	tools := []string{"shell"}
	g, err = guardrail.DenyList(runtime.GuardSpec{Name: "no_rm", Stages: runtime.GuardToolInput, Tools: tools, FailOpen: true}, []string{"rm"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools[0] = "changed"
	if s := g.Guard(); s.Name != "no_rm" || s.Stages != runtime.GuardToolInput || !s.FailOpen || len(s.Tools) != 1 || s.Tools[0] != "shell" {
		t.Errorf("Guard() = %+v, want the spec as given", s)
	}
}

func TestDenyList_Errors(t *testing.T) {
	for _, tc := range []struct {
		name               string
		patterns, keywords []string
		want               string
	}{
		{"none", nil, nil, "guardrail deny_list: no patterns and no keywords"},
		{"empty lists", []string{}, []string{}, "guardrail deny_list: no patterns and no keywords"},
		{"bad pattern", []string{"a", "b", "(c"}, nil, "guardrail deny_list: patterns[2]: error parsing regexp: missing closing ): `(c`"},
		{"empty keyword", nil, []string{"a", ""}, "guardrail deny_list: keywords[1] is empty"},
		{"blank keyword", []string{"a"}, []string{" \t"}, "guardrail deny_list: keywords[0] is empty"},
	} {
		g, err := guardrail.DenyList(runtime.GuardSpec{}, tc.patterns, tc.keywords)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: DenyList = %v, %v; want the error %q", tc.name, g, err, tc.want)
		}
	}
}

func TestDenyList_ConcurrentChecks(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{Stages: runtime.GuardInput | runtime.GuardOutput | runtime.GuardToolInput | runtime.GuardToolOutput},
		[]string{`forbidden`, `\bnever\b`}, []string{"secret"})
	if err != nil {
		t.Fatal(err)
	}
	hooktest.Runs(t, g, 12)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			text, want := "fine", ""
			if i%2 == 1 {
				text, want = "a SECRET", "secret"
			}
			for range 50 {
				trip, err := g.Check(t.Context(), &runtime.GuardCheck{Stage: runtime.GuardOutput, Text: text})
				if err != nil || ruleOf(trip) != want {
					t.Errorf("Check(%q) = %v, %v; want the rule %q", text, trip, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDenyList_ParallelInputTripCancelsTheModelCall(t *testing.T) {
	g, err := guardrail.DenyList(runtime.GuardSpec{Parallel: true}, nil, []string{"password"})
	if err != nil {
		t.Fatal(err)
	}
	// A model that streams until its call is cancelled.
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("Let me")}, Block: true}}}
	_, fin := run(t, m, g, nil, runtime.UserMessage("the password is hunter2"))
	ge := tripped(t, fin)
	if ge.Stage != runtime.GuardInput || ge.Reason != `matched the rule "password"` {
		t.Errorf("tripped at %v with %q, want input with the rule", ge.Stage, ge.Reason)
	}
	if m.Calls() != 1 {
		t.Errorf("the model was called %d times, want once, alongside the check", m.Calls())
	}
}
