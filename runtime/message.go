package runtime

import (
	"encoding/json"
	"strings"
)

// Role says who wrote a [Message].
type Role uint8

// The roles of a transcript.
const (
	RoleUnspecified Role = iota
	RoleSystem
	RoleUser
	RoleAssistant
	RoleTool
)

func (r Role) String() string {
	switch r {
	case RoleSystem:
		return "system"
	case RoleUser:
		return "user"
	case RoleAssistant:
		return "assistant"
	case RoleTool:
		return "tool"
	}
	return "unspecified"
}

// Message is one entry of a transcript. An assistant message keeps its parts in the order
// the model produced them; the results of its tool calls follow it as one [RoleTool]
// message, in call order.
type Message struct {
	ID    string
	Role  Role
	Parts []Part
	// Partial marks a message cut short by a cancel, an interrupting steer or a failure.
	// A partial assistant message keeps its text and reasoning but no tool calls.
	Partial bool
}

// PartKind says what a [Part] holds.
type PartKind uint8

// The kinds of part.
const (
	PartText PartKind = iota + 1
	PartReasoning
	PartToolCall
	PartToolResult
	PartMedia
)

// Part is one piece of a message. Kind says which fields are set.
type Part struct {
	Kind PartKind
	// ID names a streamed text or reasoning block (MessageStarted.MessageID).
	ID string
	// Text is the text of a PartText or PartReasoning part.
	Text string
	// State is a PartReasoning part's opaque provider state, round-tripped unchanged.
	State []byte
	// ToolCall is set for PartToolCall.
	ToolCall ToolCall
	// ToolResult is set for PartToolResult.
	ToolResult ToolResult
	// Media is set for PartMedia.
	Media Media
}

// Executor says where a tool call runs.
type Executor uint8

// The executors.
const (
	ExecutorServer Executor = iota + 1
	ExecutorClient
)

// ToolCall is a call of a tool by the model.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the exact JSON text the call runs with.
	Arguments string
	Executor  Executor
}

// ToolResult is the outcome of a tool call, as the model sees it.
type ToolResult struct {
	CallID string
	Name   string
	Output Output
}

// Output is what a tool returns. JSON, when set, is the output; otherwise Text is.
type Output struct {
	Text string
	JSON json.RawMessage
	// IsError marks a failed call; the output then says why, for the model to read.
	IsError bool
	Media   []Media
}

// String returns the output as the model reads it: the JSON text, or the text.
func (o Output) String() string {
	if o.JSON != nil {
		return string(o.JSON)
	}
	return o.Text
}

// ErrorOutput returns an error output with the given text.
func ErrorOutput(text string) Output { return Output{Text: text, IsError: true} }

// Media is binary content with a media type.
type Media struct {
	MIMEType string
	Data     []byte
	URI      string
	Name     string
}

// Usage counts what a run consumed.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	ReasoningTokens          int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
	ModelCalls               int64
	ToolCalls                int64
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		ReasoningTokens:          u.ReasoningTokens + v.ReasoningTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		ModelCalls:               u.ModelCalls + v.ModelCalls,
		ToolCalls:                u.ToolCalls + v.ToolCalls,
	}
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Kind: PartText, Text: text} }

// UserMessage returns a user message with one text part.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Parts: []Part{TextPart(text)}}
}

// SystemMessage returns a system message with one text part.
func SystemMessage(text string) Message {
	return Message{Role: RoleSystem, Parts: []Part{TextPart(text)}}
}

// Text returns the concatenated text parts of m (reasoning excluded).
func (m Message) Text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Kind == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ToolCalls returns the tool calls of m, in order.
func (m Message) ToolCalls() []ToolCall {
	var calls []ToolCall
	for _, p := range m.Parts {
		if p.Kind == PartToolCall {
			calls = append(calls, p.ToolCall)
		}
	}
	return calls
}
