package service_test

import (
	"context"
	"log/slog"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// endedSpans is a span processor that hands over the name of every span that ends, so a
// test can wait for a span that ends after the RPC has answered (the stats handler's).
type endedSpans chan string

func (endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e endedSpans) OnEnd(s sdktrace.ReadOnlySpan)                 { e <- s.Name() }
func (endedSpans) Shutdown(context.Context) error                  { return nil }
func (endedSpans) ForceFlush(context.Context) error                { return nil }

// tracedServer serves the demo agent with the otelgrpc stats handler, both tracing into
// one in-memory exporter.
type tracedServer struct {
	client agentdv1.AgentServiceClient
	exp    *tracetest.InMemoryExporter
	ended  endedSpans
}

func newTracedServer(t *testing.T) *tracedServer {
	t.Helper()
	return newTracedServerOf(t, agents.Default())
}

// newTracedServerOf is newTracedServer serving the agents of acfg.
func newTracedServerOf(t *testing.T, acfg *agents.Config) *tracedServer {
	t.Helper()
	ts := &tracedServer{exp: tracetest.NewInMemoryExporter(), ended: make(endedSpans, 1000)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(ts.exp), sdktrace.WithSpanProcessor(ts.ended))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	log := slog.New(slog.DiscardHandler)
	reg, err := agents.NewRegistry(acfg, agents.RegistryOptions{Logger: log, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ts.client = servicetest.NewClient(t,
		service.Config{Agents: reg, Logger: log, Propagator: prop, Config: runs.Config{ContinuationKey: testKey}},
		servicetest.WithServerOptions(grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(prop)))))
	return ts
}

// waitEnded waits until the named span has ended.
func (ts *tracedServer) waitEnded(t *testing.T, name string) {
	t.Helper()
	for {
		select {
		case n := <-ts.ended:
			if n == name {
				return
			}
		case <-t.Context().Done():
			t.Fatalf("span %q never ended", name)
		}
	}
}

// span returns the one ended span called name.
func (ts *tracedServer) span(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range ts.exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q, want 1", len(found), name)
	}
	return found[0]
}

func (ts *tracedServer) children(parent tracetest.SpanStub) []string {
	var names []string
	for _, s := range ts.exp.GetSpans() {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() {
			names = append(names, s.Name)
		}
	}
	return names
}

// linksTo reports whether span links to target.
func linksTo(span, target tracetest.SpanStub) bool {
	for _, l := range span.Links {
		if l.SpanContext.SpanID() == target.SpanContext.SpanID() && l.SpanContext.TraceID() == target.SpanContext.TraceID() {
			return true
		}
	}
	return false
}

func TestTracing_ARunJoinsTheCallersTraceAndLinksToTheRPC(t *testing.T) {
	ts := newTracedServer(t)
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := ts.client.ExecuteRun(ctx, &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetTraceId() != callerTrace {
		t.Errorf("trace_id = %q, want the caller's %s", resp.GetTraceId(), callerTrace)
	}
	ts.waitEnded(t, "agentd.v1.AgentService/ExecuteRun")
	rpc := ts.span(t, "agentd.v1.AgentService/ExecuteRun")
	run := ts.span(t, "invoke_agent demo")
	if got := run.SpanContext.TraceID().String(); got != callerTrace {
		t.Errorf("invoke_agent is in trace %s, want the caller's %s", got, callerTrace)
	}
	if got := run.Parent.SpanID().String(); got != callerSpan || !run.Parent.IsRemote() {
		t.Errorf("invoke_agent's parent is %s (remote %v), want the caller's span %s", got, run.Parent.IsRemote(), callerSpan)
	}
	if !linksTo(run, rpc) {
		t.Errorf("invoke_agent links to %+v, want the RPC span %s", run.Links, rpc.SpanContext.SpanID())
	}
	if rpc.Parent.SpanID().String() != callerSpan {
		t.Errorf("the RPC span's parent is %s, want the caller's span too", rpc.Parent.SpanID())
	}
	kids := ts.children(run)
	for _, want := range []string{"chat agentd-demo", "execute_tool calculate"} {
		found := false
		for _, k := range kids {
			found = found || k == want
		}
		if !found {
			t.Errorf("invoke_agent's children %v lack %q", kids, want)
		}
	}
}

func TestTracing_WithoutTraceContextARunStartsANewTrace(t *testing.T) {
	ts := newTracedServer(t)
	stream, err := ts.client.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	var traceID string
	for {
		resp, err := stream.Recv()
		if err != nil {
			break
		}
		if rs := resp.GetEvent().GetRunStarted(); rs != nil {
			traceID = rs.GetTraceId()
		}
	}
	ts.waitEnded(t, "agentd.v1.AgentService/Run")
	rpc := ts.span(t, "agentd.v1.AgentService/Run")
	run := ts.span(t, "invoke_agent demo")
	if run.Parent.IsValid() {
		t.Errorf("invoke_agent has parent %v, want a new trace's root", run.Parent)
	}
	if run.SpanContext.TraceID() == rpc.SpanContext.TraceID() {
		t.Errorf("invoke_agent shares the RPC's trace, want a trace of its own")
	}
	if traceID != run.SpanContext.TraceID().String() {
		t.Errorf("run_started.trace_id = %q, want the run span's %s", traceID, run.SpanContext.TraceID())
	}
	if !linksTo(run, rpc) {
		t.Errorf("invoke_agent links to %+v, want the RPC span", run.Links)
	}
	if len(ts.children(run)) == 0 {
		t.Errorf("invoke_agent has no children")
	}
}

// A child run's span is a child of its parent's call's span: one trace for the tree.
func TestTracing_AChildRunIsInItsParentsTrace(t *testing.T) {
	acfg := &agents.Config{Agents: []agents.AgentConfig{
		{Name: "lead", Model: "demo", Tools: []string{}, Subagents: []agents.SubagentConfig{{Agent: "researcher"}}},
		{Name: "researcher", Model: "demo", Tools: []string{"calculate"}},
	}}
	ts := newTracedServerOf(t, acfg)
	fin, err := servicetest.Open(t, ts.client, servicetest.Input("lead", "ask the researcher what is 12*7")).Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	ts.waitEnded(t, "invoke_agent lead")
	lead, child, call := ts.span(t, "invoke_agent lead"), ts.span(t, "invoke_agent researcher"), ts.span(t, "execute_tool researcher")
	if child.Parent.SpanID() != call.SpanContext.SpanID() || child.SpanContext.TraceID() != lead.SpanContext.TraceID() {
		t.Errorf("the child's span has parent %v in trace %v, want the call's span %v in the lead's trace %v",
			child.Parent.SpanID(), child.SpanContext.TraceID(), call.SpanContext.SpanID(), lead.SpanContext.TraceID())
	}
}
