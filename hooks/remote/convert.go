package remote

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// The conversions below mirror service/convert.go, which hooks may not import. Requests
// leave out media bytes and opaque reasoning state: a hook decides on text, and a
// transcript with images would soon outgrow a hook server's message size limit.

// runInfo converts the run's description. Metadata that does not encode as a JSON object
// is left out, with a warning.
func (h *Hook) runInfo(ctx context.Context, in *runtime.RunInfo) *hooksv1.RunInfo {
	if in == nil {
		return nil
	}
	ri := &hooksv1.RunInfo{RunId: in.RunID, ThreadId: in.ThreadID, Agent: protoString(in.Agent), Model: protoString(in.Model)}
	if len(in.Metadata) > 0 {
		md, err := metadataToStruct(in.Metadata)
		if err != nil {
			h.log.WarnContext(ctx, "remote hook: run metadata left out of the request", "hook", h.name, "error", err)
		}
		ri.Metadata = md
	}
	return ri
}

// metadataToStruct encodes metadata through JSON, so that any value encoding/json
// accepts (structs, typed slices, numbers of every width) becomes a Struct.
func metadataToStruct(md map[string]any) (*structpb.Struct, error) {
	b, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return s, nil
}

// protoString makes s safe for a protobuf string field, which must be valid UTF-8.
func protoString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func messagesToProto(ms []runtime.Message) []*agentdv1.Message {
	out := make([]*agentdv1.Message, len(ms))
	for i, m := range ms {
		out[i] = messageToProto(m)
	}
	return out
}

func messageToProto(m runtime.Message) *agentdv1.Message {
	pm := &agentdv1.Message{Id: m.ID, Role: roleToProto(m.Role), Partial: m.Partial, Parts: make([]*agentdv1.Part, 0, len(m.Parts))}
	for _, p := range m.Parts {
		pp := &agentdv1.Part{Id: p.ID}
		switch p.Kind {
		case runtime.PartText:
			pp.Kind = &agentdv1.Part_Text{Text: protoString(p.Text)}
		case runtime.PartReasoning:
			pp.Kind = &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: protoString(p.Text)}}
		case runtime.PartToolCall:
			c := p.ToolCall
			pp.Kind = &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: c.ID, Name: c.Name, ArgumentsJson: protoString(c.Arguments), Executor: executorToProto(c.Executor)}}
		case runtime.PartToolResult:
			r := p.ToolResult
			trp := &agentdv1.ToolResultPart{ToolCallId: r.CallID, Name: r.Name, IsError: r.Output.IsError, Media: mediaToProto(r.Output.Media)}
			if v := outputJSON(r.Output); v != nil {
				trp.Output = &agentdv1.ToolResultPart_Json{Json: v}
			} else {
				trp.Output = &agentdv1.ToolResultPart_Text{Text: protoString(r.Output.String())}
			}
			pp.Kind = &agentdv1.Part_ToolResult{ToolResult: trp}
		case runtime.PartMedia:
			pp.Kind = &agentdv1.Part_Media{Media: mediaToProto([]runtime.Media{p.Media})[0]}
		default:
			continue
		}
		pm.Parts = append(pm.Parts, pp)
	}
	return pm
}

// mediaToProto keeps what describes the media and leaves out the bytes.
func mediaToProto(ms []runtime.Media) []*agentdv1.MediaPart {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*agentdv1.MediaPart, len(ms))
	for i, m := range ms {
		out[i] = &agentdv1.MediaPart{MimeType: m.MIMEType, Uri: m.URI, Name: protoString(m.Name)}
	}
	return out
}

func roleToProto(r runtime.Role) agentdv1.Role {
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

func executorToProto(e runtime.Executor) agentdv1.Executor {
	if e == runtime.ExecutorClient {
		return agentdv1.Executor_EXECUTOR_CLIENT
	}
	return agentdv1.Executor_EXECUTOR_SERVER
}

// outputJSON returns a tool output's JSON as a Value, or nil when it has none or it is not
// valid JSON (the text form then carries it).
func outputJSON(o runtime.Output) *structpb.Value {
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

func outputToProto(o runtime.Output) *hooksv1.ToolOutput {
	out := &hooksv1.ToolOutput{IsError: o.IsError}
	if v := outputJSON(o); v != nil {
		out.Output = &hooksv1.ToolOutput_Json{Json: v}
	} else {
		out.Output = &hooksv1.ToolOutput_Text{Text: protoString(o.String())}
	}
	return out
}

// outputFromProto converts an output a hook server wrote; field names it in errors.
func outputFromProto(o *hooksv1.ToolOutput, field string) (runtime.Output, error) {
	out := runtime.Output{Text: o.GetText(), IsError: o.GetIsError()}
	if js := o.GetJson(); js != nil {
		b, err := json.Marshal(js.AsInterface())
		if err != nil {
			return out, invalid("%s.json: %v", field, err)
		}
		out.JSON = b
	}
	return out, nil
}

func usageToProto(u runtime.Usage) *agentdv1.Usage {
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

func finishReasonToProto(r runtime.FinishReason) agentdv1.FinishReason {
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

func endReasonToProto(r runtime.EndReason) agentdv1.RunEndReason {
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
