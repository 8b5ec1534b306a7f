package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/term"
)

// logHandler returns the handler of --log-format: text or json, and for "" text when w
// is a terminal, json otherwise.
func logHandler(format string, w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if logFormat(format, w) == "text" {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}

// logFormat is the format --log-format picks for logs to w: format, or for "" text when
// w is a terminal and json otherwise.
func logFormat(format string, w io.Writer) string {
	if format != "" {
		return format
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return "text"
	}
	return "json"
}

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

// maxHeldRecords bounds what [holdLogs] holds: past it, the records go out at once.
const maxHeldRecords = 1000

// holdLogs returns h holding back every record logged through it, or through a handler
// derived from it (WithAttrs, WithGroup), until release is called; release passes them
// on in the order they came, and every later record goes through at once. agentd holds
// the records of its start so that the line saying where it serves comes first. Past
// maxHeldRecords release happens by itself. Both are safe for concurrent use, and
// release may be called more than once.
func holdLogs(h slog.Handler) (held slog.Handler, release func()) {
	q := &heldRecords{holding: true}
	return heldHandler{h, q}, q.release
}

// heldHandler is a handler of [holdLogs].
type heldHandler struct {
	slog.Handler
	q *heldRecords
}

// heldRecords are the records a [holdLogs] handler and those derived from it hold.
type heldRecords struct {
	mu      sync.Mutex
	holding bool
	records []heldRecord
}

type heldRecord struct {
	h   slog.Handler
	ctx context.Context
	r   slog.Record
}

func (h heldHandler) Handle(ctx context.Context, r slog.Record) error {
	h.q.mu.Lock()
	if h.q.holding {
		h.q.records = append(h.q.records, heldRecord{h.Handler, ctx, r.Clone()})
		full := len(h.q.records) >= maxHeldRecords
		h.q.mu.Unlock()
		if full {
			h.q.release()
		}
		return nil
	}
	h.q.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h heldHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return heldHandler{h.Handler.WithAttrs(attrs), h.q}
}

func (h heldHandler) WithGroup(name string) slog.Handler {
	return heldHandler{h.Handler.WithGroup(name), h.q}
}

// release passes the held records on, under the lock, so that none logged meanwhile
// overtakes them.
func (q *heldRecords) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, rec := range q.records {
		_ = rec.h.Handle(rec.ctx, rec.r)
	}
	q.records, q.holding = nil, false
}
