//go:build unix

package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
)

// traceReceiver is an OTLP/gRPC trace receiver: the collector's TraceService, keeping
// every span it is sent.
type traceReceiver struct {
	collectortrace.UnimplementedTraceServiceServer

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each resource received
}

func (r *traceReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *traceReceiver) received() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.services...)
}

// startTraceReceiver serves a traceReceiver on a loopback port until the test ends.
func startTraceReceiver(t *testing.T) (*traceReceiver, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := &traceReceiver{}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, recv)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	return recv, lis.Addr().String()
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestEndToEndTracesAndMetrics builds the real agentd, points it at an OTLP/gRPC trace
// receiver on loopback through the standard OTEL_* variables alone, and makes a run whose
// client sends a W3C traceparent. After SIGTERM (agentd flushes its spans on the way out)
// the receiver holds the run's tree, invoke_agent over chat and execute_tool, in the
// client's trace and linked to the RPC's span. The Prometheus endpoint of
// --metrics-listen serves the runtime's metrics.
func TestEndToEndTracesAndMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	recv, otlpAddr := startTraceReceiver(t)

	metricsAddr := agentdtest.FreeAddr(t)
	agentd := startAgentd(t, []string{"--metrics-listen", metricsAddr, "--demo-delay", "0"},
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlpAddr,
		"OTEL_SERVICE_NAME=agentd-e2e",
	)
	agentdLog := agentd.Log

	// A run whose caller is in a trace.
	const (
		callerTrace = "0af7651916cd43dd8448eb211c80319c"
		callerSpan  = "b7ad6b7169203331"
	)
	conn := agentd.Dial(t)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := agentdv1.NewAgentServiceClient(conn).ExecuteRun(ctx, &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	if err != nil {
		t.Fatalf("ExecuteRun: %v\n--- agentd log:\n%s", err, agentdLog())
	}
	if resp.GetResult().GetFinalText() != "2+2 = 4" {
		t.Errorf("final text %q", resp.GetResult().GetFinalText())
	}
	if resp.GetTraceId() != callerTrace {
		t.Errorf("trace_id = %q, want the caller's %s", resp.GetTraceId(), callerTrace)
	}

	// The scrape endpoint has the run's metrics.
	metrics := scrape(t, "http://"+metricsAddr+"/metrics")
	for _, want := range []string{
		"gen_ai_client_token_usage_bucket{",
		"gen_ai_client_operation_duration_seconds_bucket{",
		"agentd_tool_duration_seconds_bucket{",
		`agentd_runs_total{`,
		`agentd_run_end_reason="completed"`,
		"agentd_runs_active{",
		`service_name="agentd-e2e"`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}

	if err := agentd.Terminate(e2eStopWithin); err != nil {
		t.Fatalf("SIGTERM: %v, want exit status 0\n--- agentd log:\n%s", err, agentdLog())
	}

	spans, services := recv.received()
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.GetName()] = append(byName[s.GetName()], s)
	}
	names := func() string {
		var ns []string
		for n, ss := range byName {
			ns = append(ns, fmt.Sprintf("%s×%d", n, len(ss)))
		}
		return strings.Join(ns, ", ")
	}
	if len(byName["invoke_agent demo"]) != 1 || len(byName["agentd.v1.AgentService/ExecuteRun"]) != 1 {
		t.Fatalf("received spans %s; want one invoke_agent demo and the RPC's\n--- agentd log:\n%s", names(), agentdLog())
	}
	t.Logf("received spans: %s", names())
	run, rpc := byName["invoke_agent demo"][0], byName["agentd.v1.AgentService/ExecuteRun"][0]
	if got := hex.EncodeToString(run.GetTraceId()); got != callerTrace {
		t.Errorf("invoke_agent is in trace %s, want the client's %s", got, callerTrace)
	}
	if got := hex.EncodeToString(run.GetParentSpanId()); got != callerSpan {
		t.Errorf("invoke_agent's parent is %s, want the client's span %s", got, callerSpan)
	}
	linked := false
	for _, l := range run.GetLinks() {
		linked = linked || string(l.GetSpanId()) == string(rpc.GetSpanId())
	}
	if !linked {
		t.Errorf("invoke_agent does not link to the RPC span")
	}
	if spanAttr(run, "gen_ai.operation.name") != "invoke_agent" || spanAttr(run, "gen_ai.agent.name") != "demo" {
		t.Errorf("invoke_agent attributes %v", run.GetAttributes())
	}
	children := map[string]int{}
	for _, s := range spans {
		if string(s.GetParentSpanId()) == string(run.GetSpanId()) {
			if hex.EncodeToString(s.GetTraceId()) != callerTrace {
				t.Errorf("%s is in another trace", s.GetName())
			}
			children[s.GetName()]++
		}
	}
	if children["chat agentd-demo"] < 1 || children["execute_tool calculate"] != 1 {
		t.Errorf("invoke_agent's children %v, want chat agentd-demo and execute_tool calculate", children)
	}
	for _, s := range byName["execute_tool calculate"] {
		if spanAttr(s, "gen_ai.tool.name") != "calculate" || spanAttr(s, "gen_ai.tool.call.arguments") != "" {
			t.Errorf("execute_tool attributes %v: want the tool's name and no arguments", s.GetAttributes())
		}
	}
	for _, svc := range services {
		if svc != "agentd-e2e" {
			t.Errorf("service.name %q, want OTEL_SERVICE_NAME's agentd-e2e", svc)
		}
	}
	// The logs carry the trace: the gRPC interceptor's line for the RPC has its ids.
	if !strings.Contains(agentdLog(), `"trace_id":"`+callerTrace+`"`) {
		t.Errorf("no log line carries the trace id %s\n--- agentd log:\n%s", callerTrace, agentdLog())
	}
	if strings.Contains(agentdLog(), "2+2") {
		t.Errorf("the log shows the prompt:\n%s", agentdLog())
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	http.DefaultClient.CloseIdleConnections()
	return string(b)
}
