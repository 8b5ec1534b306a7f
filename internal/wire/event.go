package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

func OutcomeToProto(o runtime.Outcome) agentdv1.ApprovalOutcome {
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

// ApprovalToProto is a tool's approval policy as ListAgents shows it.
func ApprovalToProto(a runtime.Approval) agentdv1.ToolApproval {
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

func DecidedByToProto(d runtime.DecidedBy) agentdv1.DecidedBy {
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

func BlockKindToProto(k runtime.BlockKind) agentdv1.MessageKind {
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

func ApprovalRequestedToProto(e *runtime.ApprovalRequested) *agentdv1.ApprovalRequested {
	return &agentdv1.ApprovalRequested{
		ApprovalId: e.ApprovalID, ToolCallId: e.CallID, ToolName: e.ToolName,
		ArgumentsJson: ProtoString(e.Arguments), Editable: e.Editable, ExpiresAt: timestampOrNil(e.ExpiresAt), Reason: e.Reason,
	}
}

// EventToProto converts a runtime event (all but RunFinished, which the session builds)
// into a RunEvent without its seq, run id and time.
func EventToProto(ev runtime.Event) *agentdv1.RunEvent {
	switch e := ev.(type) {
	case *runtime.TextDelta:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: e.MessageID, Delta: ProtoString(e.Delta)}}}
	case *runtime.ReasoningDelta:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ReasoningDelta{ReasoningDelta: &agentdv1.ReasoningDelta{MessageId: e.MessageID, Delta: ProtoString(e.Delta)}}}
	case *runtime.ToolCallArgsDelta:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallArgsDelta{ToolCallArgsDelta: &agentdv1.ToolCallArgsDelta{ToolCallId: e.CallID, Delta: ProtoString(e.Delta)}}}
	case *runtime.RunStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunStarted{RunStarted: &agentdv1.RunStarted{RunId: e.RunID, ThreadId: e.ThreadID, Agent: e.Agent, Model: e.Model, TraceId: e.TraceID, Resumed: e.Resumed}}}
	case *runtime.StepStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepStarted{StepStarted: &agentdv1.StepStarted{StepId: e.StepID, Index: int32(e.Index), Turn: int32(e.Turn), IndexInTurn: int32(e.IndexInTurn)}}}
	case *runtime.MessageStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageStarted{MessageStarted: &agentdv1.MessageStarted{MessageId: e.MessageID, Role: RoleToProto(e.Role), Kind: BlockKindToProto(e.Kind), StepId: e.StepID, ParentMessageId: e.ParentID}}}
	case *runtime.MessageFinished:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageFinished{MessageFinished: &agentdv1.MessageFinished{MessageId: e.MessageID, Role: RoleToProto(e.Role), Kind: BlockKindToProto(e.Kind), ReasoningState: e.State, Partial: e.Partial}}}
	case *runtime.ToolCallStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{ToolCallId: e.CallID, Name: e.Name, MessageId: e.MessageID, Executor: ExecutorToProto(e.Executor), StepId: e.StepID}}}
	case *runtime.ToolCallArgsDone:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallArgsDone{ToolCallArgsDone: &agentdv1.ToolCallArgsDone{ToolCallId: e.CallID, ArgumentsJson: ProtoString(e.Arguments)}}}
	case *runtime.ApprovalRequested:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalRequested{ApprovalRequested: ApprovalRequestedToProto(e)}}
	case *runtime.ApprovalResolved:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
			ApprovalId: e.ApprovalID, ToolCallId: e.CallID, Outcome: OutcomeToProto(e.Outcome), DecidedBy: DecidedByToProto(e.DecidedBy),
			ArgumentsJson: ProtoString(e.Arguments), Reason: ProtoString(e.Reason),
		}}}
	case *runtime.ToolExecutionStarted:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolExecutionStarted{ToolExecutionStarted: &agentdv1.ToolExecutionStarted{
			ToolCallId: e.CallID, Name: e.Name, ArgumentsJson: ProtoString(e.Arguments), Executor: ExecutorToProto(e.Executor), Deadline: timestampOrNil(e.Deadline),
		}}}
	case *runtime.ToolCallResult:
		r := &agentdv1.ToolCallResult{ToolCallId: e.Result.CallID, Name: e.Result.Name, IsError: e.Result.Output.IsError, Duration: durationpb.New(e.Duration), Media: MediaToProto(e.Result.Output.Media, Options{})}
		if v := OutputJSON(e.Result.Output); v != nil {
			r.Output = &agentdv1.ToolCallResult_Json{Json: v}
		} else {
			// As the transcript records it (wire.MessageToProto): JSON that does not parse
			// as text.
			r.Output = &agentdv1.ToolCallResult_Text{Text: ProtoString(e.Result.Output.String())}
		}
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallResult{ToolCallResult: r}}
	case *runtime.ToolCallsCancelled:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ToolCallsCancelled{ToolCallsCancelled: &agentdv1.ToolCallsCancelled{ToolCallIds: e.CallIDs, Reason: e.Reason}}}
	case *runtime.SteerApplied:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_SteerApplied{SteerApplied: &agentdv1.SteerApplied{ClientSeq: e.Seq, StepId: e.StepID, MessageId: e.MessageID, Dropped: e.Dropped, DropReason: e.DropReason}}}
	case *runtime.StepFinished:
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepFinished{StepFinished: &agentdv1.StepFinished{StepId: e.StepID, FinishReason: FinishReasonToProto(e.FinishReason), Usage: UsageToProto(e.Usage), NewMessages: MessagesToProto(e.NewMessages, Options{})}}}
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
