package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// With no OTEL_* variable set, nothing is exported: no SDK is installed and the runtime
// keeps the global no-ops.
func TestTelemetryExportsNothingUnlessAsked(t *testing.T) {
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"} {
		for _, value := range []string{"", "none"} {
			t.Run(v+"="+value, func(t *testing.T) {
				t.Setenv("OTEL_TRACES_EXPORTER", "")
				t.Setenv("OTEL_METRICS_EXPORTER", "")
				t.Setenv(v, value)
				before := otel.GetTracerProvider()
				tel, err := setupTelemetry(t.Context(), config{}, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				defer tel.shutdown(slog.New(slog.DiscardHandler))
				if tel.tracerProvider != nil || tel.meterProvider != nil || len(tel.shutdowns) != 0 {
					t.Errorf("telemetry %+v, want nothing set up", tel)
				}
				if otel.GetTracerProvider() != before {
					t.Error("the global tracer provider changed")
				}
			})
		}
	}
}

func TestTraceHandlerAddsTheSpansIDs(t *testing.T) {
	var buf strings.Builder
	log := slog.New(traceHandler{slog.NewJSONHandler(&buf, nil)}).With("run_id", "run_1")
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.InfoContext(ctx, "with a span")
	log.InfoContext(t.Context(), "without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", buf.String())
	}
	if !strings.Contains(lines[0], `"run_id":"run_1","trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331"`) {
		t.Errorf("line with a span: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line without a span: %s", lines[1])
	}
}

func TestConfigTelemetryFlags(t *testing.T) {
	cfg, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.metricsListen != "" || cfg.recordContent {
		t.Errorf("defaults: metrics-listen %q, record-content %v; want neither", cfg.metricsListen, cfg.recordContent)
	}
	cfg, err = parseConfig(nil, env(map[string]string{"AGENTD_METRICS_LISTEN": "localhost:9464", "AGENTD_RECORD_CONTENT": "true"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.metricsListen != "localhost:9464" || !cfg.recordContent {
		t.Errorf("from environment: metrics-listen %q, record-content %v", cfg.metricsListen, cfg.recordContent)
	}
}
