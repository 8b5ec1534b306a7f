// Package wire converts the runtime's transcript types to and from agentd's protobuf
// messages. The service (events, transcripts) and remote hooks (what a hook server is
// sent) share it, so a message reads the same on every wire.
package wire

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// Options tunes the conversion to protobuf.
type Options struct {
	// OmitBinary leaves media bytes and opaque reasoning state out, keeping what
	// describes them: for receivers that only inspect a transcript.
	OmitBinary bool
}

// ProtoString makes s safe for a protobuf string field, which must be valid UTF-8.
func ProtoString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// RoleToProto converts a role.
func RoleToProto(r runtime.Role) agentdv1.Role {
	switch r {
	case runtime.RoleSystem:
		return agentdv1.Role_ROLE_SYSTEM
	case runtime.RoleUser:
		return agentdv1.Role_ROLE_USER
	case runtime.RoleAssistant:
		return agentdv1.Role_ROLE_ASSISTANT
	case runtime.RoleTool:
		return agentdv1.Role_ROLE_TOOL
	}
	return agentdv1.Role_ROLE_UNSPECIFIED
}

// RoleFromProto converts a role.
func RoleFromProto(r agentdv1.Role) runtime.Role {
	switch r {
	case agentdv1.Role_ROLE_SYSTEM:
		return runtime.RoleSystem
	case agentdv1.Role_ROLE_USER:
		return runtime.RoleUser
	case agentdv1.Role_ROLE_ASSISTANT:
		return runtime.RoleAssistant
	case agentdv1.Role_ROLE_TOOL:
		return runtime.RoleTool
	}
	return runtime.RoleUnspecified
}

// ExecutorToProto converts an executor.
func ExecutorToProto(e runtime.Executor) agentdv1.Executor {
	if e == runtime.ExecutorClient {
		return agentdv1.Executor_EXECUTOR_CLIENT
	}
	return agentdv1.Executor_EXECUTOR_SERVER
}

// ExecutorFromProto converts an executor.
func ExecutorFromProto(e agentdv1.Executor) runtime.Executor {
	if e == agentdv1.Executor_EXECUTOR_CLIENT {
		return runtime.ExecutorClient
	}
	return runtime.ExecutorServer
}

// OutputJSON returns a tool output's JSON as a Value, or nil when it has none or it is
// not valid JSON (the text form then carries it).
func OutputJSON(o runtime.Output) *structpb.Value {
	if o.JSON == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(o.JSON, &v); err != nil {
		return nil
	}
	pv, err := structpb.NewValue(v)
	if err != nil {
		return nil
	}
	return pv
}

// MediaToProto converts media.
func MediaToProto(ms []runtime.Media, opts Options) []*agentdv1.MediaPart {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*agentdv1.MediaPart, len(ms))
	for i, m := range ms {
		out[i] = &agentdv1.MediaPart{MimeType: ProtoString(m.MIMEType), Uri: ProtoString(m.URI), Name: ProtoString(m.Name)}
		if !opts.OmitBinary {
			out[i].Data = m.Data
		}
	}
	return out
}

// MessagesToProto converts a transcript.
func MessagesToProto(ms []runtime.Message, opts Options) []*agentdv1.Message {
	out := make([]*agentdv1.Message, len(ms))
	for i, m := range ms {
		out[i] = MessageToProto(m, opts)
	}
	return out
}

// MessageToProto converts a message.
func MessageToProto(m runtime.Message, opts Options) *agentdv1.Message {
	pm := &agentdv1.Message{Id: m.ID, Role: RoleToProto(m.Role), Partial: m.Partial, Parts: make([]*agentdv1.Part, 0, len(m.Parts))}
	for _, p := range m.Parts {
		pp := &agentdv1.Part{Id: p.ID}
		switch p.Kind {
		case runtime.PartText:
			pp.Kind = &agentdv1.Part_Text{Text: ProtoString(p.Text)}
		case runtime.PartReasoning:
			rp := &agentdv1.ReasoningPart{Text: ProtoString(p.Text)}
			if !opts.OmitBinary {
				rp.State = p.State
			}
			pp.Kind = &agentdv1.Part_Reasoning{Reasoning: rp}
		case runtime.PartToolCall:
			c := p.ToolCall
			pp.Kind = &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: c.ID, Name: c.Name, ArgumentsJson: ProtoString(c.Arguments), Executor: ExecutorToProto(c.Executor)}}
		case runtime.PartToolResult:
			r := p.ToolResult
			trp := &agentdv1.ToolResultPart{ToolCallId: r.CallID, Name: r.Name, IsError: r.Output.IsError, Media: MediaToProto(r.Output.Media, opts)}
			if v := OutputJSON(r.Output); v != nil {
				trp.Output = &agentdv1.ToolResultPart_Json{Json: v}
			} else {
				trp.Output = &agentdv1.ToolResultPart_Text{Text: ProtoString(r.Output.String())}
			}
			pp.Kind = &agentdv1.Part_ToolResult{ToolResult: trp}
		case runtime.PartMedia:
			pp.Kind = &agentdv1.Part_Media{Media: MediaToProto([]runtime.Media{p.Media}, opts)[0]}
		default:
			continue
		}
		pm.Parts = append(pm.Parts, pp)
	}
	return pm
}

// UsageToProto converts usage.
func UsageToProto(u runtime.Usage) *agentdv1.Usage {
	return &agentdv1.Usage{
		InputTokens:              u.InputTokens,
		OutputTokens:             u.OutputTokens,
		ReasoningTokens:          u.ReasoningTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		ModelCalls:               u.ModelCalls,
		ToolCalls:                u.ToolCalls,
	}
}

// FinishReasonToProto converts a finish reason.
func FinishReasonToProto(r runtime.FinishReason) agentdv1.FinishReason {
	switch r {
	case runtime.FinishStop:
		return agentdv1.FinishReason_FINISH_REASON_STOP
	case runtime.FinishToolCalls:
		return agentdv1.FinishReason_FINISH_REASON_TOOL_CALLS
	case runtime.FinishLength:
		return agentdv1.FinishReason_FINISH_REASON_LENGTH
	case runtime.FinishContentFilter:
		return agentdv1.FinishReason_FINISH_REASON_CONTENT_FILTER
	case runtime.FinishInterrupted:
		return agentdv1.FinishReason_FINISH_REASON_INTERRUPTED
	case runtime.FinishError:
		return agentdv1.FinishReason_FINISH_REASON_ERROR
	}
	return agentdv1.FinishReason_FINISH_REASON_UNSPECIFIED
}

// EndReasonToProto converts a run's end reason.
func EndReasonToProto(r runtime.EndReason) agentdv1.RunEndReason {
	switch r {
	case runtime.EndCompleted:
		return agentdv1.RunEndReason_RUN_END_REASON_COMPLETED
	case runtime.EndAwaitingInput:
		return agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT
	case runtime.EndCancelled:
		return agentdv1.RunEndReason_RUN_END_REASON_CANCELLED
	case runtime.EndMaxSteps:
		return agentdv1.RunEndReason_RUN_END_REASON_MAX_STEPS
	case runtime.EndStopped:
		return agentdv1.RunEndReason_RUN_END_REASON_STOPPED
	case runtime.EndFailed:
		return agentdv1.RunEndReason_RUN_END_REASON_FAILED
	case runtime.EndShutdown:
		return agentdv1.RunEndReason_RUN_END_REASON_SHUTDOWN
	}
	return agentdv1.RunEndReason_RUN_END_REASON_UNSPECIFIED
}
