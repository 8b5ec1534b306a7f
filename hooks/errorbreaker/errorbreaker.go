package errorbreaker

import (
	"context"
	"fmt"

	"github.com/agentd/agentd/hooks/internal/runstate"
	"github.com/agentd/agentd/runtime"
)

// Name names the hook in the *runtime.StopError it returns.
const Name = "errorbreaker"

// Hook stops runs whose tool calls keep failing; see the package documentation. Create
// it with [New]. It is safe for concurrent use.
type Hook struct {
	runtime.NoHooks
	opts options
	runs runstate.Map[int] // failed calls in a row
}

// New returns a Hook with the given options.
func New(opts ...Option) *Hook {
	h := &Hook{opts: options{threshold: 5}}
	for _, o := range opts {
		o(&h.opts)
	}
	return h
}

// AfterTool counts a failed result, resets the count on a successful one, and stops the
// run at the threshold. It does not change the result.
func (h *Hook) AfterTool(_ context.Context, in *runtime.ToolCallOutput) error {
	failures := h.runs.Get(in.RunInfo)
	if !in.Output.IsError {
		*failures = 0
		return nil
	}
	*failures++
	if n := h.opts.threshold; n > 0 && *failures >= n {
		// The failure's text stays out of the reason, which is logged: it may quote
		// arguments.
		return runtime.Stop(Name, fmt.Sprintf("%d tool calls failed in a row; the last was %s (call %s)", *failures, in.Call.Name, in.Call.ID))
	}
	return nil
}

// AfterRun forgets the run.
func (h *Hook) AfterRun(_ context.Context, in *runtime.RunInfo, _ *runtime.RunFinished) {
	h.runs.Drop(in)
}
