package audit

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/agentd/agentd/runtime"
)

// Redacted stands for an argument or output that is not logged.
const Redacted = "[redacted]"

// Hook logs tool calls and decisions; see the package documentation. Create it with
// [New]. It is safe for concurrent use. It keeps no state itself: it implements
// [runtime.PerRun], and each run follows its calls in an instance of its own, which the
// runtime gets from [Hook.ForRun]. Its own hook points do nothing.
type Hook struct {
	runtime.NoHooks
	log  *slog.Logger
	opts options
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

// ForRun returns the hook of one run, which follows that run's tool calls.
func (h *Hook) ForRun(*runtime.RunInfo) runtime.Hooks {
	return &run{h: h}
}

// run is the hook of one run. calls are its tool calls in flight, by call id.
type run struct {
	runtime.NoHooks
	h     *Hook
	calls map[string]*call
}

type call struct {
	name      string
	arguments string // kept only when arguments are logged
	argBytes  int
	executed  bool
	// prepared is the call's BeforeTool input, which every hook of the chain shares: by
	// the time the call has its result, it holds what the hooks decided, the hooks after
	// this one included.
	prepared *runtime.ToolCallInput
}

// BeforeTool keeps the call's input, to read what the hooks decided once the call has
// its result. It records nothing yet: the hooks after this one have not spoken.
func (r *run) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	r.call(in.Call.ID).prepared = in
	return nil
}

// OnEvent follows the run's tool calls and records their results, approvals, and the
// answers and denials of hooks.
func (r *run) OnEvent(ctx context.Context, in *runtime.RunInfo, ev runtime.Event) {
	h := r.h
	switch e := ev.(type) {
	case *runtime.ToolCallStarted:
		r.call(e.CallID).name = e.Name
	case *runtime.ToolCallArgsDone:
		h.arguments(r.call(e.CallID), e.Arguments)
	case *runtime.ApprovalResolved:
		c := r.call(e.CallID)
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
		c := r.call(e.CallID)
		c.name, c.executed = e.Name, true
		h.arguments(c, e.Arguments)
	case *runtime.ToolCallResult:
		c := r.call(e.Result.CallID)
		if !c.executed {
			h.hookDecision(ctx, in, e.Result, c.prepared)
		}
		out := e.Result.Output.String()
		h.record(ctx, in, "tool call",
			slog.String("tool", e.Result.Name), slog.String("call_id", e.Result.CallID),
			slog.Bool("executed", c.executed), slog.Bool("is_error", e.Result.Output.IsError),
			slog.Duration("duration", e.Duration),
			sized("arguments", c.arguments, c.argBytes, h.opts.arguments),
			sized("output", out, len(out), h.opts.outputs))
		delete(r.calls, e.Result.CallID)
	case *runtime.ToolCallsCancelled:
		for _, id := range e.CallIDs {
			h.record(ctx, in, "tool call cancelled",
				slog.String("tool", r.call(id).name), slog.String("call_id", id), slog.String("reason", e.Reason))
			delete(r.calls, id)
		}
	}
}

// AfterRun records what the hooks decided for the calls whose result the run never
// reported: those of a step that parked (another call of it awaits an approval or a
// client's result) or was shut down. Their decisions travel in the parked run's
// continuation, and a resumed run does not report them again, so this is their one
// record.
func (r *run) AfterRun(ctx context.Context, in *runtime.RunInfo, _ *runtime.RunFinished) {
	for _, id := range slices.Sorted(maps.Keys(r.calls)) {
		if c := r.calls[id]; !c.executed {
			r.h.hookDecision(ctx, in, runtime.ToolResult{CallID: id, Name: c.name}, c.prepared)
		}
	}
	r.calls = nil
}

// hookDecision records the answer or denial of a hook, as the run applied it: an answer
// wins over a denial.
func (h *Hook) hookDecision(ctx context.Context, in *runtime.RunInfo, res runtime.ToolResult, p *runtime.ToolCallInput) {
	switch {
	case p == nil:
	case p.Answer != nil:
		answer := p.Answer.String()
		h.record(ctx, in, "tool call decision",
			slog.String("tool", res.Name), slog.String("call_id", res.CallID),
			slog.String("decision", "answered"), slog.String("decided_by", "hook"),
			sized("output", answer, len(answer), h.opts.outputs))
	case p.Deny != "":
		h.record(ctx, in, "tool call decision",
			slog.String("tool", res.Name), slog.String("call_id", res.CallID),
			slog.String("decision", "denied"), slog.String("decided_by", "hook"),
			slog.String("reason", p.Deny))
	}
}

// call returns the run's call id, creating it.
func (r *run) call(id string) *call {
	if r.calls == nil {
		r.calls = map[string]*call{}
	}
	c, ok := r.calls[id]
	if !ok {
		c = &call{}
		r.calls[id] = c
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
