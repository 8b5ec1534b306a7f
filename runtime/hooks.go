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
// A failed model call is not a hook point: the model's adapter has already retried it
// (see runtime/llm), and the run finishes EndFailed with a *ModelError, which AfterRun
// and OnEvent see. Cancellation is not an error: a cancelled run reaches AfterRun with
// EndCancelled.
//
// A Hooks value that keeps state for each run implements [PerRun] as well.
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
}

// PerRun is implemented by Hooks that keep state for each run: what a run has counted,
// the calls it has in flight. At the start of every run, before RunStarted, the runtime
// calls ForRun once for each such hook of the run's chain (the request's and the
// agent's, see [Chain]) and calls the Hooks it returns, in the hook's place, at every
// hook point of that run; it drops them when the run ends. The hook that serves every
// run of a server thus keeps nothing per run, and no two runs share state, even runs
// that carry the same run id: state lives exactly as long as its run, whether the run
// completes, stops, fails, or ends because its consumer stopped reading.
//
// ForRun may be called from many goroutines at once, one per run starting; the Hooks it
// returns serve one run, whose hooks are called one at a time, so they need no locking.
// It should only make the run's value: it must not block, nor emit, since the run has
// not started. A nil result leaves the hook out of that run. The runtime uses what ForRun returns as it
// is: it does not call ForRun on it. A Hooks that wraps another forwards ForRun, as the
// result of [Chain] does; a wrapper that does not hides it.
type PerRun interface {
	ForRun(in *RunInfo) Hooks
}

// NoHooks implements Hooks with no-ops; embed it.
type NoHooks struct{}

func (NoHooks) BeforeRun(context.Context, *RunInfo) error        { return nil }
func (NoHooks) AfterRun(context.Context, *RunInfo, *RunFinished) {}
func (NoHooks) BeforeModel(context.Context, *ModelCall) error    { return nil }
func (NoHooks) AfterModel(context.Context, *ModelResponse) error { return nil }
func (NoHooks) BeforeTool(context.Context, *ToolCallInput) error { return nil }
func (NoHooks) AfterTool(context.Context, *ToolCallOutput) error { return nil }
func (NoHooks) OnEvent(context.Context, *RunInfo, Event)         {}

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

// ToolCallInput is the input of BeforeTool. Hooks thread it: every hook of the run's
// chain gets the same *ToolCallInput, and once the last has returned the run applies
// what it holds (Answer before Deny). A hook may keep it until the call's ToolCallResult
// event to learn what the hooks after it decided.
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
