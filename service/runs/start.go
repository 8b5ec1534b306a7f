package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/continuation"
)

// startPlan is a start checked and turned into what its run needs. planStart makes it
// from the start alone: it holds no session and no server state.
type startPlan struct {
	// thread is the run's thread: the start's, or its continuation's; empty when neither
	// names one, and the run then takes a new one.
	thread string
	// req holds the pieces of the run's runtime.Request the start decides: Messages,
	// Model, MaxSteps, ApprovalTimeout, Policy, Metadata and Resume.
	req runtime.Request
	// clientTools are the specs of the client's tools, in their order; their compiled
	// schemas are in tools.schemas. The session makes the runtime tools from them: their
	// Execute waits on it.
	clientTools []runtime.ToolSpec
	// policy is the run's approval policy, its default filled in.
	policy agentdv1.ApprovalPolicy
	// onDisconnect is what the run does when the stream that started it goes away.
	onDisconnect agentdv1.OnDisconnect
	// tools are every tool of the run, the agent's and the client's.
	tools runTools
	// preDecisions and preResults are the decisions and client tool results a resume
	// carried, checked against the parked step, by approval id and by call id.
	preDecisions map[string]runtime.Decision
	// preScopes are the scopes of those decisions wider than ONCE, by approval id.
	preScopes  map[string]agentdv1.ApprovalScope
	preResults map[string]runtime.Output
	// steers are the start's input, queued for the first step: it enters the transcript
	// like a steer, so it is among the run's new messages.
	steers []runtime.Steer
	// historyMsgs are the start's messages as the client sent them, which a run kept in
	// the store when it parks needs again.
	historyMsgs []*agentdv1.Message
	// history is fed the start's messages: a parked run's continuation is digested from
	// it. transcript is a copy that goes on with each step's messages, for the run's
	// checkpoints.
	history, transcript *continuation.Hasher
}

// startInput is what planStart checks a start against.
type startInput struct {
	spec *agentdv1.RunSpec
	ct   *opened // the opened continuation; nil for a new run
	// agent runs the start: its Runtime is set.
	agent *Agent
	// limits are the server's (Config, its defaults filled in).
	limits *Config
	mode   Mode
}

// planStart checks a start and plans its run. Errors are gRPC statuses: INVALID_ARGUMENT
// with a BadRequest naming each field that is wrong, PERMISSION_DENIED for a model the
// agent does not let a client choose, FAILED_PRECONDITION for a continuation that does
// not match. ctx bounds the validation of the edited arguments a resume's decisions
// carry; nothing else is waited for.
func planStart(ctx context.Context, in startInput) (*startPlan, error) {
	spec, ct, entry, limits := in.spec, in.ct, in.agent, in.limits
	p := &startPlan{thread: spec.GetThreadId(), tools: runTools{specs: map[string]runtime.ToolSpec{}, schemas: map[string]*runtime.Schema{}, agent: &compiledSchemas{m: map[string]*runtime.Schema{}}}}
	if p.thread == "" && ct != nil {
		p.thread = ct.ThreadID
	}
	for _, t := range entry.Runtime.Tools() {
		p.tools.specs[t.Name] = t
	}

	var fe wire.FieldErrors
	p.req.Messages = wire.MessagesFromProto(spec.GetMessages(), "start.messages", &fe)
	if n := transcriptBytes(spec); n > limits.MaxTranscriptBytes {
		fe.Add("start.messages", "messages and input are %d bytes; the limit is %d (MaxTranscriptBytes)", n, limits.MaxTranscriptBytes)
	}
	p.req.Policy = runtime.Policy{Tools: map[string]runtime.ToolPolicy{}}
	p.planClientTools(spec, entry.Name, limits, &fe)
	if err := p.planConfig(spec.GetConfig(), entry, in.mode, limits, &fe); err != nil {
		return nil, err
	}
	if md := spec.GetMetadata(); md != nil {
		if err := wire.CheckValueDepth(structpb.NewStructValue(md)); err != nil {
			fe.Add("start.metadata", "%v", err)
		}
		p.req.Metadata = md.AsMap()
	}

	history := wire.MessagesToProto(p.req.Messages, wire.Options{})
	p.historyMsgs = history
	if ct == nil {
		if len(spec.GetDecisions()) > 0 || len(spec.GetToolResults()) > 0 {
			fe.Add("start.continuation", "decisions and tool_results resume a parked run: send its continuation too")
		}
		if in := spec.GetInput(); in != "" {
			p.steers = append(p.steers, runtime.Steer{Message: runtime.UserMessage(in)})
		}
		if len(p.req.Messages) == 0 && spec.GetInput() == "" {
			fe.Add("start.messages", "a run needs input: messages, or input")
		}
	} else if len(fe) == 0 {
		if spec.GetInput() != "" {
			fe.Add("start.input", "a resumed run takes no new input; steer it once it runs, or start a new run")
		}
		err := p.hashHistory(history)
		if err == nil {
			err = ct.Check(entry.Name, p.thread, p.history)
		}
		if err != nil {
			return nil, continuationStatus(err)
		}
		p.preload(ctx, ct.Pending, spec, in.agent, &fe)
		p.req.Resume = ct.Pending
	}
	if len(fe) > 0 {
		return nil, invalidArgument(reasonInvalidArgument, fe)
	}
	if p.history == nil {
		if err := p.hashHistory(history); err != nil {
			return nil, statusError(Internal, reasonInternal, "hashing the transcript: "+err.Error(), nil)
		}
	}
	var err error
	if p.transcript, err = p.history.Clone(); err != nil {
		return nil, statusError(Internal, reasonInternal, "hashing the transcript: "+err.Error(), nil)
	}
	return p, nil
}

// planClientTools checks the client's tools and compiles their schemas. A client tool
// that asks for approvals gets its policy in the run's.
func (p *startPlan) planClientTools(spec *agentdv1.RunSpec, agent string, limits *Config, fe *wire.FieldErrors) {
	if n := len(spec.GetClientTools()); n > limits.MaxClientTools {
		fe.Add("start.client_tools", "%d client tools declared; the limit is %d", n, limits.MaxClientTools)
	}
	schemaBytes := 0
	for i, ctool := range spec.GetClientTools() {
		if i == limits.MaxClientTools {
			break // refused above; the rest is not worth compiling
		}
		f := fmt.Sprintf("start.client_tools[%d]", i)
		name := ctool.GetSpec().GetName()
		if _, clash := p.tools.specs[name]; clash {
			fe.Add(f+".spec.name", "%q is already a tool of agent %s (or declared twice)", name, agent)
			continue
		}
		ts := runtime.ToolSpec{Name: name, Description: ctool.GetSpec().GetDescription(), Executor: runtime.ExecutorClient, CompletesRun: ctool.GetCompletesRun(), Timeout: limits.ClientToolTimeout}
		if params := ctool.GetSpec().GetParameters(); params != nil {
			raw, err := wire.ValueToJSON(structpb.NewStructValue(params))
			if err != nil {
				fe.Add(f+".spec.parameters", "%v", err)
				continue
			}
			ts.Parameters = json.RawMessage(raw)
			if schemaBytes += len(raw); schemaBytes > limits.MaxClientSchemaBytes {
				fe.Add("start.client_tools", "the client tools' schemas hold more than %d bytes together, as many as the server compiles for one run", limits.MaxClientSchemaBytes)
				break
			}
		}
		// Compiled once, within the runtime's limits: a schema whose validation could
		// cost too much is refused here, before the run starts.
		schema, err := runtime.CompileSchema(ts.Parameters)
		if err != nil {
			fe.Add(f+".spec.parameters", "not a usable JSON Schema: %v", err)
			continue
		}
		p.tools.schemas[name] = schema
		if d := ctool.GetTimeout(); d != nil {
			switch t := d.AsDuration(); {
			case t <= 0:
				fe.Add(f+".timeout", "must be positive")
			case t > limits.MaxClientToolTimeout:
				fe.Add(f+".timeout", "%s is longer than the server allows, %s", t, limits.MaxClientToolTimeout)
			}
			ts.Timeout = d.AsDuration()
		}
		if ctool.GetRequiresApproval() {
			p.req.Policy.Tools[name] = runtime.ToolPolicy{Approval: runtime.ApprovalAlways}
		}
		p.tools.specs[name] = ts
		p.clientTools = append(p.clientTools, ts)
	}
}

// planConfig checks the run's settings, which may tighten the agent's policy, never
// loosen it, and adds the client's tool policies to the run's. Its error is a status:
// the model override of an agent that allows none is refused at once.
func (p *startPlan) planConfig(cfg *agentdv1.RunConfig, entry *Agent, mode Mode, limits *Config, fe *wire.FieldErrors) error {
	if m := cfg.GetModel(); m != "" {
		if entry.Models == nil {
			return statusError(PermissionDenied, reasonModelOverride, fmt.Sprintf("agent %s does not allow choosing the model", entry.Name), map[string]string{"agent": entry.Name})
		}
		model, err := entry.Models(m)
		if err != nil {
			fe.Add("start.config.model", "%v", err)
		} else {
			p.req.Model = model
		}
	}
	if s := cfg.GetOutputSchema(); s != nil {
		if !entry.RunOutputSchema {
			return statusError(PermissionDenied, reasonOutputSchema, fmt.Sprintf("agent %s does not let a run ask for a typed result", entry.Name), map[string]string{"agent": entry.Name})
		}
		p.planOutputSchema(s, fe)
	}
	if n := cfg.GetMaxSteps(); n != 0 {
		if n < 0 || int(n) > entry.Runtime.MaxSteps() {
			fe.Add("start.config.max_steps", "must be between 1 and the agent's limit %d", entry.Runtime.MaxSteps())
		}
		p.req.MaxSteps = int(n)
	}
	p.policy = cfg.GetApprovalPolicy()
	if p.policy == agentdv1.ApprovalPolicy_APPROVAL_POLICY_UNSPECIFIED {
		// A client that can answer is asked; one that cannot parks the run.
		p.policy = agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK
		if mode != ModeRun {
			p.policy = agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT
		}
	}
	if _, ok := agentdv1.ApprovalPolicy_name[int32(p.policy)]; !ok {
		fe.Add("start.config.approval_policy", "unknown policy %d", p.policy)
	}
	if _, ok := agentdv1.ChildEvents_name[int32(cfg.GetChildEvents())]; !ok {
		fe.Add("start.config.child_events", "unknown value %d", cfg.GetChildEvents())
	}
	p.onDisconnect = cfg.GetOnDisconnect()
	if _, ok := agentdv1.OnDisconnect_name[int32(p.onDisconnect)]; !ok {
		fe.Add("start.config.on_disconnect", "unknown value %d", p.onDisconnect)
	}
	if p.policy == agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK && (mode == ModeRun || mode == ModeChild) {
		p.req.ApprovalTimeout = limits.ApprovalTimeout
		if d := cfg.GetApprovalTimeout(); d != nil {
			switch t := d.AsDuration(); {
			case t <= 0:
				fe.Add("start.config.approval_timeout", "must be positive")
			case t > limits.MaxApprovalTimeout:
				fe.Add("start.config.approval_timeout", "%s is longer than the server allows, %s", t, limits.MaxApprovalTimeout)
			}
			p.req.ApprovalTimeout = d.AsDuration()
		}
	}
	for i, tp := range cfg.GetToolPolicies() {
		if _, ok := p.tools.specs[tp.GetTool()]; !ok {
			fe.Add(fmt.Sprintf("start.config.tool_policies[%d].tool", i), "agent %s has no tool %q", entry.Name, tp.GetTool())
			continue
		}
		tpol := p.req.Policy.Tools[tp.GetTool()]
		if tp.GetDisabled() {
			tpol.Disabled = true
		}
		if tp.GetRequireApproval() {
			tpol.Approval = runtime.ApprovalAlways
		}
		p.req.Policy.Tools[tp.GetTool()] = tpol
	}
	return nil
}

// planOutputSchema checks a run's output schema as the runtime will, so that the client
// learns at once, with the field named, what the run would be refused for.
func (p *startPlan) planOutputSchema(s *structpb.Struct, fe *wire.FieldErrors) {
	err := wire.CheckValueDepth(structpb.NewStructValue(s))
	var raw []byte
	if err == nil {
		raw, err = json.Marshal(s.AsMap())
	}
	if err == nil {
		err = runtime.CheckOutputSchema(raw)
	}
	if err != nil {
		fe.Add("start.config.output_schema", "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "runtime: "), "OutputSchema: "))
		return
	}
	p.req.OutputSchema = raw
}

// hashHistory feeds the start's messages to p.history.
func (p *startPlan) hashHistory(history []*agentdv1.Message) error {
	h := continuation.NewHasher()
	for i, m := range history {
		if err := h.Add(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	p.history = h
	return nil
}

// preload checks the decisions and client tool results a resume carries against the
// parked step, and keeps them for the run.
func (p *startPlan) preload(ctx context.Context, pending *runtime.Pending, spec *agentdv1.RunSpec, agent *Agent, fe *wire.FieldErrors) {
	awaiting := map[string]runtime.PendingCall{}
	ready := map[string]runtime.PendingCall{}
	if pending != nil {
		for _, c := range pending.Calls {
			switch c.State {
			case runtime.CallAwaitingApproval:
				awaiting[c.ApprovalID] = c
			case runtime.CallReady:
				ready[c.Call.ID] = c
			}
		}
	}
	p.preDecisions, p.preScopes = map[string]runtime.Decision{}, map[string]agentdv1.ApprovalScope{}
	for i, d := range spec.GetDecisions() {
		f := fmt.Sprintf("start.decisions[%d]", i)
		c, ok := awaiting[d.GetApprovalId()]
		if !ok {
			fe.Add(f+".approval_id", "%q is not an approval the parked run waits for", d.GetApprovalId())
			continue
		}
		if _, dup := p.preDecisions[d.GetApprovalId()]; dup {
			fe.Add(f+".approval_id", "%q is decided twice", d.GetApprovalId())
			continue
		}
		rd, refusal := p.tools.decision(ctx, d, c.Call.Name, c.Call.Arguments)
		if refusal != nil {
			fe.Add(f, "%s", refusal.GetMessage())
			continue
		}
		if scope := d.GetScope(); scope > agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE {
			allowed, _ := allowedScopes(agent, c.Call.Name, true, spec.GetHistory() == agentdv1.History_HISTORY_THREAD)
			if rd.Outcome != runtime.OutcomeApproved || !slices.Contains(allowed, scope) {
				fe.Add(f+".scope", "%s is not allowed here: the agent allows %v for %s, with APPROVAL_OUTCOME_APPROVED", scope, allowed, c.Call.Name)
				continue
			}
			p.preScopes[d.GetApprovalId()] = scope
		}
		p.preDecisions[d.GetApprovalId()] = rd
	}
	p.preResults = map[string]runtime.Output{}
	for i, tr := range spec.GetToolResults() {
		f := fmt.Sprintf("start.tool_results[%d]", i)
		c, ok := ready[tr.GetToolCallId()]
		if !ok || p.tools.specs[c.Call.Name].Executor != runtime.ExecutorClient {
			fe.Add(f+".tool_call_id", "%q is not a client tool call the parked run waits for (declare the client tool again in client_tools)", tr.GetToolCallId())
			continue
		}
		out, err := wire.OutputFromProto(tr.GetText(), tr.GetJson(), tr.GetIsError(), tr.GetMedia())
		if err != nil {
			fe.Add(f+".json", "%v", err)
			continue
		}
		p.preResults[tr.GetToolCallId()] = out
	}
}

// transcriptBytes is the size of a start's transcript: its messages, encoded, and its
// input.
func transcriptBytes(spec *agentdv1.RunSpec) int {
	n := len(spec.GetInput())
	for _, m := range spec.GetMessages() {
		n += proto.Size(m)
	}
	return n
}

// continuationStatus is the status of a continuation that cannot be used.
func continuationStatus(err error) error {
	reason := reasonContinuation
	switch {
	case errors.Is(err, continuation.ErrExpired):
		reason = reasonContinuationExpired
	case errors.Is(err, continuation.ErrMismatch):
		reason = reasonContinuationMismatch
	}
	return statusError(FailedPrecondition, reason, err.Error(), nil)
}
