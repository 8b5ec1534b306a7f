package runtime

import (
	"context"
	"encoding/json"
	"iter"
)

// Model is a language model that streams normalised events. Adapters for providers live in
// runtime/llm/<provider>.
type Model interface {
	// Name identifies the model, as "provider:model".
	Name() string
	// Stream calls the model. The sequence is single-use; breaking out of it must stop the
	// call and release its resources. The last event of a successful call is a
	// ModelFinish; a sequence that ends without one is an error. A non-nil error ends the
	// sequence. Consumers ignore events of kinds they do not know, so that a model may
	// report more than they read.
	Stream(ctx context.Context, req *ModelRequest) iter.Seq2[ModelEvent, error]
}

// ModelRequest is one call of a model.
type ModelRequest struct {
	// Messages is the transcript, system messages first.
	Messages []Message
	// Tools the model may call.
	Tools []ToolSpec
	// Settings tunes the call.
	Settings CallSettings
	// Output, when set, asks for a reply that is JSON matching a schema: a typed run's
	// answer, from a model that constrains its replies itself (NativeOutputModel). The
	// run validates the reply all the same.
	Output *OutputFormat
	// ToolChoice, when set, names the one tool the model must call in its reply: a typed
	// run's output tool, when it is the only tool offered, on a model that can be made
	// to call it (ForcedToolModel).
	ToolChoice string
}

// ForcedToolModel is a Model that can be made to call a named tool
// (ModelRequest.ToolChoice). A typed run in tool mode on it whose only tool is the
// output tool forces the call, so that the model never answers in text.
type ForcedToolModel interface {
	Model
	ForcesTool() bool
}

// OutputFormat is the shape a reply must have (ModelRequest.Output).
type OutputFormat struct {
	// Name names the format, as providers ask: 1 to 64 letters, digits, '_' or '-'.
	Name string
	// Schema is the JSON Schema of the reply, an object.
	Schema json.RawMessage
}

// NativeOutputModel is a Model whose provider can constrain a reply to a JSON Schema
// (ModelRequest.Output). A typed run on it asks for its answer that way, unless the
// agent's OutputMode says OutputTool.
type NativeOutputModel interface {
	Model
	NativeOutput() bool
}

// CallSettings are a model call's tunables. Zero values mean the provider's defaults.
type CallSettings struct {
	Temperature     *float64
	TopP            *float64
	MaxOutputTokens int64
	// Extra carries provider-specific settings, as JSON.
	Extra map[string]json.RawMessage
}

// ModelEventKind says what a [ModelEvent] carries.
type ModelEventKind uint8

// The kinds of model event.
const (
	// ModelTextDelta carries answer text in Text.
	ModelTextDelta ModelEventKind = iota + 1
	// ModelReasoningDelta carries reasoning text in Text.
	ModelReasoningDelta
	// ModelReasoningState carries the current reasoning block's opaque state in State
	// (a signature, redacted reasoning); it may come before, between or after the block's
	// deltas and may end the block.
	ModelReasoningState
	// ModelToolCallDelta carries a fragment of a tool call: Index, ID, Name, Text.
	ModelToolCallDelta
	// ModelUsage carries the call's usage so far in Usage: a snapshot that replaces the
	// previous one of the same call.
	ModelUsage
	// ModelFinish ends the call with Reason.
	ModelFinish
	// ModelResponseInfo reports what the provider says of the response besides its
	// content: Name is the model that served the call, as the provider names it (often a
	// dated version of the one asked for; no "provider:" prefix). It may come at any
	// point before the ModelFinish, normally at most once per call; a later one replaces
	// an earlier one, and a call without one was served by the model asked for. It adds
	// nothing to the transcript and is not a run event: the runtime reports the model on
	// the call's span (gen_ai.response.model).
	//
	// A retry or a fallback commits to a call once it has emitted any event, so a model
	// sends this one together with its first other event (just before it), never alone
	// before a failure: a call that failed before answering must still look so.
	ModelResponseInfo
)

// ModelEvent is one event of a model stream. Kind says which fields are set.
type ModelEvent struct {
	Kind ModelEventKind
	// Text is the delta of text, reasoning or tool-call arguments.
	Text string
	// Index is the tool call's position as the provider numbers it, or -1 when the
	// provider sends none. Providers that number every call 0 are handled.
	Index int
	// ID is the tool call's id, where the provider sends it (often only on the first
	// fragment).
	ID string
	// Name is the tool's name, where the provider sends it; for ModelResponseInfo, the
	// model that served the call.
	Name string
	// State is opaque reasoning state (ModelReasoningState).
	State []byte
	// Usage is the call's usage so far (ModelUsage).
	Usage Usage
	// Reason is why the call finished (ModelFinish).
	Reason FinishReason
}

// FinishReason is why a model call stopped.
type FinishReason uint8

// The finish reasons.
const (
	FinishUnspecified FinishReason = iota
	FinishStop
	FinishToolCalls
	FinishLength
	FinishContentFilter
	// FinishInterrupted: the call was cut short by a cancel, an interrupting steer or a
	// stop.
	FinishInterrupted
	// FinishError: the call failed.
	FinishError
)

func (r FinishReason) String() string {
	switch r {
	case FinishStop:
		return "stop"
	case FinishToolCalls:
		return "tool_calls"
	case FinishLength:
		return "length"
	case FinishContentFilter:
		return "content_filter"
	case FinishInterrupted:
		return "interrupted"
	case FinishError:
		return "error"
	}
	return "unspecified"
}
