package main

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// traceHandler adds trace_id and span_id to every record logged with a context that
// carries a span (log.InfoContext(ctx, …)), so that a log line leads to its trace: the
// RPC's span for the gRPC logging interceptor's lines, the run's span for the runtime's
// and the audit hook's, which also carry run_id. It adds nothing else: what agentd logs
// stays free of prompts and tool arguments unless the operator opts in (the audit hook's
// arguments and outputs settings in the agents file).
// Under a group (WithGroup) the two ids go into the group, like any attribute.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
