package service

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// runTraceContext returns the context a run's span starts from, and the links the span
// carries. When the RPC's metadata carries W3C trace context (traceparent), the run joins
// the caller's trace as a child of the caller's span; otherwise it starts a new trace.
// Never is it a child of the RPC's own span, the otelgrpc stats handler's: a stream may
// carry a run for hours, and long-lived stream spans make poor parents. The run links to
// the RPC's span instead, in both cases.
//
// The caller's context is read from the metadata again, not from the RPC's span: that
// span's parent is the caller's span only when the stats handler extracted it, and this
// way a run joins its caller's trace whatever the handler was configured with.
func (s *Server) runTraceContext(ctx context.Context) (context.Context, []trace.Link) {
	var links []trace.Link
	if rpc := trace.SpanContextFromContext(ctx); rpc.IsValid() {
		links = []trace.Link{{SpanContext: rpc, Attributes: []attribute.KeyValue{attribute.String("agentd.link", "rpc")}}}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	caller := trace.SpanContextFromContext(s.propagator().Extract(context.Background(), metadataCarrier(md)))
	if caller.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, caller), links
	}
	// An empty span context hides the RPC's span: the run's span becomes a root.
	return trace.ContextWithSpanContext(ctx, trace.SpanContext{}), links
}

func (s *Server) propagator() propagation.TextMapPropagator {
	if s.cfg.Propagator != nil {
		return s.cfg.Propagator
	}
	return otel.GetTextMapPropagator()
}

// metadataCarrier reads gRPC metadata as a propagation.TextMapCarrier. Metadata keys are
// lower case, as W3C trace context's are.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
