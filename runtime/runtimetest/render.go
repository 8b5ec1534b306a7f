package runtimetest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/agentd/agentd/runtime"
)

// SequentialIDs returns a runtime.Config.NewID that numbers ids per prefix ("msg_1",
// "msg_2", …), for reproducible golden files. It is safe for concurrent use.
func SequentialIDs() func(prefix string) string {
	var mu sync.Mutex
	n := map[string]int{}
	return func(prefix string) string {
		mu.Lock()
		defer mu.Unlock()
		n[prefix]++
		return prefix + "_" + strconv.Itoa(n[prefix])
	}
}

// Render writes events one per line in a stable text form for golden files. Times and
// durations are left out, since they vary from run to run.
func Render(events []runtime.Event) string {
	var b strings.Builder
	for _, ev := range events {
		b.WriteString(RenderEvent(ev))
		b.WriteByte('\n')
	}
	return b.String()
}

// RenderEvent renders one event on one line.
func RenderEvent(ev runtime.Event) string {
	switch e := ev.(type) {
	case *runtime.RunStarted:
		return fmt.Sprintf("run_started run=%s thread=%s agent=%s model=%s resumed=%t", e.RunID, e.ThreadID, e.Agent, e.Model, e.Resumed)
	case *runtime.StepStarted:
		return fmt.Sprintf("step_started %s index=%d turn=%d in_turn=%d", e.StepID, e.Index, e.Turn, e.IndexInTurn)
	case *runtime.MessageStarted:
		return fmt.Sprintf("message_started %s parent=%s %s", e.MessageID, e.ParentID, kind(e.Kind))
	case *runtime.MessageFinished:
		return fmt.Sprintf("message_finished %s %s state=%q partial=%t", e.MessageID, kind(e.Kind), e.State, e.Partial)
	case *runtime.TextDelta:
		return fmt.Sprintf("text_delta %s %q", e.MessageID, e.Delta)
	case *runtime.ReasoningDelta:
		return fmt.Sprintf("reasoning_delta %s %q", e.MessageID, e.Delta)
	case *runtime.ToolCallStarted:
		return fmt.Sprintf("tool_call_started %s %s message=%s executor=%d", e.CallID, e.Name, e.MessageID, e.Executor)
	case *runtime.ToolCallArgsDelta:
		return fmt.Sprintf("tool_call_args_delta %s %q", e.CallID, e.Delta)
	case *runtime.ToolCallArgsDone:
		return fmt.Sprintf("tool_call_args_done %s %s", e.CallID, e.Arguments)
	case *runtime.ApprovalRequested:
		return fmt.Sprintf("approval_requested %s call=%s tool=%s args=%s expires=%t", e.ApprovalID, e.CallID, e.ToolName, e.Arguments, !e.ExpiresAt.IsZero())
	case *runtime.ApprovalResolved:
		return fmt.Sprintf("approval_resolved %s call=%s %s by=%d args=%s reason=%q", e.ApprovalID, e.CallID, e.Outcome, e.DecidedBy, e.Arguments, e.Reason)
	case *runtime.ToolExecutionStarted:
		return fmt.Sprintf("tool_execution_started %s %s args=%s", e.CallID, e.Name, e.Arguments)
	case *runtime.ToolCallResult:
		return fmt.Sprintf("tool_call_result %s error=%t %s", e.Result.CallID, e.Result.Output.IsError, e.Result.Output.String())
	case *runtime.ToolCallsCancelled:
		return fmt.Sprintf("tool_calls_cancelled %v reason=%q", e.CallIDs, e.Reason)
	case *runtime.SteerApplied:
		return fmt.Sprintf("steer_applied seq=%d step=%s message=%s dropped=%t %s", e.Seq, e.StepID, e.MessageID, e.Dropped, e.DropReason)
	case *runtime.StepFinished:
		return fmt.Sprintf("step_finished %s %s usage=%s messages=%s", e.StepID, e.FinishReason, usage(e.Usage), messages(e.NewMessages))
	case *runtime.StepCalls:
		ids := make([]string, len(e.Pending.Calls))
		for i, c := range e.Pending.Calls {
			ids[i] = c.Call.ID
		}
		return fmt.Sprintf("step_calls %s %v usage=%s", e.Pending.StepID, ids, usage(e.Usage))
	case *runtime.HookEvent:
		return fmt.Sprintf("hook_event %s %v", e.Name, e.Value)
	case *runtime.RunFinished:
		s := fmt.Sprintf("run_finished %s err=%v usage=%s final=%q messages=%s", e.Reason, e.Err, usage(e.Usage), e.FinalText, messages(e.NewMessages))
		if e.Pending != nil {
			s += " pending=" + pending(e.Pending)
		}
		return s
	}
	return fmt.Sprintf("unknown %T", ev)
}

func kind(k runtime.BlockKind) string {
	if k == runtime.BlockReasoning {
		return "reasoning"
	}
	return "text"
}

func usage(u runtime.Usage) string {
	return fmt.Sprintf("in:%d,out:%d,reasoning:%d,model_calls:%d,tool_calls:%d", u.InputTokens, u.OutputTokens, u.ReasoningTokens, u.ModelCalls, u.ToolCalls)
}

func messages(ms []runtime.Message) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = RenderMessage(m)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// RenderMessage renders a message on one line.
func RenderMessage(m runtime.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s", m.Role, m.ID)
	if m.Partial {
		b.WriteString(",partial")
	}
	b.WriteString(":")
	for i, p := range m.Parts {
		if i > 0 {
			b.WriteString(",")
		}
		switch p.Kind {
		case runtime.PartText:
			fmt.Fprintf(&b, "text%q", p.Text)
		case runtime.PartReasoning:
			fmt.Fprintf(&b, "reasoning%q", p.Text)
			if len(p.State) > 0 {
				fmt.Fprintf(&b, "+state%q", p.State)
			}
		case runtime.PartToolCall:
			fmt.Fprintf(&b, "call{%s %s %s}", p.ToolCall.ID, p.ToolCall.Name, p.ToolCall.Arguments)
		case runtime.PartToolResult:
			r := p.ToolResult
			fmt.Fprintf(&b, "result{%s error=%t %s}", r.CallID, r.Output.IsError, r.Output.String())
		case runtime.PartMedia:
			fmt.Fprintf(&b, "media{%s}", p.Media.MIMEType)
		}
	}
	b.WriteString(")")
	return b.String()
}

func pending(p *runtime.Pending) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{step=%d turn=%d in_turn=%d", p.Step, p.Turn, p.StepInTurn)
	for _, c := range p.Calls {
		fmt.Fprintf(&b, " %s:%d:%s", c.Call.ID, c.State, c.ApprovalID)
	}
	b.WriteString("}")
	return b.String()
}
