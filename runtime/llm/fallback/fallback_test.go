package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/fallback"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// scripted returns a model named name whose one call replays step.
func scripted(name string, step rt.Step) *rt.Model {
	return &rt.Model{ModelName: name, Steps: []rt.Step{step}}
}

type retryableErr struct{ retry bool }

func (e retryableErr) Error() string   { return "overloaded" }
func (e retryableErr) Retryable() bool { return e.retry }

func collect(ctx context.Context, m runtime.Model) ([]runtime.ModelEvent, error) {
	var evs []runtime.ModelEvent
	for ev, err := range m.Stream(ctx, &runtime.ModelRequest{}) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

var answer = []runtime.ModelEvent{rt.Text("hi"), rt.Finish(runtime.FinishStop)}

func TestFallsBackBeforeEmitting(t *testing.T) {
	a := scripted("openai:gpt-4.1", rt.Step{Err: retryableErr{}})
	b := scripted("anthropic:claude", rt.Step{Err: errors.New("down")})
	c := scripted("openai:llama3.2", rt.Step{Events: answer})
	m := fallback.New(a, b, c)
	if got := m.Name(); got != "openai:gpt-4.1" {
		t.Errorf("Name() = %q, want the first model's", got)
	}
	got, err := collect(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	// The fallback made no report of its own: the chain names it.
	if diff := cmp.Diff(append([]runtime.ModelEvent{rt.ResponseInfo("llama3.2")}, answer...), got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if a.Calls() != 1 || b.Calls() != 1 || c.Calls() != 1 {
		t.Errorf("calls = %d, %d, %d; want one each", a.Calls(), b.Calls(), c.Calls())
	}
}

// TestMovesOnForEveryFailureOfTheModel: as the adapters classify them, a model's own
// failures, transient or not, let the next model try.
func TestMovesOnForEveryFailureOfTheModel(t *testing.T) {
	var links []runtime.Model
	for _, pe := range []*provider.Error{
		{Provider: "openai", Status: 429, Transient: true, Attempts: 3},
		{Provider: "openai", Status: 400, Type: "invalid_request_error", Message: "model not loaded"},
		{Provider: "anthropic", Status: 401, Type: "authentication_error"},
	} {
		links = append(links, scripted(pe.Provider+":m", rt.Step{Err: pe}))
	}
	last := scripted("demo", rt.Step{Events: answer})
	got, err := collect(t.Context(), fallback.New(append(links, last)...))
	if err != nil || last.Calls() != 1 {
		t.Fatalf("error %v after %d calls of the last model, want its answer", err, last.Calls())
	}
	if diff := cmp.Diff(append([]runtime.ModelEvent{rt.ResponseInfo("demo")}, answer...), got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestRetryableFromTheAdaptersErrors: the chain may succeed later when every model's
// failure was transient, as the adapters classify them.
func TestRetryableFromTheAdaptersErrors(t *testing.T) {
	busy := &provider.Error{Provider: "openai", Status: 429, Transient: true, Attempts: 3}
	refused := &provider.Error{Provider: "anthropic", Status: 400}
	for _, tc := range []struct {
		errs []error
		want bool
	}{
		{[]error{busy, busy}, true},
		{[]error{busy, refused}, false},
	} {
		var links []runtime.Model
		for _, e := range tc.errs {
			links = append(links, scripted("m", rt.Step{Err: e}))
		}
		_, err := collect(t.Context(), fallback.New(links...))
		if fe, ok := errors.AsType[*fallback.Error](err); !ok || fe.Retryable() != tc.want {
			t.Errorf("errors %v: %v, want a *fallback.Error with Retryable() %t", tc.errs, err, tc.want)
		}
	}
}

// TestReportsTheModelThatAnswered: the events name the model that served the call
// once, before its answer: the model's own report, passed on, or the fallback's name;
// a report from a model that then failed is dropped with the rest of its call.
func TestReportsTheModelThatAnswered(t *testing.T) {
	served := func(name string, evs ...runtime.ModelEvent) []runtime.ModelEvent {
		return append([]runtime.ModelEvent{rt.ResponseInfo(name)}, evs...)
	}
	for _, tc := range []struct {
		name   string
		models []runtime.Model
		want   []runtime.ModelEvent
	}{{
		name: "the first model answers without a report",
		models: []runtime.Model{
			scripted("openai:gpt-4.1-mini", rt.Step{Events: answer}),
			scripted("anthropic:claude-sonnet-4-5", rt.Step{Events: answer}),
		},
		want: answer,
	}, {
		name: "the first model answers with its report",
		models: []runtime.Model{
			scripted("openai:gpt-4.1-mini", rt.Step{Events: served("gpt-4.1-mini-2025-04-14", answer...)}),
			scripted("anthropic:claude-sonnet-4-5", rt.Step{Events: answer}),
		},
		want: served("gpt-4.1-mini-2025-04-14", answer...),
	}, {
		name: "a fallback answers with its report",
		models: []runtime.Model{
			scripted("openai:gpt-4.1-mini", rt.Step{Events: served("gpt-4.1-mini-2025-04-14"), Err: errors.New("down")}),
			scripted("anthropic:claude-sonnet-4-5", rt.Step{Events: served("claude-sonnet-4-5-20250929", answer...)}),
		},
		want: served("claude-sonnet-4-5-20250929", answer...),
	}, {
		name: "a fallback answers without a report",
		models: []runtime.Model{
			scripted("openai:gpt-4.1-mini", rt.Step{Events: served("gpt-4.1-mini-2025-04-14"), Err: errors.New("down")}),
			scripted("ollama:llama3.2:latest", rt.Step{Events: answer}),
		},
		want: served("llama3.2:latest", answer...),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(t.Context(), fallback.New(tc.models...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPassesThroughOnceEmitted(t *testing.T) {
	broken := errors.New("connection dropped")
	a := scripted("a", rt.Step{Events: []runtime.ModelEvent{rt.Text("par")}, Err: broken})
	b := scripted("b", rt.Step{Events: answer})
	got, err := collect(t.Context(), fallback.New(a, b))
	if !errors.Is(err, broken) {
		t.Errorf("error %v, want the first model's", err)
	}
	if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("par")}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if b.Calls() != 0 {
		t.Error("the fallback was called after the first model had emitted")
	}
}

func TestAllFail(t *testing.T) {
	e1, e2 := retryableErr{retry: true}, retryableErr{retry: false}
	_, err := collect(t.Context(), fallback.New(scripted("a", rt.Step{Err: e1}), scripted("b", rt.Step{Err: e2})))
	fe, ok := errors.AsType[*fallback.Error](err)
	if !ok {
		t.Fatalf("error %v (%T), want a *fallback.Error", err, err)
	}
	if len(fe.Errors) != 2 || fe.Errors[0].Model != "a" || fe.Errors[1].Model != "b" {
		t.Errorf("Errors = %+v", fe.Errors)
	}
	if got, want := err.Error(), "every model failed: a: overloaded; b: overloaded"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if fe.Retryable() {
		t.Error("Retryable() with a model that says no")
	}
	if !errors.Is(err, e2) {
		t.Error("errors.Is does not see the models' errors")
	}
	_, err = collect(t.Context(), fallback.New(scripted("a", rt.Step{Err: e1}), scripted("b", rt.Step{Err: e1})))
	if fe, _ := errors.AsType[*fallback.Error](err); fe == nil || !fe.Retryable() {
		t.Error("not Retryable() when every model says yes")
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b := scripted("b", rt.Step{Events: answer})
	_, err := collect(ctx, fallback.New(scripted("a", rt.Step{Err: context.Canceled}), b))
	if !errors.Is(err, context.Canceled) || b.Calls() != 0 {
		t.Errorf("error %v after %d fallback calls; want context.Canceled and none", err, b.Calls())
	}
}

func TestBreak(t *testing.T) {
	b := scripted("b", rt.Step{Events: answer})
	for range fallback.New(scripted("a", rt.Step{Err: errors.New("down")}), b).Stream(t.Context(), &runtime.ModelRequest{}) {
		break
	}
	if b.Calls() != 1 {
		t.Errorf("%d calls of the fallback, want 1", b.Calls())
	}
}

func TestOne(t *testing.T) {
	a := &rt.Model{ModelName: "a"}
	if fallback.New(a) != runtime.Model(a) {
		t.Error("New of one model did not return it")
	}
}
