package runtime_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// traced is an SDK tracer provider that keeps every ended span in memory.
type traced struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newTraced(t *testing.T) *traced {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return &traced{tp: tp, exp: exp}
}

// spans returns the spans ended so far.
func (tr *traced) spans() tracetest.SpanStubs { return tr.exp.GetSpans() }

// named returns the spans called name, in the order they ended.
func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one span called name.
func one(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := named(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans %q, want 1; spans: %s", len(got), name, spanNames(spans))
	}
	return got[0]
}

func spanNames(spans tracetest.SpanStubs) string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// attrs returns a span's (or event's) attributes as strings by key; slices are joined
// with commas.
func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		if kv.Value.Type() == attribute.STRINGSLICE {
			m[string(kv.Key)] = strings.Join(kv.Value.AsStringSlice(), ",")
			continue
		}
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// checkAttrs checks the named attributes of a span; "" wants the attribute absent.
func checkAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := attrs(s.Attributes)
	for k, w := range want {
		g, ok := got[k]
		switch {
		case w == "" && ok:
			t.Errorf("span %q has %s=%q, want none", s.Name, k, g)
		case w != "" && g != w:
			t.Errorf("span %q: %s=%q, want %q", s.Name, k, g, w)
		}
	}
}

// childOf checks that child's parent is parent.
func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("span %q is not a child of %q", child.Name, parent.Name)
	}
}

// events returns the names of a span's events.
func events(s tracetest.SpanStub) []string {
	var names []string
	for _, e := range s.Events {
		names = append(names, e.Name)
	}
	return names
}

func event(t *testing.T, s tracetest.SpanStub, name string) map[string]string {
	t.Helper()
	for _, e := range s.Events {
		if e.Name == name {
			return attrs(e.Attributes)
		}
	}
	t.Fatalf("span %q has no event %q; events: %v", s.Name, name, events(s))
	return nil
}

func TestTelemetry_PlainRun(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("hello"), rt.Usage(12, 3), rt.Finish(runtime.FinishStop)}}}}
	a := newAgent(t, m, runtime.Config{Name: "helper", TracerProvider: tr.tp})
	evs, fin := run(t, a, t.Context(), &runtime.Request{RunID: "run_1", ThreadID: "thread_1", Messages: []runtime.Message{runtime.UserMessage("a secret prompt")}})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	if len(spans) != 2 {
		t.Fatalf("spans: %s, want invoke_agent and chat", spanNames(spans))
	}
	root := one(t, spans, "invoke_agent helper")
	chat := one(t, spans, "chat scripted")
	if root.Parent.IsValid() {
		t.Errorf("invoke_agent has parent %v, want a new trace's root", root.Parent)
	}
	childOf(t, chat, root)
	if started := evs[0].(*runtime.RunStarted); started.TraceID != root.SpanContext.TraceID().String() {
		t.Errorf("RunStarted.TraceID = %q, want the run span's %s", started.TraceID, root.SpanContext.TraceID())
	}
	if root.SpanKind != trace.SpanKindInternal || chat.SpanKind != trace.SpanKindClient {
		t.Errorf("kinds: invoke_agent %v, chat %v; want internal and client", root.SpanKind, chat.SpanKind)
	}
	checkAttrs(t, root, map[string]string{
		"gen_ai.operation.name":      "invoke_agent",
		"gen_ai.agent.name":          "helper",
		"gen_ai.conversation.id":     "thread_1",
		"gen_ai.provider.name":       "test",
		"gen_ai.request.model":       "scripted",
		"gen_ai.usage.input_tokens":  "12",
		"gen_ai.usage.output_tokens": "3",
		"agentd.run.id":              "run_1",
		"agentd.run.end_reason":      "completed",
	})
	checkAttrs(t, chat, map[string]string{
		"gen_ai.operation.name":          "chat",
		"gen_ai.provider.name":           "test",
		"gen_ai.request.model":           "scripted",
		"gen_ai.response.model":          "scripted",
		"gen_ai.conversation.id":         "thread_1",
		"gen_ai.usage.input_tokens":      "12",
		"gen_ai.usage.output_tokens":     "3",
		"gen_ai.response.finish_reasons": "stop",
		// Content stays out unless the operator opts in.
		"gen_ai.input.messages":  "",
		"gen_ai.output.messages": "",
	})
	for _, s := range spans {
		if s.Status.Code != codes.Unset {
			t.Errorf("span %q status %v, want unset", s.Name, s.Status)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "secret") {
				t.Errorf("span %q shows the prompt in %s", s.Name, kv.Key)
			}
		}
	}
}

// TestTelemetry_ResponseModel: a chat span's gen_ai.response.model, and its metrics',
// is the model that served the call when the stream reported one, wherever in the
// stream, else the model asked for; the report adds no run event.
func TestTelemetry_ResponseModel(t *testing.T) {
	tr := newTraced(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	steps := func(report ...runtime.ModelEvent) []rt.Step {
		return []rt.Step{
			{Events: append(append([]runtime.ModelEvent{rt.ToolDelta(0, "call_a", "t", `{}`)}, report...), rt.Finish(runtime.FinishToolCalls))},
			rt.Say("done"),
		}
	}
	tools := []runtime.Tool{rt.Tool("t", rt.Echo)}
	reported := newAgent(t, &rt.Model{Steps: steps(rt.ResponseInfo("scripted-2025-04-14"))}, runtime.Config{Tools: tools, TracerProvider: tr.tp, MeterProvider: mp})
	evs, fin := run(t, reported, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v: %v", fin.Reason, fin.Err)
	}
	plain := newAgent(t, &rt.Model{Steps: steps()}, runtime.Config{Tools: tools})
	want, _ := run(t, plain, t.Context(), &runtime.Request{})
	render := func(evs []runtime.Event) (out []string) {
		for _, ev := range evs {
			out = append(out, rt.RenderEvent(ev))
		}
		return out
	}
	if diff := cmp.Diff(render(want), render(evs)); diff != "" {
		t.Errorf("events (-without the report +with it):\n%s", diff)
	}

	chats := named(tr.spans(), "chat scripted")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2", len(chats))
	}
	checkAttrs(t, chats[0], map[string]string{"gen_ai.request.model": "scripted", "gen_ai.response.model": "scripted-2025-04-14"})
	checkAttrs(t, chats[1], map[string]string{"gen_ai.request.model": "scripted", "gen_ai.response.model": "scripted"})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	calls := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if md.Name != "gen_ai.client.operation.duration" {
				continue
			}
			for _, dp := range md.Data.(metricdata.Histogram[float64]).DataPoints {
				model, _ := dp.Attributes.Value("gen_ai.response.model")
				calls[model.AsString()] += dp.Count
			}
		}
	}
	if diff := cmp.Diff(map[string]uint64{"scripted-2025-04-14": 1, "scripted": 1}, calls); diff != "" {
		t.Errorf("model calls by gen_ai.response.model (-want +got):\n%s", diff)
	}
}

func TestTelemetry_ParallelTools(t *testing.T) {
	tr := newTraced(t)
	var wg sync.WaitGroup
	wg.Add(2)
	par := runtime.NewTool(runtime.ToolSpec{Name: "lookup", Parallel: true}, func(ctx context.Context, c runtime.ToolCall) (runtime.Output, error) {
		wg.Done()
		wg.Wait() // both calls run at once
		if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
			return runtime.Output{}, errors.New("the tool's context carries no span")
		}
		return runtime.Output{Text: "found"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "lookup", `{"q":"a"}`, "lookup", `{"q":"b"}`), rt.Say("both found")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{par}, ParallelTools: 2, TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	root := one(t, spans, "invoke_agent test")
	if chats := named(spans, "chat scripted"); len(chats) != 2 {
		t.Errorf("%d chat spans, want 2", len(chats))
	}
	tools := named(spans, "execute_tool lookup")
	if len(tools) != 2 {
		t.Fatalf("%d execute_tool spans, want 2; spans: %s", len(tools), spanNames(spans))
	}
	var ids []string
	for _, s := range tools {
		childOf(t, s, root)
		checkAttrs(t, s, map[string]string{
			"gen_ai.operation.name":      "execute_tool",
			"gen_ai.tool.name":           "lookup",
			"gen_ai.tool.type":           "extension",
			"agentd.tool.executor":       "server",
			"gen_ai.tool.call.arguments": "",
			"gen_ai.tool.call.result":    "",
		})
		if s.Status.Code != codes.Unset {
			t.Errorf("%s: status %v", s.Name, s.Status)
		}
		ids = append(ids, attrs(s.Attributes)["gen_ai.tool.call.id"])
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"call_0_0", "call_0_1"}, ids); diff != "" {
		t.Errorf("gen_ai.tool.call.id (-want +got):\n%s", diff)
	}
	// They overlapped: each started before the other ended.
	if !tools[0].StartTime.Before(tools[1].EndTime) || !tools[1].StartTime.Before(tools[0].EndTime) {
		t.Errorf("the parallel calls' spans do not overlap")
	}
}

func TestTelemetry_Approval(t *testing.T) {
	tr := newTraced(t)
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"a":1}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("t")}, Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}, TracerProvider: tr.tp})
	var approveSpan trace.SpanContext
	_, fin := run(t, a, t.Context(), &runtime.Request{Approve: func(ctx context.Context, _ runtime.ApprovalRequest) (runtime.Decision, error) {
		approveSpan = trace.SpanContextFromContext(ctx)
		return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
	}})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	root := one(t, spans, "invoke_agent test")
	wait := one(t, spans, "await_approval t")
	exec := one(t, spans, "execute_tool t")
	childOf(t, wait, root)
	childOf(t, exec, root)
	if approveSpan.SpanID() != wait.SpanContext.SpanID() {
		t.Errorf("Approve ran in span %v, want await_approval's", approveSpan.SpanID())
	}
	if wait.EndTime.After(exec.StartTime) {
		t.Errorf("await_approval ends after execute_tool starts")
	}
	checkAttrs(t, wait, map[string]string{
		"gen_ai.tool.name":           "t",
		"gen_ai.tool.call.id":        "call_0_0",
		"agentd.approval.id":         "appr_1",
		"agentd.approval.outcome":    "approved",
		"agentd.approval.decided_by": "client",
	})
	if wait.Status.Code != codes.Unset {
		t.Errorf("await_approval status %v", wait.Status)
	}
}

func TestTelemetry_ApprovalThatFails(t *testing.T) {
	tr := newTraced(t)
	rec := newRecorder()
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"a":1}`), rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rec.tool("t")}, Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}, TracerProvider: tr.tp})
	run(t, a, t.Context(), &runtime.Request{Approve: func(context.Context, runtime.ApprovalRequest) (runtime.Decision, error) {
		return runtime.Decision{}, errors.New("the approval service is down")
	}})
	spans := tr.spans()
	wait := one(t, spans, "await_approval t")
	checkAttrs(t, wait, map[string]string{"agentd.approval.outcome": "denied", "agentd.approval.decided_by": "policy"})
	if wait.Status.Code != codes.Error || !strings.Contains(wait.Status.Description, "the approval service is down") {
		t.Errorf("await_approval status %v, want the failure", wait.Status)
	}
	if got := named(spans, "execute_tool t"); len(got) != 0 {
		t.Errorf("a denied call has an execute_tool span")
	}
}

func TestTelemetry_ClientTool(t *testing.T) {
	tr := newTraced(t)
	var waitSpan trace.SpanContext
	client := runtime.NewTool(runtime.ToolSpec{Name: "pick_file"}, func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
		waitSpan = trace.SpanContextFromContext(ctx)
		return runtime.Output{Text: "report.pdf"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_file", `{}`), rt.Say("got it")}}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), &runtime.Request{ClientTools: []runtime.Tool{client}})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	root := one(t, spans, "invoke_agent test")
	exec := one(t, spans, "execute_tool pick_file")
	wait := one(t, spans, "await_client_tool pick_file")
	childOf(t, exec, root)
	childOf(t, wait, exec)
	if waitSpan.SpanID() != wait.SpanContext.SpanID() {
		t.Errorf("the client tool ran in span %v, want await_client_tool's", waitSpan.SpanID())
	}
	checkAttrs(t, exec, map[string]string{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      "pick_file",
		"gen_ai.tool.call.id":   "call_0_0",
		"gen_ai.tool.type":      "function",
		"agentd.tool.executor":  "client",
	})
	checkAttrs(t, wait, map[string]string{"gen_ai.tool.name": "pick_file", "gen_ai.tool.call.id": "call_0_0"})
}

func TestTelemetry_ClientToolThatParks(t *testing.T) {
	tr := newTraced(t)
	client := runtime.NewTool(runtime.ToolSpec{Name: "pick_file"}, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{}, runtime.ErrInterrupt
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_file", `{}`)}}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), &runtime.Request{ClientTools: []runtime.Tool{client}})
	if fin.Reason != runtime.EndAwaitingInput {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	checkAttrs(t, one(t, spans, "execute_tool pick_file"), map[string]string{"agentd.parked": "true"})
	checkAttrs(t, one(t, spans, "invoke_agent test"), map[string]string{"agentd.run.end_reason": "awaiting_input"})
}

func TestTelemetry_Steer(t *testing.T) {
	tr := newTraced(t)
	sq := newSteerQueue(t)
	tool := rt.Tool("t", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		sq.push(7, "also check the weather", false)
		return runtime.Output{Text: "ok"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("done")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{tool}, TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), sq.attach(&runtime.Request{}))
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	root := one(t, tr.spans(), "invoke_agent test")
	got := event(t, root, "steer_applied")
	if got["agentd.steer.seq"] != "7" || got["agentd.steer.interrupt"] != "false" || got["agentd.step.id"] != "step_2" {
		t.Errorf("steer_applied attributes %v, want seq 7 in the second step", got)
	}
	for k, v := range got {
		if strings.Contains(v, "weather") {
			t.Errorf("steer_applied shows the steer's text in %s", k)
		}
	}
}

func TestTelemetry_InterruptingSteer(t *testing.T) {
	tr := newTraced(t)
	sq := newSteerQueue(t)
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("I will")}, Block: true}, rt.Say("ok, the weather")}}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	req := sq.attach(&runtime.Request{Hooks: onEvent(func(ev runtime.Event) {
		if d, ok := ev.(*runtime.TextDelta); ok && d.Delta == "I will" {
			sq.push(3, "no, the weather", true)
		}
	})})
	_, fin := run(t, a, t.Context(), req)
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	root := one(t, spans, "invoke_agent test")
	if diff := cmp.Diff([]string{"interrupted", "steer_applied"}, events(root)); diff != "" {
		t.Errorf("invoke_agent events (-want +got):\n%s", diff)
	}
	chats := named(spans, "chat scripted")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2", len(chats))
	}
	if diff := cmp.Diff([]string{"interrupted"}, events(chats[0])); diff != "" {
		t.Errorf("interrupted chat's events (-want +got):\n%s", diff)
	}
	checkAttrs(t, chats[0], map[string]string{"gen_ai.response.finish_reasons": "interrupted"})
	if chats[0].Status.Code != codes.Unset {
		t.Errorf("an interrupted call's status is %v, want unset: an interrupt is no error", chats[0].Status)
	}
}

func TestTelemetry_Cancel(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("half an answ")}, Block: true}}}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	ctx, cancel := context.WithCancel(t.Context())
	_, fin := run(t, a, ctx, &runtime.Request{Hooks: onEvent(func(ev runtime.Event) {
		if _, ok := ev.(*runtime.TextDelta); ok {
			cancel()
		}
	})})
	if fin.Reason != runtime.EndCancelled {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	root := one(t, spans, "invoke_agent test")
	chat := one(t, spans, "chat scripted")
	if got := event(t, root, "cancelled"); got["agentd.reason"] != "cancelled" {
		t.Errorf("cancelled event %v", got)
	}
	checkAttrs(t, root, map[string]string{"agentd.run.end_reason": "cancelled", "error.type": ""})
	if diff := cmp.Diff([]string{"cancelled"}, events(chat)); diff != "" {
		t.Errorf("chat events (-want +got):\n%s", diff)
	}
	for _, s := range spans {
		if s.Status.Code != codes.Unset {
			t.Errorf("span %q status %v: a cancel is no error", s.Name, s.Status)
		}
	}
}

func TestTelemetry_ConsumerStopsReading(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("a"), rt.Text("b")}, Block: true}}}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	for ev := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("hi")}}) {
		if _, ok := ev.(*runtime.TextDelta); ok {
			break
		}
	}
	spans := tr.spans()
	root := one(t, spans, "invoke_agent test")
	one(t, spans, "chat scripted")
	if got := event(t, root, "cancelled"); got["agentd.reason"] != "consumer_gone" {
		t.Errorf("cancelled event %v, want consumer_gone", got)
	}
}

func TestTelemetry_Failure(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{{Err: errors.New("upstream exploded")}}}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndFailed {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	root := one(t, spans, "invoke_agent test")
	chat := one(t, spans, "chat scripted")
	if chat.Status.Code != codes.Error || !strings.Contains(chat.Status.Description, "upstream exploded") {
		t.Errorf("chat status %v, want an error", chat.Status)
	}
	checkAttrs(t, chat, map[string]string{"error.type": "_OTHER", "gen_ai.response.finish_reasons": "error"})
	if root.Status.Code != codes.Error || !strings.Contains(root.Status.Description, "upstream exploded") {
		t.Errorf("invoke_agent status %v, want an error", root.Status)
	}
	checkAttrs(t, root, map[string]string{"error.type": "model_error", "agentd.run.end_reason": "failed"})
}

func TestTelemetry_FailedToolsSetTheirStatus(t *testing.T) {
	tr := newTraced(t)
	broken := rt.Tool("broken", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{}, errors.New("disk full")
	})
	panicky := rt.Tool("panicky", func(context.Context, runtime.ToolCall) (runtime.Output, error) { panic("boom") })
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "broken", `{}`, "panicky", `{}`), rt.Say("sorry")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{broken, panicky}, TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v: a tool failure is data, not the end of the run", fin.Reason)
	}
	spans := tr.spans()
	b, p := one(t, spans, "execute_tool broken"), one(t, spans, "execute_tool panicky")
	checkAttrs(t, b, map[string]string{"error.type": "tool_error"})
	checkAttrs(t, p, map[string]string{"error.type": "panic"})
	if b.Status.Code != codes.Error || p.Status.Code != codes.Error {
		t.Errorf("statuses %v and %v, want errors", b.Status, p.Status)
	}
	if root := one(t, spans, "invoke_agent test"); root.Status.Code != codes.Unset {
		t.Errorf("invoke_agent status %v, want unset", root.Status)
	}
}

func TestTelemetry_HookEventAndStop(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{}`), rt.Say("never")}}
	hooks := &funcHooks{beforeTool: func(in *runtime.ToolCallInput) error {
		in.Emit("loopdetect.warning", map[string]any{"tool": in.Call.Name, "count": 3})
		return runtime.Stop("budget", "token budget exhausted")
	}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, TracerProvider: tr.tp})
	_, fin := run(t, a, t.Context(), &runtime.Request{Hooks: hooks})
	if fin.Reason != runtime.EndStopped {
		t.Fatalf("finished %v", fin.Reason)
	}
	root := one(t, tr.spans(), "invoke_agent test")
	if got := event(t, root, "hook_event"); got["agentd.hook_event.name"] != "loopdetect.warning" || got["agentd.hook_event.value"] != "" {
		t.Errorf("hook_event attributes %v, want the name and no value", got)
	}
	if got := event(t, root, "hook_stop"); got["agentd.hook"] != "budget" || got["agentd.reason"] != "token budget exhausted" {
		t.Errorf("hook_stop attributes %v", got)
	}
	if got := event(t, root, "tool_calls_cancelled"); got["agentd.tool.call.ids"] != "call_0_0" {
		t.Errorf("tool_calls_cancelled attributes %v", got)
	}
	checkAttrs(t, root, map[string]string{"agentd.run.end_reason": "stopped"})
}

func TestTelemetry_ContentOnlyWhenOptedIn(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"city":"Lyon"}`), rt.Say("sunny in Lyon")}}
	hooks := &funcHooks{beforeTool: func(in *runtime.ToolCallInput) error {
		in.Emit("note", "checked")
		return nil
	}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, TracerProvider: tr.tp, RecordContent: true, System: "be brief"})
	run(t, a, t.Context(), &runtime.Request{Hooks: hooks, Messages: []runtime.Message{runtime.UserMessage("weather in Lyon?")}})
	spans := tr.spans()
	chats := named(spans, "chat scripted")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans", len(chats))
	}
	checkAttrs(t, chats[0], map[string]string{
		"gen_ai.input.messages":  `[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"weather in Lyon?"}]}]`,
		"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"tool_call","id":"call_0_0","name":"t","arguments":{"city":"Lyon"}}],"finish_reason":"tool_calls"}]`,
	})
	in := attrs(chats[1].Attributes)["gen_ai.input.messages"]
	if !strings.Contains(in, `{"role":"tool","parts":[{"type":"tool_call_response","id":"call_0_0","response":{"city":"Lyon"}}]}`) {
		t.Errorf("second call's input lacks the tool result: %s", in)
	}
	checkAttrs(t, one(t, spans, "execute_tool t"), map[string]string{
		"gen_ai.tool.call.arguments": `{"city":"Lyon"}`,
		"gen_ai.tool.call.result":    `{"city":"Lyon"}`,
	})
	if got := event(t, one(t, spans, "invoke_agent test"), "hook_event"); got["agentd.hook_event.value"] != `"checked"` {
		t.Errorf("hook_event value %q, want the JSON of the value", got["agentd.hook_event.value"])
	}
}

func TestTelemetry_ParentAndLinksFromTheCaller(t *testing.T) {
	tr := newTraced(t)
	m := &rt.Model{Steps: []rt.Step{rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{TracerProvider: tr.tp})
	ctx, parent := tr.tp.Tracer("test").Start(t.Context(), "caller")
	_, rpc := tr.tp.Tracer("test").Start(t.Context(), "rpc")
	link := trace.Link{SpanContext: rpc.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("agentd.link", "rpc")}}
	evs, _ := run(t, a, ctx, &runtime.Request{SpanLinks: []trace.Link{link}})
	parent.End()
	rpc.End()
	root := one(t, tr.spans(), "invoke_agent test")
	if root.Parent.SpanID() != parent.SpanContext().SpanID() || root.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("invoke_agent's parent is %v, want the span in Run's context", root.Parent.SpanID())
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.SpanID() != rpc.SpanContext().SpanID() {
		t.Errorf("links %+v, want the RPC span", root.Links)
	}
	if got := evs[0].(*runtime.RunStarted).TraceID; got != parent.SpanContext().TraceID().String() {
		t.Errorf("RunStarted.TraceID = %q, want the caller's trace", got)
	}
}

func TestTelemetry_NoSDKNoTraceID(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("ok")}}
	a := newAgent(t, m, runtime.Config{})
	evs, _ := run(t, a, t.Context(), &runtime.Request{})
	if got := evs[0].(*runtime.RunStarted).TraceID; got != "" {
		t.Errorf("RunStarted.TraceID = %q without tracing, want empty", got)
	}
}

func TestTelemetry_Metrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m := &rt.Model{Steps: []rt.Step{
		{Events: []runtime.ModelEvent{rt.ToolDelta(0, "call_a", "t", `{"a":1}`), rt.Usage(100, 10), rt.Finish(runtime.FinishToolCalls)}},
		{Events: []runtime.ModelEvent{rt.Text("done"), rt.Usage(150, 5), rt.Finish(runtime.FinishStop)}},
	}}
	rec := newRecorder()
	a := newAgent(t, m, runtime.Config{Name: "helper", Tools: []runtime.Tool{rec.tool("t")}, Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}, MeterProvider: mp})
	run(t, a, t.Context(), &runtime.Request{Approve: func(context.Context, runtime.ApprovalRequest) (runtime.Decision, error) {
		return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
	}})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/agentd/agentd/runtime" {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, md := range sm.Metrics {
			got[md.Name] = md.Data
		}
	}
	tokens, ok := got["gen_ai.client.token.usage"].(metricdata.Histogram[int64])
	if !ok {
		t.Fatalf("gen_ai.client.token.usage is %T", got["gen_ai.client.token.usage"])
	}
	sums := map[string]int64{}
	for _, dp := range tokens.DataPoints {
		typ, _ := dp.Attributes.Value("gen_ai.token.type")
		model, _ := dp.Attributes.Value("gen_ai.request.model")
		op, _ := dp.Attributes.Value("gen_ai.operation.name")
		if model.AsString() != "scripted" || op.AsString() != "chat" {
			t.Errorf("token usage attributes %v", dp.Attributes.ToSlice())
		}
		sums[typ.AsString()] += dp.Sum
	}
	if diff := cmp.Diff(map[string]int64{"input": 250, "output": 15}, sums); diff != "" {
		t.Errorf("tokens by type (-want +got):\n%s", diff)
	}
	if d, ok := got["gen_ai.client.operation.duration"].(metricdata.Histogram[float64]); !ok || len(d.DataPoints) != 1 || d.DataPoints[0].Count != 2 {
		t.Errorf("gen_ai.client.operation.duration = %+v, want two chat calls", got["gen_ai.client.operation.duration"])
	}
	if d, ok := got["agentd.tool.duration"].(metricdata.Histogram[float64]); !ok || len(d.DataPoints) != 1 || d.DataPoints[0].Count != 1 {
		t.Errorf("agentd.tool.duration = %+v, want one call", got["agentd.tool.duration"])
	} else if name, _ := d.DataPoints[0].Attributes.Value("gen_ai.tool.name"); name.AsString() != "t" {
		t.Errorf("agentd.tool.duration attributes %v", d.DataPoints[0].Attributes.ToSlice())
	}
	if d, ok := got["agentd.approval.wait.duration"].(metricdata.Histogram[float64]); !ok || len(d.DataPoints) != 1 || d.DataPoints[0].Count != 1 {
		t.Errorf("agentd.approval.wait.duration = %+v, want one wait", got["agentd.approval.wait.duration"])
	} else if o, _ := d.DataPoints[0].Attributes.Value("agentd.approval.outcome"); o.AsString() != "approved" {
		t.Errorf("agentd.approval.wait.duration attributes %v", d.DataPoints[0].Attributes.ToSlice())
	}
	if active, ok := got["agentd.runs.active"].(metricdata.Sum[int64]); !ok || len(active.DataPoints) != 1 || active.DataPoints[0].Value != 0 {
		t.Errorf("agentd.runs.active = %+v, want 0 once the run ended", got["agentd.runs.active"])
	}
	runs, ok := got["agentd.runs"].(metricdata.Sum[int64])
	if !ok || len(runs.DataPoints) != 1 || runs.DataPoints[0].Value != 1 {
		t.Fatalf("agentd.runs = %+v, want one run", got["agentd.runs"])
	}
	reason, _ := runs.DataPoints[0].Attributes.Value("agentd.run.end_reason")
	agent, _ := runs.DataPoints[0].Attributes.Value("gen_ai.agent.name")
	if reason.AsString() != "completed" || agent.AsString() != "helper" {
		t.Errorf("agentd.runs attributes %v", runs.DataPoints[0].Attributes.ToSlice())
	}
}

func TestTelemetry_ClientToolNamesStayOutOfMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	client := runtime.NewTool(runtime.ToolSpec{Name: "any_name_a_client_likes"}, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{Text: "ok"}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "any_name_a_client_likes", `{}`), rt.Say("ok")}}
	run(t, newAgent(t, m, runtime.Config{MeterProvider: mp}), t.Context(), &runtime.Request{ClientTools: []runtime.Tool{client}})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if md.Name != "agentd.tool.duration" {
				continue
			}
			dp := md.Data.(metricdata.Histogram[float64]).DataPoints[0]
			name, _ := dp.Attributes.Value("gen_ai.tool.name")
			executor, _ := dp.Attributes.Value("agentd.tool.executor")
			if name.AsString() != "_client" || executor.AsString() != "client" {
				t.Errorf("agentd.tool.duration attributes %v, want the client tools' shared name", dp.Attributes.ToSlice())
			}
			return
		}
	}
	t.Error("no agentd.tool.duration")
}

// dropSpans is a span processor that keeps nothing: what BenchmarkTracedRun measures is
// the runtime's spans, not an exporter.
type dropSpans struct{}

func (dropSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropSpans) Shutdown(context.Context) error                  { return nil }
func (dropSpans) ForceFlush(context.Context) error                { return nil }

// BenchmarkTracedRun is BenchmarkRun with every span recorded (by an SDK that drops them
// at the end) and every metric recorded: what tracing costs when it is on.
func BenchmarkTracedRun(b *testing.B) {
	for _, size := range workload.Sizes() {
		b.Run(size.Name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(dropSpans{}))
			defer tp.Shutdown(context.Background())
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			defer mp.Shutdown(context.Background())
			cfg := workload.Config(size)
			cfg.TracerProvider, cfg.MeterProvider = tp, mp
			agent, err := runtime.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			req := workload.Request()
			b.ReportAllocs()
			for b.Loop() {
				for _, err := range agent.Run(b.Context(), req) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(size.Deltas())), "ns/delta")
		})
	}
}

// A call's usage beyond input and output (prompt cache, reasoning) is on its chat span and,
// summed, on the run's; a usage without it adds no such attribute.
func TestTelemetry_CacheAndReasoningTokens(t *testing.T) {
	tr := newTraced(t)
	usage := runtime.ModelEvent{Kind: runtime.ModelUsage, Usage: runtime.Usage{
		InputTokens: 1200, OutputTokens: 30, CacheReadInputTokens: 1000, CacheCreationInputTokens: 150, ReasoningTokens: 20,
	}}
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("hello"), usage, rt.Finish(runtime.FinishStop)}}}}
	a := newAgent(t, m, runtime.Config{Name: "helper", TracerProvider: tr.tp})
	if _, fin := run(t, a, t.Context(), &runtime.Request{RunID: "run_1", Messages: []runtime.Message{runtime.UserMessage("hi")}}); fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	spans := tr.spans()
	want := map[string]string{
		"gen_ai.usage.input_tokens":                "1200",
		"gen_ai.usage.cache_read.input_tokens":     "1000",
		"gen_ai.usage.cache_creation.input_tokens": "150",
		"gen_ai.usage.reasoning.output_tokens":     "20",
	}
	checkAttrs(t, one(t, spans, "chat scripted"), want)
	checkAttrs(t, one(t, spans, "invoke_agent helper"), want)

	tr = newTraced(t)
	m = &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("hello"), rt.Usage(12, 3), rt.Finish(runtime.FinishStop)}}}}
	a = newAgent(t, m, runtime.Config{Name: "helper", TracerProvider: tr.tp})
	run(t, a, t.Context(), &runtime.Request{RunID: "run_2", Messages: []runtime.Message{runtime.UserMessage("hi")}})
	checkAttrs(t, one(t, tr.spans(), "chat scripted"), map[string]string{
		"gen_ai.usage.cache_read.input_tokens": "", "gen_ai.usage.cache_creation.input_tokens": "", "gen_ai.usage.reasoning.output_tokens": "",
	})
}
