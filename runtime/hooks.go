package runtime

import (
	"context"
	"time"
)

// Hooks are the points where code outside the loop observes or changes a run. Embed
// [NoHooks] to implement only some of them; new hook points may be added to this
// interface, and NoHooks will implement them.
//
// A hook that returns a *StopError (see [Stop]) stops the run: it finishes EndStopped.
// Other errors are logged and ignored, and so is a panic. Hooks run on the run's goroutine
// (parallel tools aside, whose hooks run on the run's goroutine too) one at a time.
//
// Cancellation is not an error: a cancelled run reaches AfterRun with EndCancelled and
// never OnError.
type Hooks interface {
	// BeforeRun runs once, after RunStarted.
	BeforeRun(ctx context.Context, in *RunInfo) error
	// AfterRun runs once for every run that reached BeforeRun, before RunFinished is
	// reported, with the run's outcome; a run whose consumer stopped reading reaches it
	// with EndCancelled.
	AfterRun(ctx context.Context, in *RunInfo, fin *RunFinished)
	// BeforeModel may rewrite the call's messages, tools and settings.
	BeforeModel(ctx context.Context, in *ModelCall) error
	// AfterModel sees the assembled assistant message and the call's usage.
	AfterModel(ctx context.Context, in *ModelResponse) error
	// BeforeTool may rewrite a call's arguments, answer in the tool's place, deny the
	// call or require an approval, before policy and approval.
	BeforeTool(ctx context.Context, in *ToolCallInput) error
	// AfterTool may rewrite a call's result before the model sees it.
	AfterTool(ctx context.Context, in *ToolCallOutput) error
	// OnEvent sees every event before the consumer does.
	OnEvent(ctx context.Context, in *RunInfo, ev Event)
	// OnError decides whether a failed model call is retried. Retries happen only when
	// the call emitted nothing, and are bounded by the agent's MaxModelRetries.
	OnError(ctx context.Context, in *ModelFailure) (retry bool)
}

// NoHooks implements Hooks with no-ops; embed it. Its OnError does not ask for a retry
// (a retryable error is still retried).
type NoHooks struct{}

func (NoHooks) BeforeRun(context.Context, *RunInfo) error           { return nil }
func (NoHooks) AfterRun(context.Context, *RunInfo, *RunFinished)    {}
func (NoHooks) BeforeModel(context.Context, *ModelCall) error       { return nil }
func (NoHooks) AfterModel(context.Context, *ModelResponse) error    { return nil }
func (NoHooks) BeforeTool(context.Context, *ToolCallInput) error    { return nil }
func (NoHooks) AfterTool(context.Context, *ToolCallOutput) error    { return nil }
func (NoHooks) OnEvent(context.Context, *RunInfo, Event)            {}
func (NoHooks) OnError(context.Context, *ModelFailure) (retry bool) { return false }

// RunInfo describes the run a hook is called for.
type RunInfo struct {
	RunID, ThreadID, Agent, Model string
	// Caller is Request.Caller: who the run is for, empty when unknown.
	Caller   string
	Metadata map[string]any

	emit func(name string, value any)
}

type runInfoKey struct{}

// RunInfoFromContext returns the run whose context ctx is, or derives from: a tool's
// Execute and every hook get such a context. It returns nil outside a run. Read it,
// never change it; its Emit does nothing (hooks emit through the RunInfo they are
// given).
func RunInfoFromContext(ctx context.Context) *RunInfo {
	info, _ := ctx.Value(runInfoKey{}).(*RunInfo)
	return info
}

// Emit sends a HookEvent to the client, right after the hook returns.
func (r *RunInfo) Emit(name string, value any) {
	if r.emit != nil {
		r.emit(name, value)
	}
}

// ModelCall is the input of BeforeModel. Hooks thread it: each sees the previous one's
// rewrites.
type ModelCall struct {
	*RunInfo
	Step    int
	Request *ModelRequest
}

// ModelResponse is the input of AfterModel.
type ModelResponse struct {
	*RunInfo
	Step         int
	Message      Message
	Usage        Usage
	FinishReason FinishReason
}

// ToolCallInput is the input of BeforeTool. Hooks thread it.
type ToolCallInput struct {
	*RunInfo
	Spec ToolSpec
	// Call may be rewritten (Call.Arguments); new arguments are validated again.
	Call ToolCall
	// Answer, when set, is the call's result, and the tool does not run.
	Answer *Output
	// Deny, when set, denies the call with this reason.
	Deny string
	// RequireApproval asks for an approval even where policy would not.
	RequireApproval bool
}

// ToolCallOutput is the input of AfterTool. Hooks thread it.
type ToolCallOutput struct {
	*RunInfo
	Call ToolCall
	// Output may be rewritten.
	Output   Output
	Duration time.Duration
}

// ModelFailure is the input of OnError.
type ModelFailure struct {
	*RunInfo
	Step int
	Err  error
	// Attempt counts from 1.
	Attempt int
	// Emitted is set when the failed call already streamed output; it is not retried.
	Emitted bool
}
