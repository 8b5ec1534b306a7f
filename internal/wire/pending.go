package wire

import (
	"encoding/json"
	"fmt"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// The strict mode: agentd's own payloads (a continuation's parked step), which agentd
// wrote and reads back. Every enum is mapped both ways exactly, unset stays unset, and a
// value this release does not know is an error, never a default.

// PendingToProto converts a parked step for a continuation (strict: agentd's own
// payload, every value checked, nothing dropped). It is exact for everything a parked run
// holds, with one exception: a tool result part inside a message (a steer's) carries its
// JSON as a google.protobuf.Value, as the transcript does, so it comes back as
// ValueToJSON writes it, which is how a steer's tool result entered the run in the first
// place. Tool results of pending calls keep their bytes (ToolOutput). nil becomes nil.
func PendingToProto(p *runtime.Pending) (*continuationv1.Pending, error) {
	if p == nil {
		return nil, nil
	}
	msg, err := messageToPayload(p.Message)
	if err != nil {
		return nil, fmt.Errorf("pending message: %w", err)
	}
	out := &continuationv1.Pending{
		Step: int64(p.Step), Turn: int64(p.Turn), StepInTurn: int64(p.StepInTurn),
		StepId: ProtoString(p.StepID), Message: msg,
	}
	for i, c := range p.Calls {
		state, ok := callStateToPayload[c.State]
		if !ok {
			return nil, fmt.Errorf("pending call %d: unknown state %d", i, c.State)
		}
		call, err := toolCallToPayload(c.Call)
		if err != nil {
			return nil, fmt.Errorf("pending call %d: %w", i, err)
		}
		out.Calls = append(out.Calls, &continuationv1.PendingCall{
			Call: call, State: state, ApprovalId: ProtoString(c.ApprovalID), Reason: ProtoString(c.Reason),
			Approved: c.Approved, Result: outputToPayload(c.Result),
		})
	}
	for i, st := range p.Steers {
		msg, err := messageToPayload(st.Message)
		if err != nil {
			return nil, fmt.Errorf("steer %d: %w", i, err)
		}
		out.Steers = append(out.Steers, &continuationv1.Steer{ClientSeq: st.Seq, Message: msg, Interrupt: st.Interrupt})
	}
	for _, e := range p.OutputErrors {
		out.OutputErrors = append(out.OutputErrors, ProtoString(e))
	}
	return out, nil
}

// PendingFromProto converts a continuation's parked step back; nil becomes nil. It fails,
// naming what, for an enum value or part this release does not know.
func PendingFromProto(p *continuationv1.Pending) (*runtime.Pending, error) {
	if p == nil {
		return nil, nil
	}
	msg, err := messageFromPayload(p.GetMessage())
	if err != nil {
		return nil, fmt.Errorf("pending message: %w", err)
	}
	out := &runtime.Pending{
		Step: int(p.GetStep()), Turn: int(p.GetTurn()), StepInTurn: int(p.GetStepInTurn()),
		StepID: p.GetStepId(), Message: msg,
	}
	for i, c := range p.GetCalls() {
		state, ok := callStateFromPayload[c.GetState()]
		if !ok {
			return nil, fmt.Errorf("pending call %d: unknown state %d", i, c.GetState())
		}
		call, err := toolCallFromPayload(c.GetCall())
		if err != nil {
			return nil, fmt.Errorf("pending call %d: %w", i, err)
		}
		out.Calls = append(out.Calls, runtime.PendingCall{
			Call: call, State: state, ApprovalID: c.GetApprovalId(), Reason: c.GetReason(),
			Approved: c.GetApproved(), Result: outputFromPayload(c.GetResult()),
		})
	}
	for i, st := range p.GetSteers() {
		msg, err := messageFromPayload(st.GetMessage())
		if err != nil {
			return nil, fmt.Errorf("steer %d: %w", i, err)
		}
		out.Steers = append(out.Steers, runtime.Steer{Seq: st.GetClientSeq(), Message: msg, Interrupt: st.GetInterrupt()})
	}
	out.OutputErrors = p.GetOutputErrors()
	return out, nil
}

var (
	callStateToPayload = map[runtime.CallState]continuationv1.CallState{
		0:                            continuationv1.CallState_CALL_STATE_UNSPECIFIED,
		runtime.CallDone:             continuationv1.CallState_CALL_STATE_DONE,
		runtime.CallAwaitingApproval: continuationv1.CallState_CALL_STATE_AWAITING_APPROVAL,
		runtime.CallReady:            continuationv1.CallState_CALL_STATE_READY,
	}
	callStateFromPayload = invertMap(callStateToPayload)

	roleToPayload = map[runtime.Role]agentdv1.Role{
		runtime.RoleUnspecified: agentdv1.Role_ROLE_UNSPECIFIED,
		runtime.RoleSystem:      agentdv1.Role_ROLE_SYSTEM,
		runtime.RoleUser:        agentdv1.Role_ROLE_USER,
		runtime.RoleAssistant:   agentdv1.Role_ROLE_ASSISTANT,
		runtime.RoleTool:        agentdv1.Role_ROLE_TOOL,
	}
	roleFromPayload = invertMap(roleToPayload)

	// Unlike the transcript's conversion (wire.ExecutorToProto), an unset executor stays
	// unset: the payload gives back what it was given.
	executorToPayload = map[runtime.Executor]agentdv1.Executor{
		0:                      agentdv1.Executor_EXECUTOR_UNSPECIFIED,
		runtime.ExecutorServer: agentdv1.Executor_EXECUTOR_SERVER,
		runtime.ExecutorClient: agentdv1.Executor_EXECUTOR_CLIENT,
	}
	executorFromPayload = invertMap(executorToPayload)
)

func invertMap[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// messageToPayload converts m; the zero Message becomes nil.
func messageToPayload(m runtime.Message) (*agentdv1.Message, error) {
	if m.ID == "" && m.Role == 0 && len(m.Parts) == 0 && !m.Partial {
		return nil, nil
	}
	role, ok := roleToPayload[m.Role]
	if !ok {
		return nil, fmt.Errorf("unknown role %d", m.Role)
	}
	out := &agentdv1.Message{Id: ProtoString(m.ID), Role: role, Partial: m.Partial}
	for i, p := range m.Parts {
		pp := &agentdv1.Part{Id: ProtoString(p.ID)}
		switch p.Kind {
		case runtime.PartText:
			pp.Kind = &agentdv1.Part_Text{Text: ProtoString(p.Text)}
		case runtime.PartReasoning:
			pp.Kind = &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: ProtoString(p.Text), State: p.State}}
		case runtime.PartToolCall:
			c, err := toolCallToPayload(p.ToolCall)
			if err != nil {
				return nil, fmt.Errorf("part %d: %w", i, err)
			}
			pp.Kind = &agentdv1.Part_ToolCall{ToolCall: c}
		case runtime.PartToolResult:
			r := p.ToolResult
			tr := &agentdv1.ToolResultPart{ToolCallId: ProtoString(r.CallID), Name: ProtoString(r.Name), IsError: r.Output.IsError, Media: mediaToPayload(r.Output.Media)}
			if v := OutputJSON(r.Output); v != nil {
				tr.Output = &agentdv1.ToolResultPart_Json{Json: v}
			} else {
				tr.Output = &agentdv1.ToolResultPart_Text{Text: ProtoString(r.Output.String())}
			}
			pp.Kind = &agentdv1.Part_ToolResult{ToolResult: tr}
		case runtime.PartMedia:
			pp.Kind = &agentdv1.Part_Media{Media: mediaToPayload([]runtime.Media{p.Media})[0]}
		default:
			return nil, fmt.Errorf("part %d: unknown kind %d", i, p.Kind)
		}
		out.Parts = append(out.Parts, pp)
	}
	return out, nil
}

// messageFromPayload converts m; nil becomes the zero Message.
func messageFromPayload(m *agentdv1.Message) (runtime.Message, error) {
	if m == nil {
		return runtime.Message{}, nil
	}
	role, ok := roleFromPayload[m.GetRole()]
	if !ok {
		return runtime.Message{}, fmt.Errorf("unknown role %d", m.GetRole())
	}
	out := runtime.Message{ID: m.GetId(), Role: role, Partial: m.GetPartial()}
	for i, p := range m.GetParts() {
		rp := runtime.Part{ID: p.GetId()}
		switch k := p.GetKind().(type) {
		case *agentdv1.Part_Text:
			rp.Kind, rp.Text = runtime.PartText, k.Text
		case *agentdv1.Part_Reasoning:
			rp.Kind, rp.Text, rp.State = runtime.PartReasoning, k.Reasoning.GetText(), k.Reasoning.GetState()
		case *agentdv1.Part_ToolCall:
			c, err := toolCallFromPayload(k.ToolCall)
			if err != nil {
				return runtime.Message{}, fmt.Errorf("part %d: %w", i, err)
			}
			rp.Kind, rp.ToolCall = runtime.PartToolCall, c
		case *agentdv1.Part_ToolResult:
			r := k.ToolResult
			o := runtime.Output{Text: r.GetText(), IsError: r.GetIsError(), Media: mediaFromPayload(r.GetMedia())}
			if js := r.GetJson(); js != nil {
				s, err := ValueToJSON(js)
				if err != nil {
					return runtime.Message{}, fmt.Errorf("part %d: tool result: %w", i, err)
				}
				o.JSON = json.RawMessage(s)
			}
			rp.Kind, rp.ToolResult = runtime.PartToolResult, runtime.ToolResult{CallID: r.GetToolCallId(), Name: r.GetName(), Output: o}
		case *agentdv1.Part_Media:
			rp.Kind, rp.Media = runtime.PartMedia, mediaFromPayload([]*agentdv1.MediaPart{k.Media})[0]
		default:
			return runtime.Message{}, fmt.Errorf("part %d: no kind", i)
		}
		out.Parts = append(out.Parts, rp)
	}
	return out, nil
}

func toolCallToPayload(c runtime.ToolCall) (*agentdv1.ToolCallPart, error) {
	e, ok := executorToPayload[c.Executor]
	if !ok {
		return nil, fmt.Errorf("tool call %q: unknown executor %d", c.ID, c.Executor)
	}
	return &agentdv1.ToolCallPart{Id: ProtoString(c.ID), Name: ProtoString(c.Name), ArgumentsJson: ProtoString(c.Arguments), Executor: e}, nil
}

func toolCallFromPayload(c *agentdv1.ToolCallPart) (runtime.ToolCall, error) {
	e, ok := executorFromPayload[c.GetExecutor()]
	if !ok {
		return runtime.ToolCall{}, fmt.Errorf("tool call %q: unknown executor %d", c.GetId(), c.GetExecutor())
	}
	return runtime.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArgumentsJson(), Executor: e}, nil
}

// outputToPayload converts o; the zero Output becomes nil.
func outputToPayload(o runtime.Output) *continuationv1.ToolOutput {
	if o.Text == "" && o.JSON == nil && !o.IsError && len(o.Media) == 0 {
		return nil
	}
	out := &continuationv1.ToolOutput{Text: ProtoString(o.Text), IsError: o.IsError, Media: mediaToPayload(o.Media)}
	if o.JSON != nil {
		// Present even when empty: a non-nil JSON is the output.
		out.Json = append([]byte{}, o.JSON...)
	}
	return out
}

// outputFromPayload converts o; nil becomes the zero Output.
func outputFromPayload(o *continuationv1.ToolOutput) runtime.Output {
	if o == nil {
		return runtime.Output{}
	}
	out := runtime.Output{Text: o.GetText(), IsError: o.GetIsError(), Media: mediaFromPayload(o.GetMedia())}
	if o.Json != nil {
		out.JSON = json.RawMessage(o.Json)
	}
	return out
}

func mediaToPayload(ms []runtime.Media) []*agentdv1.MediaPart {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*agentdv1.MediaPart, len(ms))
	for i, m := range ms {
		out[i] = &agentdv1.MediaPart{MimeType: ProtoString(m.MIMEType), Data: m.Data, Uri: ProtoString(m.URI), Name: ProtoString(m.Name)}
	}
	return out
}

func mediaFromPayload(ms []*agentdv1.MediaPart) []runtime.Media {
	if len(ms) == 0 {
		return nil
	}
	out := make([]runtime.Media, len(ms))
	for i, m := range ms {
		out[i] = runtime.Media{MIMEType: m.GetMimeType(), Data: m.GetData(), URI: m.GetUri(), Name: m.GetName()}
	}
	return out
}
