package loopdetect

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/agentd/agentd/runtime"
)

// Name names the hook in the *runtime.StopError it returns.
const Name = "loopdetect"

// WarningEvent is the name of the hook_event emitted at and past the soft limit.
const WarningEvent = "loopdetect.warning"

// Warning is the value of a [WarningEvent].
type Warning struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	// Count is how many times the run called Tool with these arguments, this call
	// included.
	Count int `json:"count"`
	// SoftLimit and HardLimit are the hook's limits; zero means none.
	SoftLimit int `json:"soft_limit"`
	HardLimit int `json:"hard_limit"`
}

// Hook detects repeated identical tool calls; see the package documentation. Create it
// with [New]. It is safe for concurrent use. It keeps no state itself: it implements
// [runtime.PerRun], and each run counts in an instance of its own, which the runtime gets
// from [Hook.ForRun]. Its own hook points do nothing.
type Hook struct {
	runtime.NoHooks
	opts options
}

// callKey identifies a tool with canonically equal arguments.
type callKey struct {
	tool string
	args [sha256.Size]byte
}

// run is the hook of one run.
type run struct {
	runtime.NoHooks
	opts   *options
	counts map[callKey]int
	// warned holds the ids of calls whose result gets a note, and the note.
	warned map[string]string
}

// New returns a Hook with the given options.
func New(opts ...Option) *Hook {
	h := &Hook{opts: defaultOptions()}
	for _, o := range opts {
		o(&h.opts)
	}
	return h
}

// ForRun returns the hook of one run, which counts that run's calls.
func (h *Hook) ForRun(*runtime.RunInfo) runtime.Hooks {
	return &run{opts: &h.opts}
}

// BeforeTool counts the call; it emits a warning at the soft limit and stops the run at
// the hard limit.
func (r *run) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	if r.counts == nil {
		r.counts = map[callKey]int{}
	}
	k := callKey{tool: in.Call.Name, args: sha256.Sum256(canonical(in.Call.Arguments))}
	r.counts[k]++
	n := r.counts[k]
	soft, hard := r.opts.soft, r.opts.hard
	if hard > 0 && n >= hard {
		return runtime.Stop(Name, fmt.Sprintf("tool %s was called %d times with the same arguments (limit %d)", in.Call.Name, n, hard))
	}
	if soft > 0 && n >= soft {
		in.Emit(WarningEvent, Warning{Tool: in.Call.Name, CallID: in.Call.ID, Count: n, SoftLimit: soft, HardLimit: hard})
		if r.warned == nil {
			r.warned = map[string]string{}
		}
		r.warned[in.Call.ID] = note(in.Call.Name, n, hard)
	}
	return nil
}

// AfterTool appends the warning note to the result of a call warned in BeforeTool.
func (r *run) AfterTool(_ context.Context, in *runtime.ToolCallOutput) error {
	msg, ok := r.warned[in.Call.ID]
	if !ok {
		return nil
	}
	delete(r.warned, in.Call.ID)
	text := in.Output.String()
	if text != "" {
		text += "\n\n"
	}
	in.Output.Text = text + msg
	in.Output.JSON = nil
	return nil
}

// note is what the model reads after the result of a repeated call.
func note(tool string, n, hard int) string {
	s := fmt.Sprintf("[loopdetect] You have called %s with these same arguments %d times in this run. Repeating the call will not give you anything new: use the results you have, change the arguments, or take another approach.", tool, n)
	if hard > 0 {
		s += fmt.Sprintf(" The run will be stopped at %d identical calls.", hard)
	}
	return s
}

// canonical returns args as canonical JSON (sorted keys, no insignificant space, numbers
// by value), or as they are when they are not JSON.
func canonical(args string) []byte {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return []byte(args)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(args)
	}
	return b
}
