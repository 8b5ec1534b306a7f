package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service/continuation"
)

// planAgent is the agent starts are planned for: agent "planner", whose one tool, calc,
// takes {"x": integer}, with a step limit of 5, and a model "fast" a client may choose.
func planAgent(t *testing.T) *Agent {
	t.Helper()
	calc := runtime.NewTool(runtime.ToolSpec{Name: "calc", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)}, rt.Echo)
	r, err := runtime.New(runtime.Config{Name: "planner", Model: &rt.Model{}, Tools: []runtime.Tool{calc}, MaxSteps: 5, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{Name: "planner", Runtime: r, Models: func(spec string) (runtime.Model, error) {
		if spec != "fast" {
			return nil, fmt.Errorf("no model %q", spec)
		}
		return &rt.Model{ModelName: "fast"}, nil
	}}
}

// planLimits are small limits for the plans, New's defaults where a case needs none.
func planLimits() *Config {
	return &Config{
		MaxTranscriptBytes:   1 << 10,
		MaxClientTools:       2,
		MaxClientSchemaBytes: 200,
		ClientToolTimeout:    time.Minute,
		MaxClientToolTimeout: time.Hour,
		ApprovalTimeout:      10 * time.Minute,
		MaxApprovalTimeout:   time.Hour,
	}
}

func text(role agentdv1.Role, s string) *agentdv1.Message {
	return &agentdv1.Message{Role: role, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: s}}}}
}

// parkedHistory is the transcript of a run parked on two calls: calc, awaiting approval
// ap_1, and the client tool ask.
func parkedHistory() []*agentdv1.Message {
	return []*agentdv1.Message{
		text(agentdv1.Role_ROLE_USER, "what is 1+1, and ask me"),
		{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
			{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "c1", Name: "calc", ArgumentsJson: `{"x":1}`}}},
			{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "c2", Name: "ask", ArgumentsJson: `{}`}}},
		}},
	}
}

func parkedPending() *runtime.Pending {
	return &runtime.Pending{Step: 1, Turn: 0, StepInTurn: 1, Calls: []runtime.PendingCall{
		{Call: runtime.ToolCall{ID: "c1", Name: "calc", Arguments: `{"x":1}`}, State: runtime.CallAwaitingApproval, ApprovalID: "ap_1"},
		{Call: runtime.ToolCall{ID: "c2", Name: "ask", Arguments: `{}`, Executor: runtime.ExecutorClient}, State: runtime.CallReady},
	}}
}

// parked returns the continuation of the parked run, its digest taken as a start's is:
// from the messages as the service decodes and encodes them again.
func parked(t *testing.T) *opened {
	t.Helper()
	var fe wire.FieldErrors
	history := wire.MessagesToProto(wire.MessagesFromProto(parkedHistory(), "messages", &fe), wire.Options{})
	if len(fe) > 0 {
		t.Fatal(fe.Summary())
	}
	digest, err := continuation.Digest(history)
	if err != nil {
		t.Fatal(err)
	}
	return &opened{Continuation: &continuation.Continuation{Agent: "planner", ThreadID: "thr_1", Digest: digest}, Pending: parkedPending()}
}

// resume is a start that resumes the parked run, declaring ask again.
func resume() *agentdv1.RunSpec {
	return &agentdv1.RunSpec{
		Messages:    parkedHistory(),
		ClientTools: []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "ask"}}},
	}
}

func deep(n int) *structpb.Value {
	v := structpb.NewNullValue()
	for range n {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	return v
}

func decision(id string, outcome agentdv1.ApprovalOutcome) *agentdv1.ApprovalDecision {
	return &agentdv1.ApprovalDecision{ApprovalId: id, Outcome: outcome}
}

const approved = agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED

// TestPlanStartRefuses covers every way a start is refused once its agent is found: the
// status code, the ErrorInfo reason, and for INVALID_ARGUMENT the field violation, as a
// client sees them.
func TestPlanStartRefuses(t *testing.T) {
	withInput := func(f func(*agentdv1.RunSpec)) *agentdv1.RunSpec {
		spec := &agentdv1.RunSpec{Input: "hello"}
		f(spec)
		return spec
	}
	clientTool := func(name string) *agentdv1.ClientTool {
		return &agentdv1.ClientTool{Spec: &agentdv1.ToolSpec{Name: name}}
	}
	withParams := func(name string, params map[string]any) *agentdv1.ClientTool {
		s, err := structpb.NewStruct(params)
		if err != nil {
			t.Fatal(err)
		}
		return &agentdv1.ClientTool{Spec: &agentdv1.ToolSpec{Name: name, Parameters: s}}
	}
	withResume := func(f func(*agentdv1.RunSpec)) *agentdv1.RunSpec {
		spec := resume()
		f(spec)
		return spec
	}
	deepMetadata := &structpb.Struct{Fields: map[string]*structpb.Value{"k": deep(100)}}
	tests := []struct {
		name   string
		mode   Mode
		spec   *agentdv1.RunSpec
		ct     *opened
		noPick bool // the agent allows no model override
		code   Code
		reason string
		// field and desc are the violation of an INVALID_ARGUMENT; desc is a prefix, or
		// for another code the status message's.
		field, desc string
	}{
		{name: "message without a role", spec: &agentdv1.RunSpec{Messages: []*agentdv1.Message{{Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}}},
			field: "start.messages[0].role", desc: "must be set (ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL)"},
		{name: "transcript too large", spec: &agentdv1.RunSpec{Input: strings.Repeat("x", 2000)},
			field: "start.messages", desc: "messages and input are 2000 bytes; the limit is 1024 (MaxTranscriptBytes)"},
		{name: "no input", spec: &agentdv1.RunSpec{},
			field: "start.messages", desc: "a run needs input: messages, or input"},
		{name: "too many client tools", spec: withInput(func(s *agentdv1.RunSpec) {
			s.ClientTools = []*agentdv1.ClientTool{clientTool("a"), clientTool("b"), clientTool("c")}
		}),
			field: "start.client_tools", desc: "3 client tools declared; the limit is 2"},
		{name: "client tool named as the agent's", spec: withInput(func(s *agentdv1.RunSpec) { s.ClientTools = []*agentdv1.ClientTool{clientTool("calc")} }),
			field: "start.client_tools[0].spec.name", desc: `"calc" is already a tool of agent planner (or declared twice)`},
		{name: "client tool declared twice", spec: withInput(func(s *agentdv1.RunSpec) {
			s.ClientTools = []*agentdv1.ClientTool{clientTool("ask"), clientTool("ask")}
		}),
			field: "start.client_tools[1].spec.name", desc: `"ask" is already a tool of agent planner (or declared twice)`},
		{name: "client tool parameters too deep", spec: withInput(func(s *agentdv1.RunSpec) {
			s.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "ask", Parameters: &structpb.Struct{Fields: map[string]*structpb.Value{"properties": deep(100)}}}}}
		}),
			field: "start.client_tools[0].spec.parameters", desc: "objects and arrays nested too deep: the limit is 64 levels"},
		{name: "client tool parameters not a schema", spec: withInput(func(s *agentdv1.RunSpec) {
			s.ClientTools = []*agentdv1.ClientTool{withParams("ask", map[string]any{"type": 5.0})}
		}),
			field: "start.client_tools[0].spec.parameters", desc: "not a usable JSON Schema: "},
		{name: "client tool schemas too large together", spec: withInput(func(s *agentdv1.RunSpec) {
			big := map[string]any{"description": strings.Repeat("d", 120)}
			s.ClientTools = []*agentdv1.ClientTool{withParams("a", big), withParams("b", big)}
		}),
			field: "start.client_tools", desc: "the client tools' schemas hold more than 200 bytes together, as many as the server compiles for one run"},
		{name: "client tool timeout not positive", spec: withInput(func(s *agentdv1.RunSpec) {
			s.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "ask"}, Timeout: durationpb.New(0)}}
		}),
			field: "start.client_tools[0].timeout", desc: "must be positive"},
		{name: "client tool timeout too long", spec: withInput(func(s *agentdv1.RunSpec) {
			s.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "ask"}, Timeout: durationpb.New(2 * time.Hour)}}
		}),
			field: "start.client_tools[0].timeout", desc: "2h0m0s is longer than the server allows, 1h0m0s"},
		{name: "model the agent does not know", spec: withInput(func(s *agentdv1.RunSpec) { s.Config = &agentdv1.RunConfig{Model: "slow"} }),
			field: "start.config.model", desc: `no model "slow"`},
		// Refused at once, before the field errors found so far (no input here).
		{name: "model override not allowed", noPick: true, spec: &agentdv1.RunSpec{Config: &agentdv1.RunConfig{Model: "fast"}},
			code: PermissionDenied, reason: reasonModelOverride, desc: "agent planner does not allow choosing the model"},
		{name: "max steps over the agent's", spec: withInput(func(s *agentdv1.RunSpec) { s.Config = &agentdv1.RunConfig{MaxSteps: 6} }),
			field: "start.config.max_steps", desc: "must be between 1 and the agent's limit 5"},
		{name: "max steps negative", spec: withInput(func(s *agentdv1.RunSpec) { s.Config = &agentdv1.RunConfig{MaxSteps: -1} }),
			field: "start.config.max_steps", desc: "must be between 1 and the agent's limit 5"},
		{name: "unknown approval policy", spec: withInput(func(s *agentdv1.RunSpec) { s.Config = &agentdv1.RunConfig{ApprovalPolicy: 99} }),
			field: "start.config.approval_policy", desc: "unknown policy 99"},
		{name: "approval timeout not positive", spec: withInput(func(s *agentdv1.RunSpec) {
			s.Config = &agentdv1.RunConfig{ApprovalTimeout: durationpb.New(-time.Second)}
		}),
			field: "start.config.approval_timeout", desc: "must be positive"},
		{name: "approval timeout too long", spec: withInput(func(s *agentdv1.RunSpec) {
			s.Config = &agentdv1.RunConfig{ApprovalTimeout: durationpb.New(2 * time.Hour)}
		}),
			field: "start.config.approval_timeout", desc: "2h0m0s is longer than the server allows, 1h0m0s"},
		{name: "policy for a tool the agent lacks", spec: withInput(func(s *agentdv1.RunSpec) {
			s.Config = &agentdv1.RunConfig{ToolPolicies: []*agentdv1.ToolPolicyOverride{{Tool: "calc", Disabled: true}, {Tool: "nope"}}}
		}),
			field: "start.config.tool_policies[1].tool", desc: `agent planner has no tool "nope"`},
		{name: "metadata too deep", spec: withInput(func(s *agentdv1.RunSpec) { s.Metadata = deepMetadata }),
			field: "start.metadata", desc: "objects and arrays nested too deep: the limit is 64 levels"},
		{name: "decisions without a continuation", spec: withInput(func(s *agentdv1.RunSpec) {
			s.Decisions = []*agentdv1.ApprovalDecision{decision("ap_1", approved)}
		}),
			field: "start.continuation", desc: "decisions and tool_results resume a parked run: send its continuation too"},
		{name: "tool results without a continuation", spec: withInput(func(s *agentdv1.RunSpec) { s.ToolResults = []*agentdv1.ToolResult{{ToolCallId: "c2"}} }),
			field: "start.continuation", desc: "decisions and tool_results resume a parked run: send its continuation too"},

		// Resumes.
		{name: "resume with input", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) { s.Input = "and more" }),
			field: "start.input", desc: "a resumed run takes no new input; steer it once it runs, or start a new run"},
		{name: "resume of another agent's run", ct: func() *opened { ct := parked(t); ct.Agent = "coder"; return ct }(), spec: resume(),
			code: FailedPrecondition, reason: reasonContinuationMismatch, desc: `continuation mismatch: issued for agent "coder", not "planner"`},
		{name: "resume of another thread", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) { s.ThreadId = "thr_2" }),
			code: FailedPrecondition, reason: reasonContinuationMismatch, desc: `continuation mismatch: issued for thread "thr_1", not "thr_2"`},
		{name: "resume with other messages", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) { s.Messages = s.Messages[:1] }),
			code: FailedPrecondition, reason: reasonContinuationMismatch, desc: "continuation mismatch: the messages sent back differ from the transcript the parked run reported"},
		// Wrong fields are reported first: the continuation is not checked against them.
		{name: "resume with a wrong field and other messages", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			s.Messages = s.Messages[:1]
			s.Metadata = deepMetadata
		}),
			field: "start.metadata", desc: "objects and arrays nested too deep"},
		{name: "decision for no approval the run waits for", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			s.Decisions = []*agentdv1.ApprovalDecision{decision("ap_9", approved)}
		}),
			field: "start.decisions[0].approval_id", desc: `"ap_9" is not an approval the parked run waits for`},
		{name: "approval decided twice", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			s.Decisions = []*agentdv1.ApprovalDecision{decision("ap_1", approved), decision("ap_1", approved)}
		}),
			field: "start.decisions[1].approval_id", desc: `"ap_1" is decided twice`},
		{name: "decision without an outcome", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			s.Decisions = []*agentdv1.ApprovalDecision{decision("ap_1", agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_UNSPECIFIED)}
		}),
			field: "start.decisions[0]", desc: "outcome must be APPROVAL_OUTCOME_APPROVED or APPROVAL_OUTCOME_DENIED, got APPROVAL_OUTCOME_UNSPECIFIED"},
		{name: "decision editing arguments against the schema", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			d := decision("ap_1", approved)
			d.EditedArguments = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewStringValue("one")}})
			s.Decisions = []*agentdv1.ApprovalDecision{d}
		}),
			field: "start.decisions[0]", desc: "edited_arguments for tool calc: "},
		{name: "result for no call the run waits for", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			s.ToolResults = []*agentdv1.ToolResult{{ToolCallId: "c9", Output: &agentdv1.ToolResult_Text{Text: "yes"}}}
		}),
			field: "start.tool_results[0].tool_call_id", desc: `"c9" is not a client tool call the parked run waits for (declare the client tool again in client_tools)`},
		{name: "result for a client tool not declared again", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			s.ClientTools = nil
			s.ToolResults = []*agentdv1.ToolResult{{ToolCallId: "c2", Output: &agentdv1.ToolResult_Text{Text: "yes"}}}
		}),
			field: "start.tool_results[0].tool_call_id", desc: `"c2" is not a client tool call the parked run waits for (declare the client tool again in client_tools)`},
		{name: "result too deep", ct: parked(t), spec: withResume(func(s *agentdv1.RunSpec) {
			s.ToolResults = []*agentdv1.ToolResult{{ToolCallId: "c2", Output: &agentdv1.ToolResult_Json{Json: deep(100)}}}
		}),
			field: "start.tool_results[0].json", desc: "objects and arrays nested too deep: the limit is 64 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := planAgent(t)
			if tt.noPick {
				agent.Models = nil
			}
			p, err := planStart(t.Context(), startInput{spec: tt.spec, ct: tt.ct, agent: agent, limits: planLimits(), mode: tt.mode})
			if err == nil {
				t.Fatalf("planned %+v, want it refused", p)
			}
			e, _ := errors.AsType[*Error](err)
			code, reason := tt.code, tt.reason
			if code == OK {
				code, reason = InvalidArgument, reasonInvalidArgument
			}
			if e == nil || e.Code != code || e.Reason != reason {
				t.Fatalf("error %v (%+v), want %s with reason %s", err, e, code, reason)
			}
			if code != InvalidArgument {
				if !strings.HasPrefix(e.Message, tt.desc) {
					t.Errorf("message %q, want it to begin %q", e.Message, tt.desc)
				}
				return
			}
			for _, v := range e.Fields {
				if v.GetField() == tt.field && strings.HasPrefix(v.GetDescription(), tt.desc) {
					if want := "invalid request: " + e.Fields[0].GetField() + ": "; !strings.HasPrefix(e.Message, want) {
						t.Errorf("message %q, want it to begin %q", e.Message, want)
					}
					return
				}
			}
			t.Errorf("violations %v, want %s: %s…", e.Fields, tt.field, tt.desc)
		})
	}
}

// TestPlanStart checks what a start that is not refused plans for its run.
func TestPlanStart(t *testing.T) {
	limits := planLimits()
	t.Run("new run", func(t *testing.T) {
		params, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}})
		spec := &agentdv1.RunSpec{
			Input:    "hello",
			Messages: []*agentdv1.Message{text(agentdv1.Role_ROLE_SYSTEM, "be brief")},
			ClientTools: []*agentdv1.ClientTool{
				{Spec: &agentdv1.ToolSpec{Name: "ask", Description: "asks", Parameters: params}, RequiresApproval: true, Timeout: durationpb.New(time.Second)},
				{Spec: &agentdv1.ToolSpec{Name: "done"}, CompletesRun: true},
			},
			Config: &agentdv1.RunConfig{Model: "fast", MaxSteps: 3, ApprovalTimeout: durationpb.New(time.Minute), ToolPolicies: []*agentdv1.ToolPolicyOverride{
				{Tool: "calc", RequireApproval: true}, {Tool: "done", Disabled: true},
			}},
			Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("v")}},
		}
		p, err := planStart(t.Context(), startInput{spec: spec, agent: planAgent(t), limits: limits, mode: ModeRun})
		if err != nil {
			t.Fatal(err)
		}
		if p.thread != "" {
			t.Errorf("thread %q, want none: the run takes a new one", p.thread)
		}
		if p.policy != agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK || p.req.ApprovalTimeout != time.Minute {
			t.Errorf("policy %s with approval timeout %s, want ASK (a Run's default) with the client's minute", p.policy, p.req.ApprovalTimeout)
		}
		if m := p.req.Model; m == nil || m.Name() != "fast" || p.req.MaxSteps != 3 {
			t.Errorf("model %v, max steps %d; want fast and 3", m, p.req.MaxSteps)
		}
		wantPolicy := map[string]runtime.ToolPolicy{
			"ask":  {Approval: runtime.ApprovalAlways},
			"calc": {Approval: runtime.ApprovalAlways},
			"done": {Disabled: true},
		}
		if diff := cmp.Diff(wantPolicy, p.req.Policy.Tools); diff != "" {
			t.Errorf("tool policies (-want +got):\n%s", diff)
		}
		var names []string
		for _, ts := range p.clientTools {
			names = append(names, ts.Name)
			if ts.Executor != runtime.ExecutorClient || p.tools.specs[ts.Name].Name != ts.Name || p.tools.schemas[ts.Name] == nil {
				t.Errorf("client tool %s: executor %d, spec %v, schema %v: want a client tool among the run's, its schema compiled", ts.Name, ts.Executor, p.tools.specs[ts.Name], p.tools.schemas[ts.Name])
			}
		}
		if diff := cmp.Diff([]string{"ask", "done"}, names); diff != "" {
			t.Errorf("client tools (-want +got):\n%s", diff)
		}
		if ask, done := p.clientTools[0], p.clientTools[1]; ask.Timeout != time.Second || done.Timeout != limits.ClientToolTimeout || !done.CompletesRun || string(ask.Parameters) != `{"properties":{"q":{"type":"string"}},"type":"object"}` {
			t.Errorf("ask %+v, done %+v: want the client's timeout, else the server's; its flags, its parameters as compact JSON", ask, done)
		}
		if _, ok := p.tools.specs["calc"]; !ok {
			t.Error("the agent's tool calc is not among the run's tools")
		}
		if len(p.req.Messages) != 1 || len(p.steers) != 1 || p.steers[0].Message.Text() != "hello" {
			t.Errorf("messages %v, steers %v: want the history, and the input as the first step's steer", p.req.Messages, p.steers)
		}
		if p.req.Metadata["k"] != "v" || p.req.Resume != nil {
			t.Errorf("metadata %v, resume %v", p.req.Metadata, p.req.Resume)
		}
		want, err := continuation.Digest(spec.GetMessages())
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(p.history.Sum(), want) || p.transcript == nil || !cmp.Equal(p.transcript.Sum(), want) {
			t.Error("the history and the transcript are not the digest of the start's messages")
		}
	})

	t.Run("defaults by RPC", func(t *testing.T) {
		for _, tt := range []struct {
			mode    Mode
			policy  agentdv1.ApprovalPolicy
			timeout time.Duration
		}{
			{ModeRun, agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK, limits.ApprovalTimeout},
			{ModeStart, agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT, 0},
			{ModeExecute, agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT, 0},
		} {
			// An approval timeout is checked only where the run waits for approvals.
			spec := &agentdv1.RunSpec{Input: "hi", Config: &agentdv1.RunConfig{ApprovalTimeout: durationpb.New(0)}}
			if tt.mode == ModeRun {
				spec.Config = nil
			}
			p, err := planStart(t.Context(), startInput{spec: spec, agent: planAgent(t), limits: limits, mode: tt.mode})
			if err != nil {
				t.Fatalf("mode %d: %v", tt.mode, err)
			}
			if p.policy != tt.policy || p.req.ApprovalTimeout != tt.timeout {
				t.Errorf("mode %d: policy %s, approval timeout %s; want %s, %s", tt.mode, p.policy, p.req.ApprovalTimeout, tt.policy, tt.timeout)
			}
			// Every run journals checkpoints, ExecuteRun's too: a client may attach to it.
			if p.transcript == nil || p.history == nil {
				t.Errorf("mode %d: transcript %v, history %v", tt.mode, p.transcript, p.history)
			}
		}
	})

	t.Run("resume", func(t *testing.T) {
		spec := resume()
		edited := structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(2)}})
		spec.Decisions = []*agentdv1.ApprovalDecision{{ApprovalId: "ap_1", Outcome: approved, EditedArguments: edited, Reason: "2 is better"}}
		spec.ToolResults = []*agentdv1.ToolResult{{ToolCallId: "c2", Output: &agentdv1.ToolResult_Text{Text: "yes"}}}
		ct := parked(t)
		p, err := planStart(t.Context(), startInput{spec: spec, ct: ct, agent: planAgent(t), limits: limits, mode: ModeStart})
		if err != nil {
			t.Fatal(err)
		}
		if p.thread != "thr_1" || p.req.Resume != ct.Pending || len(p.steers) != 0 {
			t.Errorf("thread %q, resume %v, steers %v: want the continuation's thread and pending step, no steer", p.thread, p.req.Resume, p.steers)
		}
		wantDecisions := map[string]runtime.Decision{"ap_1": {Outcome: runtime.OutcomeApproved, DecidedBy: runtime.DecidedByClient, Reason: "2 is better", EditedArguments: `{"x":2}`}}
		if diff := cmp.Diff(wantDecisions, p.preDecisions); diff != "" {
			t.Errorf("preloaded decisions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]runtime.Output{"c2": {Text: "yes"}}, p.preResults); diff != "" {
			t.Errorf("preloaded results (-want +got):\n%s", diff)
		}
		// The schema the edited arguments were checked with is kept for the run.
		if p.tools.agent.m["calc"] == nil {
			t.Error("calc's schema was not kept")
		}
	})

	t.Run("validation bounded by ctx", func(t *testing.T) {
		spec := resume()
		d := decision("ap_1", approved)
		d.EditedArguments = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(2)}})
		spec.Decisions = []*agentdv1.ApprovalDecision{d}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := planStart(ctx, startInput{spec: spec, ct: parked(t), agent: planAgent(t), limits: limits, mode: ModeRun})
		if codeOf(err) != InvalidArgument || !strings.Contains(err.Error(), "start.decisions[0]: edited_arguments for tool calc") {
			t.Errorf("planStart with ctx done = %v, want the decision refused", err)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatal("premise: ctx is not done")
		}
	})
}
