package errorbreaker

import (
	"context"
	"fmt"

	"github.com/agentd/agentd/runtime"
)

// Name names the hook in the *runtime.StopError it returns.
const Name = "errorbreaker"

// Hook stops runs whose tool calls keep failing; see the package documentation. Create
// it with [New]. It is safe for concurrent use. It keeps no state itself: it implements
// [runtime.PerRun], and each run counts in an instance of its own, which the runtime gets
// from [Hook.ForRun]. Its own hook points do nothing.
type Hook struct {
	runtime.NoHooks
	opts options
}

// New returns a Hook with the given options.
func New(opts ...Option) *Hook {
	h := &Hook{opts: options{threshold: 5}}
	for _, o := range opts {
		o(&h.opts)
	}
	return h
}

// ForRun returns the hook of one run, which counts that run's failures.
func (h *Hook) ForRun(*runtime.RunInfo) runtime.Hooks {
	return &run{threshold: h.opts.threshold}
}

// run is the hook of one run.
type run struct {
	runtime.NoHooks
	threshold int
	failures  int // failed calls in a row
}

// AfterTool counts a failed result, resets the count on a successful one, and stops the
// run at the threshold. It does not change the result.
func (r *run) AfterTool(_ context.Context, in *runtime.ToolCallOutput) error {
	if !in.Output.IsError {
		r.failures = 0
		return nil
	}
	r.failures++
	if n := r.threshold; n > 0 && r.failures >= n {
		// The failure's text stays out of the reason, which is logged: it may quote
		// arguments.
		return runtime.Stop(Name, fmt.Sprintf("%d tool calls failed in a row; the last was %s (call %s)", r.failures, in.Call.Name, in.Call.ID))
	}
	return nil
}
