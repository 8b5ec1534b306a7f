package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/runtime"
)

// Name names the hook in the *runtime.StopError it returns.
const Name = "budget"

// ExceededEvent is the name of the hook_event emitted when a run goes over a budget.
const ExceededEvent = "budget.exceeded"

// Kind names a budget.
type Kind string

// The budgets.
const (
	Tokens    Kind = "tokens"
	ToolCalls Kind = "tool_calls"
	Duration  Kind = "duration"
)

// Exceeded says which budget a run went over. It is the value of the [ExceededEvent]
// hook event, and its String is the reason of the run's *runtime.StopError.
type Exceeded struct {
	Kind Kind `json:"kind"`
	// Limit and Used count tokens, tool calls (Used includes the call that was refused),
	// or milliseconds for Duration.
	Limit int64 `json:"limit"`
	Used  int64 `json:"used"`
}

// String says in words what was exceeded.
func (e Exceeded) String() string {
	switch e.Kind {
	case Tokens:
		return fmt.Sprintf("token budget of %d exceeded: %d tokens used", e.Limit, e.Used)
	case ToolCalls:
		return fmt.Sprintf("tool call budget of %d exceeded: call %d refused", e.Limit, e.Used)
	case Duration:
		ms := time.Millisecond
		return fmt.Sprintf("time budget of %v exceeded: %v elapsed", time.Duration(e.Limit)*ms, time.Duration(e.Used)*ms)
	}
	return fmt.Sprintf("%s budget of %d exceeded: %d used", e.Kind, e.Limit, e.Used)
}

// Hook enforces a run's budgets; see the package documentation. Create it with [New].
// It is safe for concurrent use. It keeps no state itself: it implements
// [runtime.PerRun], and each run spends from an instance of its own, which the runtime
// gets from [Hook.ForRun]. Its own hook points do nothing.
type Hook struct {
	runtime.NoHooks
	opts options
}

// New returns a Hook with the given budgets. With none it never stops a run.
func New(opts ...Option) *Hook {
	h := &Hook{}
	for _, o := range opts {
		o(&h.opts)
	}
	if h.opts.now == nil {
		h.opts.now = time.Now
	}
	return h
}

// ForRun returns the hook of one run, whose clock starts now.
func (h *Hook) ForRun(*runtime.RunInfo) runtime.Hooks {
	return &run{opts: &h.opts, start: h.opts.now()}
}

// run is the hook of one run: what it has spent.
type run struct {
	runtime.NoHooks
	opts  *options
	start time.Time
	// tokens is the run's input plus output tokens as of its last StepFinished.
	tokens    int64
	toolCalls int64
}

// BeforeModel stops a run out of time or tokens.
func (r *run) BeforeModel(_ context.Context, in *runtime.ModelCall) error {
	if err := r.checkTime(in.RunInfo); err != nil {
		return err
	}
	return r.checkTokens(in.RunInfo, r.tokens)
}

// AfterModel stops a run whose model call took it over its token budget.
func (r *run) AfterModel(_ context.Context, in *runtime.ModelResponse) error {
	return r.checkTokens(in.RunInfo, r.tokens+in.Usage.InputTokens+in.Usage.OutputTokens)
}

// BeforeTool counts the call and stops a run out of time or tool calls.
func (r *run) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	if err := r.checkTime(in.RunInfo); err != nil {
		return err
	}
	if in.Answer != nil || in.Deny != "" {
		return nil // a hook before this one resolved the call: the tool does not run
	}
	r.toolCalls++
	if limit := r.opts.maxToolCalls; limit > 0 && r.toolCalls > limit {
		return exceed(in.RunInfo, Exceeded{Kind: ToolCalls, Limit: limit, Used: r.toolCalls})
	}
	return nil
}

// OnEvent keeps the run's token count from each step's cumulative usage.
func (r *run) OnEvent(_ context.Context, _ *runtime.RunInfo, ev runtime.Event) {
	if sf, ok := ev.(*runtime.StepFinished); ok {
		r.tokens = sf.Usage.InputTokens + sf.Usage.OutputTokens
	}
}

func (r *run) checkTokens(in *runtime.RunInfo, used int64) error {
	if limit := r.opts.maxTokens; limit > 0 && used > limit {
		return exceed(in, Exceeded{Kind: Tokens, Limit: limit, Used: used})
	}
	return nil
}

func (r *run) checkTime(in *runtime.RunInfo) error {
	limit := r.opts.maxDuration
	if limit <= 0 {
		return nil
	}
	if elapsed := r.opts.now().Sub(r.start); elapsed > limit {
		return exceed(in, Exceeded{Kind: Duration, Limit: limit.Milliseconds(), Used: elapsed.Milliseconds()})
	}
	return nil
}

// exceed reports e to the client and returns the stop.
func exceed(in *runtime.RunInfo, e Exceeded) error {
	in.Emit(ExceededEvent, e)
	return runtime.Stop(Name, e.String())
}
