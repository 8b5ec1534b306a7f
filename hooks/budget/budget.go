package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/hooks/internal/runstate"
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
// It is safe for concurrent use.
type Hook struct {
	runtime.NoHooks
	opts options
	runs runstate.Map[runState]
}

type runState struct {
	start time.Time
	// tokens is the run's input plus output tokens as of its last StepFinished.
	tokens    int64
	toolCalls int64
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

// state returns the run's state; the clock starts at first use.
func (h *Hook) state(in *runtime.RunInfo) *runState {
	st := h.runs.Get(in)
	if st.start.IsZero() {
		st.start = h.opts.now()
	}
	return st
}

// BeforeRun starts the run's clock.
func (h *Hook) BeforeRun(_ context.Context, in *runtime.RunInfo) error {
	h.state(in)
	return nil
}

// BeforeModel stops a run out of time or tokens.
func (h *Hook) BeforeModel(_ context.Context, in *runtime.ModelCall) error {
	st := h.state(in.RunInfo)
	if err := h.checkTime(in.RunInfo, st); err != nil {
		return err
	}
	return h.checkTokens(in.RunInfo, st.tokens)
}

// AfterModel stops a run whose model call took it over its token budget.
func (h *Hook) AfterModel(_ context.Context, in *runtime.ModelResponse) error {
	st := h.state(in.RunInfo)
	return h.checkTokens(in.RunInfo, st.tokens+in.Usage.InputTokens+in.Usage.OutputTokens)
}

// BeforeTool counts the call and stops a run out of time or tool calls.
func (h *Hook) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	st := h.state(in.RunInfo)
	if err := h.checkTime(in.RunInfo, st); err != nil {
		return err
	}
	if in.Answer != nil || in.Deny != "" {
		return nil // a hook before this one resolved the call: the tool does not run
	}
	st.toolCalls++
	if limit := h.opts.maxToolCalls; limit > 0 && st.toolCalls > limit {
		return exceed(in.RunInfo, Exceeded{Kind: ToolCalls, Limit: limit, Used: st.toolCalls})
	}
	return nil
}

// OnEvent keeps the run's token count from each step's cumulative usage.
func (h *Hook) OnEvent(_ context.Context, in *runtime.RunInfo, ev runtime.Event) {
	if sf, ok := ev.(*runtime.StepFinished); ok && h.opts.maxTokens > 0 {
		h.state(in).tokens = sf.Usage.InputTokens + sf.Usage.OutputTokens
	}
}

// AfterRun forgets the run.
func (h *Hook) AfterRun(_ context.Context, in *runtime.RunInfo, _ *runtime.RunFinished) {
	h.runs.Drop(in)
}

func (h *Hook) checkTokens(in *runtime.RunInfo, used int64) error {
	if limit := h.opts.maxTokens; limit > 0 && used > limit {
		return exceed(in, Exceeded{Kind: Tokens, Limit: limit, Used: used})
	}
	return nil
}

func (h *Hook) checkTime(in *runtime.RunInfo, st *runState) error {
	limit := h.opts.maxDuration
	if limit <= 0 {
		return nil
	}
	if elapsed := h.opts.now().Sub(st.start); elapsed > limit {
		return exceed(in, Exceeded{Kind: Duration, Limit: limit.Milliseconds(), Used: elapsed.Milliseconds()})
	}
	return nil
}

// exceed reports e to the client and returns the stop.
func exceed(in *runtime.RunInfo, e Exceeded) error {
	in.Emit(ExceededEvent, e)
	return runtime.Stop(Name, e.String())
}
