package audit

import (
	"context"
	"log/slog"

	"github.com/agentd/agentd/hooks/internal/runstate"
	"github.com/agentd/agentd/runtime"
)

// Redacted stands for an argument or output that is not logged.
const Redacted = "[redacted]"

// Hook logs tool calls and decisions; see the package documentation. Create it with
// [New]. It is safe for concurrent use.
type Hook struct {
	runtime.NoHooks
	log  *slog.Logger
	opts options
	runs runstate.Map[calls]
}

// calls are a run's tool calls in flight, by call id.
type calls map[string]*call

type call struct {
	name      string
	arguments string // kept only when arguments are logged
	argBytes  int
	executed  bool
}

// New returns a Hook that writes to log; nil means slog.Default().
func New(log *slog.Logger, opts ...Option) *Hook {
	if log == nil {
		log = slog.Default()
	}
	h := &Hook{log: log}
	for _, o := range opts {
		o(&h.opts)
	}
	return h
}

// BeforeTool records the answer or denial of a hook before this one.
func (h *Hook) BeforeTool(ctx context.Context, in *runtime.ToolCallInput) error {
	switch {
	case in.Answer != nil:
		h.record(ctx, in.RunInfo, "tool call decision",
			slog.String("tool", in.Call.Name), slog.String("call_id", in.Call.ID),
			slog.String("decision", "answered"), slog.String("decided_by", "hook"),
			sized("output", in.Answer.String(), len(in.Answer.String()), h.opts.outputs))
	case in.Deny != "":
		h.record(ctx, in.RunInfo, "tool call decision",
			slog.String("tool", in.Call.Name), slog.String("call_id", in.Call.ID),
			slog.String("decision", "denied"), slog.String("decided_by", "hook"),
			slog.String("reason", in.Deny))
	}
	return nil
}

// OnEvent follows the run's tool calls and records their results and approvals.
func (h *Hook) OnEvent(ctx context.Context, in *runtime.RunInfo, ev runtime.Event) {
	switch e := ev.(type) {
	case *runtime.ToolCallStarted:
		h.call(in, e.CallID).name = e.Name
	case *runtime.ToolCallArgsDone:
		h.arguments(h.call(in, e.CallID), e.Arguments)
	case *runtime.ApprovalResolved:
		c := h.call(in, e.CallID)
		if e.Arguments != "" {
			h.arguments(c, e.Arguments)
		}
		attrs := []slog.Attr{
			slog.String("tool", c.name), slog.String("call_id", e.CallID), slog.String("approval_id", e.ApprovalID),
			slog.String("decision", e.Outcome.String()), slog.String("decided_by", e.DecidedBy.String()),
			slog.String("reason", e.Reason),
		}
		if e.Arguments != "" {
			attrs = append(attrs, sized("arguments", e.Arguments, len(e.Arguments), h.opts.arguments))
		}
		h.record(ctx, in, "tool call decision", attrs...)
	case *runtime.ToolExecutionStarted:
		c := h.call(in, e.CallID)
		c.name, c.executed = e.Name, true
		h.arguments(c, e.Arguments)
	case *runtime.ToolCallResult:
		c := h.call(in, e.Result.CallID)
		out := e.Result.Output.String()
		h.record(ctx, in, "tool call",
			slog.String("tool", e.Result.Name), slog.String("call_id", e.Result.CallID),
			slog.Bool("executed", c.executed), slog.Bool("is_error", e.Result.Output.IsError),
			slog.Duration("duration", e.Duration),
			sized("arguments", c.arguments, c.argBytes, h.opts.arguments),
			sized("output", out, len(out), h.opts.outputs))
		delete(*h.runs.Get(in), e.Result.CallID)
	case *runtime.ToolCallsCancelled:
		cs := h.runs.Get(in)
		for _, id := range e.CallIDs {
			h.record(ctx, in, "tool call cancelled",
				slog.String("tool", h.call(in, id).name), slog.String("call_id", id), slog.String("reason", e.Reason))
			delete(*cs, id)
		}
	}
}

// AfterRun forgets the run.
func (h *Hook) AfterRun(_ context.Context, in *runtime.RunInfo, _ *runtime.RunFinished) {
	h.runs.Drop(in)
}

// call returns the run's call id, creating it.
func (h *Hook) call(in *runtime.RunInfo, id string) *call {
	cs := h.runs.Get(in)
	if *cs == nil {
		*cs = calls{}
	}
	c, ok := (*cs)[id]
	if !ok {
		c = &call{}
		(*cs)[id] = c
	}
	return c
}

func (h *Hook) arguments(c *call, args string) {
	c.argBytes = len(args)
	if h.opts.arguments {
		c.arguments = args
	}
}

// sized returns the attributes key=s, or key=[redacted] unless show, and key_bytes=n,
// inlined (a group with an empty key).
func sized(key, s string, n int, show bool) slog.Attr {
	if !show {
		s = Redacted
	}
	return slog.Group("", slog.String(key, s), slog.Int(key+"_bytes", n))
}

func (h *Hook) record(ctx context.Context, in *runtime.RunInfo, msg string, attrs ...slog.Attr) {
	base := []slog.Attr{slog.String("run_id", in.RunID), slog.String("thread_id", in.ThreadID), slog.String("agent", in.Agent)}
	h.log.LogAttrs(ctx, slog.LevelInfo, msg, append(base, attrs...)...)
}
