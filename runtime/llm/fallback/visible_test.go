package fallback_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/fallback"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

type typedErr struct{}

func (typedErr) Error() string     { return "429 Too Many Requests" }
func (typedErr) ErrorType() string { return "rate_limited" }

// TestFallbackIsVisible: each move to the next model is an event on the call's span and
// a warning in the log, with the call's context; the request is in neither.
func TestFallbackIsVisible(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))

	a := scripted("openai:gpt-4.1", rt.Step{Err: typedErr{}})
	b := scripted("anthropic:claude", rt.Step{Err: errors.New("stream stalled: no bytes from the model for 3m0s")})
	c := scripted("openai:llama3.2", rt.Step{Events: answer})
	chain := &fallback.Chain{Models: []runtime.Model{a, b, c}, Logger: log}
	if got := chain.Name(); got != "openai:gpt-4.1" {
		t.Errorf("Name() = %q, want the first model's", got)
	}

	ctx, span := tp.Tracer("test").Start(t.Context(), "chat openai:gpt-4.1")
	var got []runtime.ModelEvent
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("a prompt that stays private")}}
	for ev, err := range chain.Stream(ctx, req) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	span.End()
	if diff := cmp.Diff(append([]runtime.ModelEvent{rt.ResponseInfo("llama3.2")}, answer...), got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	spanAttrs := map[string]string{}
	for _, kv := range exp.GetSpans()[0].Attributes {
		spanAttrs[string(kv.Key)] = kv.Value.Emit()
	}
	if diff := cmp.Diff(map[string]string{"agentd.fallback.model": "openai:llama3.2", "agentd.fallback.index": "2"}, spanAttrs); diff != "" {
		t.Errorf("span attributes (-want +got):\n%s", diff)
	}

	type event struct {
		Name  string
		Attrs map[string]string
	}
	var events []event
	for _, s := range exp.GetSpans() {
		for _, ev := range s.Events {
			attrs := map[string]string{}
			for _, kv := range ev.Attributes {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			events = append(events, event{ev.Name, attrs})
		}
	}
	wantEvents := []event{{
		Name: "gen_ai.model.fallback",
		Attrs: map[string]string{
			"agentd.fallback.from_model": "openai:gpt-4.1", "agentd.fallback.to_model": "anthropic:claude", "error.type": "rate_limited",
		},
	}, {
		Name: "gen_ai.model.fallback",
		Attrs: map[string]string{
			"agentd.fallback.from_model": "anthropic:claude", "agentd.fallback.to_model": "openai:llama3.2", "error.type": "_OTHER",
		},
	}}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("span events (-want +got):\n%s", diff)
	}

	var records []map[string]any
	for line := range strings.Lines(logs.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		delete(r, "time")
		records = append(records, r)
	}
	msg := "model failed before answering; falling back to the next model"
	wantRecords := []map[string]any{
		{"level": "WARN", "msg": msg, "from_model": "openai:gpt-4.1", "to_model": "anthropic:claude", "error": "429 Too Many Requests"},
		{"level": "WARN", "msg": msg, "from_model": "anthropic:claude", "to_model": "openai:llama3.2", "error": "stream stalled: no bytes from the model for 3m0s"},
	}
	if diff := cmp.Diff(wantRecords, records); diff != "" {
		t.Errorf("log records (-want +got):\n%s", diff)
	}
	if strings.Contains(logs.String(), "private") {
		t.Errorf("the log holds the request: %s", logs.String())
	}
}

// TestFallbackLogsWithContext: the warning is logged with the call's context, so that
// the service's handler can add the trace ids.
func TestFallbackLogsWithContext(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	ctx, span := tp.Tracer("test").Start(t.Context(), "chat")
	defer span.End()
	h := &ctxHandler{}
	chain := &fallback.Chain{Models: []runtime.Model{scripted("a", rt.Step{Err: errors.New("down")}), scripted("b", rt.Step{Events: answer})}, Logger: slog.New(h)}
	if _, err := collect(ctx, chain); err != nil {
		t.Fatal(err)
	}
	if want := span.SpanContext().TraceID().String(); len(h.traceIDs) != 1 || h.traceIDs[0] != want {
		t.Errorf("records logged with the trace ids %v, want [%s]", h.traceIDs, want)
	}
}

// ctxHandler records the trace id of each record's context.
type ctxHandler struct {
	traceIDs []string
}

func (h *ctxHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *ctxHandler) Handle(ctx context.Context, _ slog.Record) error {
	h.traceIDs = append(h.traceIDs, trace.SpanContextFromContext(ctx).TraceID().String())
	return nil
}
func (h *ctxHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *ctxHandler) WithGroup(string) slog.Handler      { return h }

// TestNoFallbackNoNoise: a chain whose first model answers, or fails after emitting,
// adds no event and logs nothing.
func TestNoFallbackNoNoise(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	var logs bytes.Buffer
	for _, first := range []*rt.Model{
		scripted("a", rt.Step{Events: answer}),
		scripted("a", rt.Step{Events: answer[:1], Err: errors.New("connection dropped")}),
	} {
		chain := &fallback.Chain{Models: []runtime.Model{first, scripted("b", rt.Step{Events: answer})}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		ctx, span := tp.Tracer("test").Start(t.Context(), "chat")
		collect(ctx, chain)
		span.End()
	}
	for _, s := range exp.GetSpans() {
		if len(s.Events) > 0 || len(s.Attributes) > 0 {
			t.Errorf("span %s has events %v and attributes %v", s.Name, s.Events, s.Attributes)
		}
	}
	if logs.Len() > 0 {
		t.Errorf("logged %s", logs.String())
	}
}

func TestEmptyChain(t *testing.T) {
	c := &fallback.Chain{}
	if _, err := collect(t.Context(), c); err == nil || c.Name() != "" {
		t.Errorf("a chain without models: Name %q, error %v; want \"\" and an error", c.Name(), err)
	}
}

// TestFallbackOnTheChatSpan: run by an agent, a chain whose fallback answers leaves the
// runtime's chat span naming the fallback: the model that served the call as
// gen_ai.response.model, the fallback's name and place as agentd.fallback.*, while the
// request's attributes stay those of the model asked for.
func TestFallbackOnTheChatSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name     string
		fallback *rt.Model
		want     map[string]string
	}{{
		name:     "with its report",
		fallback: scripted("anthropic:claude-sonnet-4-5", rt.Step{Events: append([]runtime.ModelEvent{rt.ResponseInfo("claude-sonnet-4-5-20250929")}, answer...)}),
		want: map[string]string{
			"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4.1-mini",
			"gen_ai.response.model": "claude-sonnet-4-5-20250929",
			"agentd.fallback.model": "anthropic:claude-sonnet-4-5", "agentd.fallback.index": "1",
		},
	}, {
		name:     "without a report",
		fallback: scripted("anthropic:claude-sonnet-4-5", rt.Step{Events: answer}),
		want: map[string]string{
			"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4.1-mini",
			"gen_ai.response.model": "claude-sonnet-4-5",
			"agentd.fallback.model": "anthropic:claude-sonnet-4-5", "agentd.fallback.index": "1",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			exp.Reset()
			chain := fallback.New(scripted("openai:gpt-4.1-mini", rt.Step{Err: typedErr{}}), tc.fallback)
			agent, err := runtime.New(runtime.Config{Name: "helper", Model: chain, TracerProvider: tp})
			if err != nil {
				t.Fatal(err)
			}
			for ev, err := range agent.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("hello")}}) {
				if err != nil {
					t.Fatal(err)
				}
				if fin, ok := ev.(*runtime.RunFinished); ok && fin.Reason != runtime.EndCompleted {
					t.Fatalf("run finished %v: %v", fin.Reason, fin.Err)
				}
			}
			var chats int
			for _, s := range exp.GetSpans() {
				if s.Name != "chat gpt-4.1-mini" {
					continue
				}
				chats++
				got := map[string]string{}
				for _, kv := range s.Attributes {
					if _, ok := tc.want[string(kv.Key)]; ok {
						got[string(kv.Key)] = kv.Value.Emit()
					}
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("chat span attributes (-want +got):\n%s", diff)
				}
			}
			if chats != 1 {
				t.Errorf("%d chat spans, want 1", chats)
			}
		})
	}
}
