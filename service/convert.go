package service

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// fieldErrors collects what is wrong with a client's message, field by field, for a
// google.rpc.BadRequest.
type fieldErrors []*errdetails.BadRequest_FieldViolation

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// summary is the first violation, "field: description", saying how many more there are.
func (fe fieldErrors) summary() string {
	if len(fe) == 0 {
		return ""
	}
	s := fe[0].Field + ": " + fe[0].Description
	if len(fe) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(fe)-1)
	}
	return s
}

// jsonToValue decodes JSON into a google.protobuf.Value.
func jsonToValue(raw []byte) (*structpb.Value, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return structpb.NewValue(v)
}

// messagesFromProto converts a client's transcript; field names the list for errors.
func messagesFromProto(ms []*agentdv1.Message, field string, fe *fieldErrors) []runtime.Message {
	out := make([]runtime.Message, 0, len(ms)+1)
	for i, m := range ms {
		out = append(out, messageFromProto(m, fmt.Sprintf("%s[%d]", field, i), fe))
	}
	return out
}

func messageFromProto(m *agentdv1.Message, field string, fe *fieldErrors) runtime.Message {
	rm := runtime.Message{ID: m.GetId(), Role: roleFromProto(m.GetRole()), Partial: m.GetPartial()}
	if rm.Role == runtime.RoleUnspecified {
		fe.add(field+".role", "must be set (ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL)")
	}
	if len(m.GetParts()) == 0 {
		fe.add(field+".parts", "must not be empty")
	}
	rm.Parts = make([]runtime.Part, 0, len(m.GetParts()))
	for j, p := range m.GetParts() {
		pf := fmt.Sprintf("%s.parts[%d]", field, j)
		rp := runtime.Part{ID: p.GetId()}
		switch k := p.GetKind().(type) {
		case *agentdv1.Part_Text:
			rp.Kind, rp.Text = runtime.PartText, k.Text
		case *agentdv1.Part_Reasoning:
			rp.Kind, rp.Text, rp.State = runtime.PartReasoning, k.Reasoning.GetText(), k.Reasoning.GetState()
		case *agentdv1.Part_ToolCall:
			tc := k.ToolCall
			if tc.GetId() == "" || tc.GetName() == "" {
				fe.add(pf+".tool_call", "needs an id and a name")
			}
			rp.Kind = runtime.PartToolCall
			rp.ToolCall = runtime.ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArgumentsJson(), Executor: executorFromProto(tc.GetExecutor())}
		case *agentdv1.Part_ToolResult:
			tr := k.ToolResult
			if tr.GetToolCallId() == "" {
				fe.add(pf+".tool_result.tool_call_id", "must be set")
			}
			out, err := outputFromProto(tr.GetText(), tr.GetJson(), tr.GetIsError(), tr.GetMedia())
			if err != nil {
				fe.add(pf+".tool_result.json", "%v", err)
			}
			rp.Kind = runtime.PartToolResult
			rp.ToolResult = runtime.ToolResult{CallID: tr.GetToolCallId(), Name: tr.GetName(), Output: out}
		case *agentdv1.Part_Media:
			rp.Kind, rp.Media = runtime.PartMedia, mediaFromProto(k.Media)
		default:
			fe.add(pf, "kind must be set (text, reasoning, tool_call, tool_result or media)")
			continue
		}
		rm.Parts = append(rm.Parts, rp)
	}
	return rm
}

func outputFromProto(text string, js *structpb.Value, isError bool, media []*agentdv1.MediaPart) (runtime.Output, error) {
	out := runtime.Output{Text: text, IsError: isError}
	if js != nil {
		s, err := wire.ValueToJSON(js)
		if err != nil {
			return out, err
		}
		out.JSON = json.RawMessage(s)
	}
	for _, m := range media {
		out.Media = append(out.Media, mediaFromProto(m))
	}
	return out, nil
}

func mediaFromProto(m *agentdv1.MediaPart) runtime.Media {
	return runtime.Media{MIMEType: m.GetMimeType(), Data: m.GetData(), URI: m.GetUri(), Name: m.GetName()}
}

func outcomeToProto(o runtime.Outcome) agentdv1.ApprovalOutcome {
	switch o {
	case runtime.OutcomeApproved:
		return agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED
	case runtime.OutcomeDenied:
		return agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED
	case runtime.OutcomeExpired:
		return agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED
	case runtime.OutcomeCancelled:
		return agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED
	}
	return agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_UNSPECIFIED
}

// approvalToProto is a tool's approval policy as ListAgents shows it.
func approvalToProto(a runtime.Approval) agentdv1.ToolApproval {
	switch a {
	case runtime.ApprovalAuto:
		return agentdv1.ToolApproval_TOOL_APPROVAL_AUTO
	case runtime.ApprovalAsk:
		return agentdv1.ToolApproval_TOOL_APPROVAL_ASK
	case runtime.ApprovalAlways:
		return agentdv1.ToolApproval_TOOL_APPROVAL_ALWAYS
	}
	// A level tighter than any the wire knows asks, and only an explicit decision can
	// answer it.
	return agentdv1.ToolApproval_TOOL_APPROVAL_ALWAYS
}

func decidedByToProto(d runtime.DecidedBy) agentdv1.DecidedBy {
	switch d {
	case runtime.DecidedByClient:
		return agentdv1.DecidedBy_DECIDED_BY_CLIENT
	case runtime.DecidedByPolicy:
		return agentdv1.DecidedBy_DECIDED_BY_POLICY
	case runtime.DecidedByHook:
		return agentdv1.DecidedBy_DECIDED_BY_HOOK
	case runtime.DecidedByTimeout:
		return agentdv1.DecidedBy_DECIDED_BY_TIMEOUT
	case runtime.DecidedByGrant:
		return agentdv1.DecidedBy_DECIDED_BY_GRANT
	case runtime.DecidedByRunEnd:
		return agentdv1.DecidedBy_DECIDED_BY_RUN_END
	}
	return agentdv1.DecidedBy_DECIDED_BY_UNSPECIFIED
}

func blockKindToProto(k runtime.BlockKind) agentdv1.MessageKind {
	if k == runtime.BlockReasoning {
		return agentdv1.MessageKind_MESSAGE_KIND_REASONING
	}
	return agentdv1.MessageKind_MESSAGE_KIND_TEXT
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func approvalRequestedToProto(e *runtime.ApprovalRequested) *agentdv1.ApprovalRequested {
	return &agentdv1.ApprovalRequested{
		ApprovalId: e.ApprovalID, ToolCallId: e.CallID, ToolName: e.ToolName,
		ArgumentsJson: protoString(e.Arguments), Editable: e.Editable, ExpiresAt: timestampOrNil(e.ExpiresAt), Reason: e.Reason,
	}
}

// eventToProto converts a runtime event (all but RunFinished, which the session builds)
// into a RunEvent without its seq, run id and time.
func eventToProto(ev runtime.Event) *agentdv1.RunEvent {
	switch e := ev.(type) {
	case *runtime.TextDelta:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: e.MessageID, Delta: protoString(e.Delta)}}}
	case *runtime.ReasoningDelta:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ReasoningDelta{ReasoningDelta: &agentdv1.ReasoningDelta{MessageId: e.MessageID, Delta: protoString(e.Delta)}}}
	case *runtime.ToolCallArgsDelta:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallArgsDelta{ToolCallArgsDelta: &agentdv1.ToolCallArgsDelta{ToolCallId: e.CallID, Delta: protoString(e.Delta)}}}
	case *runtime.RunStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunStarted{RunStarted: &agentdv1.RunStarted{RunId: e.RunID, ThreadId: e.ThreadID, Agent: e.Agent, Model: e.Model, TraceId: e.TraceID, Resumed: e.Resumed}}}
	case *runtime.StepStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepStarted{StepStarted: &agentdv1.StepStarted{StepId: e.StepID, Index: int32(e.Index), Turn: int32(e.Turn), IndexInTurn: int32(e.IndexInTurn)}}}
	case *runtime.MessageStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageStarted{MessageStarted: &agentdv1.MessageStarted{MessageId: e.MessageID, Role: roleToProto(e.Role), Kind: blockKindToProto(e.Kind), StepId: e.StepID, ParentMessageId: e.ParentID}}}
	case *runtime.MessageFinished:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageFinished{MessageFinished: &agentdv1.MessageFinished{MessageId: e.MessageID, Role: roleToProto(e.Role), Kind: blockKindToProto(e.Kind), ReasoningState: e.State, Partial: e.Partial}}}
	case *runtime.ToolCallStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{ToolCallId: e.CallID, Name: e.Name, MessageId: e.MessageID, Executor: executorToProto(e.Executor), StepId: e.StepID}}}
	case *runtime.ToolCallArgsDone:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallArgsDone{ToolCallArgsDone: &agentdv1.ToolCallArgsDone{ToolCallId: e.CallID, ArgumentsJson: protoString(e.Arguments)}}}
	case *runtime.ApprovalRequested:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalRequested{ApprovalRequested: approvalRequestedToProto(e)}}
	case *runtime.ApprovalResolved:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
			ApprovalId: e.ApprovalID, ToolCallId: e.CallID, Outcome: outcomeToProto(e.Outcome), DecidedBy: decidedByToProto(e.DecidedBy),
			ArgumentsJson: protoString(e.Arguments), Reason: protoString(e.Reason),
		}}}
	case *runtime.ToolExecutionStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolExecutionStarted{ToolExecutionStarted: &agentdv1.ToolExecutionStarted{
			ToolCallId: e.CallID, Name: e.Name, ArgumentsJson: protoString(e.Arguments), Executor: executorToProto(e.Executor), Deadline: timestampOrNil(e.Deadline),
		}}}
	case *runtime.ToolCallResult:
		r := &agentdv1.ToolCallResult{ToolCallId: e.Result.CallID, Name: e.Result.Name, IsError: e.Result.Output.IsError, Duration: durationpb.New(e.Duration), Media: mediaToProto(e.Result.Output.Media)}
		if v := outputJSON(e.Result.Output); v != nil {
			r.Output = &agentdv1.ToolCallResult_Json{Json: v}
		} else {
			// As the transcript records it (wire.MessageToProto): JSON that does not parse
			// as text.
			r.Output = &agentdv1.ToolCallResult_Text{Text: protoString(e.Result.Output.String())}
		}
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallResult{ToolCallResult: r}}
	case *runtime.ToolCallsCancelled:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallsCancelled{ToolCallsCancelled: &agentdv1.ToolCallsCancelled{ToolCallIds: e.CallIDs, Reason: e.Reason}}}
	case *runtime.SteerApplied:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_SteerApplied{SteerApplied: &agentdv1.SteerApplied{ClientSeq: e.Seq, StepId: e.StepID, MessageId: e.MessageID, Dropped: e.Dropped, DropReason: e.DropReason}}}
	case *runtime.StepFinished:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepFinished{StepFinished: &agentdv1.StepFinished{StepId: e.StepID, FinishReason: finishReasonToProto(e.FinishReason), Usage: usageToProto(e.Usage), NewMessages: messagesToProto(e.NewMessages)}}}
	case *runtime.HookEvent:
		v, err := structpb.NewValue(e.Value)
		if err != nil {
			// A value protobuf cannot hold goes through JSON, or as its text.
			if b, jerr := json.Marshal(e.Value); jerr == nil {
				v, err = jsonToValue(b)
			}
			if err != nil {
				v = structpb.NewStringValue(fmt.Sprint(e.Value))
			}
		}
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_HookEvent{HookEvent: &agentdv1.HookEvent{Name: e.Name, Value: v}}}
	}
	return nil
}

// agentToProto describes an agent for ListAgents.
func agentToProto(e *Agent) *agentdv1.Agent {
	a := &agentdv1.Agent{
		Name: e.Name, Description: e.Description, Model: e.Runtime.Model().Name(),
		ModelOverrideAllowed: e.Models != nil, MaxSteps: int32(e.Runtime.MaxSteps()),
	}
	for _, t := range toolInfos(e) {
		ti := &agentdv1.ToolInfo{
			Spec:             &agentdv1.ToolSpec{Name: t.Spec.Name, Description: t.Spec.Description},
			Source:           t.Source,
			Enabled:          !t.Policy.Disabled,
			RequiresApproval: t.Policy.Approval > runtime.ApprovalAuto,
			Approval:         approvalToProto(t.Policy.Approval),
			CompletesRun:     t.Spec.CompletesRun,
			Parallel:         t.Parallel,
		}
		if t.Timeout > 0 {
			ti.Timeout = durationpb.New(t.Timeout)
		}
		if len(t.Spec.Parameters) > 0 {
			var m map[string]any
			if err := json.Unmarshal(t.Spec.Parameters, &m); err == nil {
				ti.Spec.Parameters, _ = structpb.NewStruct(m)
			}
		}
		a.Tools = append(a.Tools, ti)
	}
	return a
}

// The service sends transcripts whole: clients store and send them back.
var fullWire = wire.Options{}

func protoString(s string) string                            { return wire.ProtoString(s) }
func roleFromProto(r agentdv1.Role) runtime.Role             { return wire.RoleFromProto(r) }
func roleToProto(r runtime.Role) agentdv1.Role               { return wire.RoleToProto(r) }
func executorToProto(e runtime.Executor) agentdv1.Executor   { return wire.ExecutorToProto(e) }
func executorFromProto(e agentdv1.Executor) runtime.Executor { return wire.ExecutorFromProto(e) }
func mediaToProto(ms []runtime.Media) []*agentdv1.MediaPart  { return wire.MediaToProto(ms, fullWire) }
func messagesToProto(ms []runtime.Message) []*agentdv1.Message {
	return wire.MessagesToProto(ms, fullWire)
}
func outputJSON(o runtime.Output) *structpb.Value  { return wire.OutputJSON(o) }
func usageToProto(u runtime.Usage) *agentdv1.Usage { return wire.UsageToProto(u) }
func finishReasonToProto(r runtime.FinishReason) agentdv1.FinishReason {
	return wire.FinishReasonToProto(r)
}
func endReasonToProto(r runtime.EndReason) agentdv1.RunEndReason { return wire.EndReasonToProto(r) }
