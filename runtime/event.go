package runtime

import (
	"encoding/json"
	"time"
)

// Event is one thing that happened in a run: one of the pointer types in this file. The
// service stamps sequence numbers and times; the runtime reports what happened, in order.
type Event interface{ isEvent() }

// RunStarted is always the first event of a run.
type RunStarted struct {
	RunID, ThreadID, Agent, Model string
	// TraceID is the W3C trace id of the run's span, hex; empty without tracing.
	TraceID string
	// Resumed is set when the run resumes a parked one.
	Resumed bool
}

// StepStarted opens a step: one model call and the tool calls it asks for.
type StepStarted struct {
	StepID string
	// Index counts steps in the run, Turn the turns (a steer starts one), IndexInTurn the
	// steps in the turn; all from 0.
	Index, Turn, IndexInTurn int
}

// BlockKind is the kind of a streamed block of an assistant message.
type BlockKind uint8

// The kinds of streamed block.
const (
	BlockText BlockKind = iota + 1
	BlockReasoning
)

// MessageStarted opens a text or reasoning block of the step's assistant message.
type MessageStarted struct {
	// MessageID names the block; it becomes the Part.ID of the block's part.
	MessageID string
	// ParentID is the ID of the assistant Message the block belongs to.
	ParentID string
	StepID   string
	Role     Role
	Kind     BlockKind
}

// MessageFinished closes a block.
type MessageFinished struct {
	MessageID string
	Role      Role
	Kind      BlockKind
	// State is a reasoning block's opaque provider state.
	State   []byte
	Partial bool
}

// TextDelta is a piece of answer text.
type TextDelta struct{ MessageID, Delta string }

// ReasoningDelta is a piece of reasoning text.
type ReasoningDelta struct{ MessageID, Delta string }

// ToolCallStarted announces a tool call as soon as the model names it.
type ToolCallStarted struct {
	CallID, Name string
	// MessageID is the ID of the assistant Message the call belongs to.
	MessageID string
	StepID    string
	Executor  Executor
}

// ToolCallArgsDelta is a raw fragment of a call's arguments.
type ToolCallArgsDelta struct{ CallID, Delta string }

// ToolCallArgsDone gives a call's complete arguments, exactly as the model sent them.
type ToolCallArgsDone struct{ CallID, Arguments string }

// ApprovalRequested asks for a decision on a call.
type ApprovalRequested struct {
	ApprovalID, CallID, ToolName string
	// Arguments are the exact bytes the call runs with if approved unchanged.
	Arguments string
	Editable  bool
	// ExpiresAt is zero when the request does not expire.
	ExpiresAt time.Time
	Reason    string
	// AutoApprovable is ApprovalRequest.AutoApprovable: something other than an
	// explicit decision (a client's auto-approve policy, a grant) may approve the call.
	AutoApprovable bool
}

// ApprovalResolved ends an approval request.
type ApprovalResolved struct {
	ApprovalID, CallID string
	Outcome            Outcome
	DecidedBy          DecidedBy
	// Arguments are the ones the call runs with, byte for byte.
	Arguments string
	Reason    string
}

// ToolExecutionStarted says a call began executing. For client tools it is the request to
// run the call.
type ToolExecutionStarted struct {
	CallID, Name, Arguments string
	Executor                Executor
	Deadline                time.Time
}

// ToolCallResult is a call's result; Duration is the execute time alone.
type ToolCallResult struct {
	Result   ToolResult
	Duration time.Duration
}

// ToolCallsCancelled reports calls that will not run.
type ToolCallsCancelled struct {
	CallIDs []string
	Reason  string
}

// SteerApplied reports where a steer entered the transcript, or that it was dropped.
type SteerApplied struct {
	// Seq is the steer's Steer.Seq.
	Seq               int64
	StepID, MessageID string
	Dropped           bool
	DropReason        string
}

// StepFinished closes a step.
type StepFinished struct {
	StepID       string
	FinishReason FinishReason
	// Usage is the run's cumulative usage.
	Usage Usage
	// NewMessages are the messages the step added to the transcript.
	NewMessages []Message
}

// StepCalls reports the calls of a step's assistant message, complete, before the
// first of them is prepared: what resuming the step needs, should the process running
// it be lost while its calls run (a store of runs keeps it, so that the calls are taken
// up where they stood rather than asked of the model again). It is not a client's
// event: the service sends nothing for it.
type StepCalls struct {
	// Pending holds the step and its calls, each CallReady and unprepared.
	Pending *Pending
	// Usage is the run's cumulative usage, the step's model call included.
	Usage Usage
	// NewMessages are the messages the run added before the step's assistant message
	// (which Pending holds): with the request's, the transcript the step resumes on.
	NewMessages []Message
}

// HookEvent is something a hook tells the client.
type HookEvent struct {
	Name  string
	Value any
}

// RunFinished is always the last event of a run.
type RunFinished struct {
	Reason EndReason
	// Err is the failure for every reason but EndCompleted and EndAwaitingInput: a
	// *ModelError, a *StopError, ErrMaxSteps, or the context's cause.
	Err error
	// NewMessages is everything the run added to the transcript, partial output included.
	NewMessages []Message
	Usage       Usage
	// FinalText is the last assistant message's text, or the output of the completes_run
	// tool that ended the run; a typed run's result, as compact JSON.
	FinalText string
	// Output is a typed run's result (Config.OutputSchema): the arguments of its output
	// tool's call, which match the schema, as compact JSON. Nil unless EndCompleted.
	Output json.RawMessage
	// Pending is what a parked run waits for (EndAwaitingInput, EndShutdown); pass it as
	// Request.Resume to continue.
	Pending *Pending
}

func (*RunStarted) isEvent()           {}
func (*StepStarted) isEvent()          {}
func (*StepCalls) isEvent()            {}
func (*MessageStarted) isEvent()       {}
func (*MessageFinished) isEvent()      {}
func (*TextDelta) isEvent()            {}
func (*ReasoningDelta) isEvent()       {}
func (*ToolCallStarted) isEvent()      {}
func (*ToolCallArgsDelta) isEvent()    {}
func (*ToolCallArgsDone) isEvent()     {}
func (*ApprovalRequested) isEvent()    {}
func (*ApprovalResolved) isEvent()     {}
func (*ToolExecutionStarted) isEvent() {}
func (*ToolCallResult) isEvent()       {}
func (*ToolCallsCancelled) isEvent()   {}
func (*SteerApplied) isEvent()         {}
func (*StepFinished) isEvent()         {}
func (*HookEvent) isEvent()            {}
func (*RunFinished) isEvent()          {}

// EndReason is why a run ended.
type EndReason uint8

// The end reasons.
const (
	EndUnspecified EndReason = iota
	EndCompleted
	EndAwaitingInput
	EndCancelled
	EndMaxSteps
	EndStopped
	EndFailed
	EndShutdown
)

func (r EndReason) String() string {
	switch r {
	case EndCompleted:
		return "completed"
	case EndAwaitingInput:
		return "awaiting_input"
	case EndCancelled:
		return "cancelled"
	case EndMaxSteps:
		return "max_steps"
	case EndStopped:
		return "stopped"
	case EndFailed:
		return "failed"
	case EndShutdown:
		return "shutdown"
	}
	return "unspecified"
}

// Outcome is how an approval request ended.
type Outcome uint8

// The approval outcomes.
const (
	OutcomeUnspecified Outcome = iota
	OutcomeApproved
	OutcomeDenied
	OutcomeExpired
	OutcomeCancelled
)

func (o Outcome) String() string {
	switch o {
	case OutcomeApproved:
		return "approved"
	case OutcomeDenied:
		return "denied"
	case OutcomeExpired:
		return "expired"
	case OutcomeCancelled:
		return "cancelled"
	}
	return "unspecified"
}

// DecidedBy says who decided an approval request.
type DecidedBy uint8

// The deciders.
const (
	DecidedByUnspecified DecidedBy = iota
	DecidedByClient
	DecidedByPolicy
	DecidedByHook
	DecidedByTimeout
	DecidedByRunEnd
	// DecidedByGrant: a grant a client's earlier approval made (see ToolPolicy.MaxGrant).
	DecidedByGrant
)

func (d DecidedBy) String() string {
	switch d {
	case DecidedByClient:
		return "client"
	case DecidedByPolicy:
		return "policy"
	case DecidedByHook:
		return "hook"
	case DecidedByTimeout:
		return "timeout"
	case DecidedByRunEnd:
		return "run_end"
	case DecidedByGrant:
		return "grant"
	}
	return "unspecified"
}
