package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/runtime"
)

// Run implements agentdv1.AgentServiceServer: a whole conversation on one stream.
func (s *Server) Run(stream grpc.BidiStreamingServer[agentdv1.RunRequest, agentdv1.RunResponse]) error {
	first, err := s.recvStart(stream)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return invalidArgument(reasonFirstMessageNotStart, fieldErrors{{Field: "start", Description: "the stream closed before its start message"}})
		}
		return err
	}
	spec := first.GetStart()
	if spec == nil {
		return invalidArgument(reasonFirstMessageNotStart, fieldErrors{{Field: "kind", Description: "the first message of a Run stream must be start"}})
	}
	if fe := takeInvalidUTF8(first); fe != nil {
		return invalidArgument(reasonInvalidUTF8, fe)
	}
	ss, req, err := s.newSession(stream.Context(), modeRun, spec, func(ev *agentdv1.RunEvent) error {
		return stream.Send(&agentdv1.RunResponse{Event: ev})
	})
	if err != nil {
		return err
	}
	defer s.endSession(ss)
	// Client messages are read once run_started is out, so that it stays the first event
	// and every ack follows it.
	ss.started = func() { go ss.receive(stream.Recv) }
	return ss.executeStreaming(req)
}

// recvStart reads a Run stream's first message, which must come within the start
// timeout: a stream that never starts a run does not hold the server. The receive it
// waits for is not joined: when the time is up the handler returns, and the end of the
// RPC ends the receive.
func (s *Server) recvStart(stream grpc.BidiStreamingServer[agentdv1.RunRequest, agentdv1.RunResponse]) (*agentdv1.RunRequest, error) {
	type received struct {
		req *agentdv1.RunRequest
		err error
	}
	ch := make(chan received, 1)
	go func() {
		req, err := stream.Recv()
		ch <- received{req, err}
	}()
	t := time.NewTimer(s.cfg.StartTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.req, r.err
	case <-t.C:
		return nil, statusError(codes.DeadlineExceeded, reasonStartTimeout, fmt.Sprintf("no start message within %s of opening the stream", s.cfg.StartTimeout), nil)
	case <-stream.Context().Done():
		return nil, status.FromContextError(stream.Context().Err()).Err()
	}
}

// StartRun implements agentdv1.AgentServiceServer: a run whose events stream back to a
// caller that cannot answer; what would need it parks the run.
func (s *Server) StartRun(in *agentdv1.StartRunRequest, stream grpc.ServerStreamingServer[agentdv1.StartRunResponse]) error {
	if fe := takeInvalidUTF8(in); fe != nil {
		return invalidArgument(reasonInvalidUTF8, fe)
	}
	ss, req, err := s.newSession(stream.Context(), modeStart, in.GetStart(), func(ev *agentdv1.RunEvent) error {
		return stream.Send(&agentdv1.StartRunResponse{Event: ev})
	})
	if err != nil {
		return err
	}
	defer s.endSession(ss)
	return ss.executeStreaming(req)
}

// ExecuteRun implements agentdv1.AgentServiceServer: a run whose outcome alone comes
// back. A failed run's status carries the whole outcome as a detail, so nothing is lost.
func (s *Server) ExecuteRun(ctx context.Context, in *agentdv1.ExecuteRunRequest) (*agentdv1.ExecuteRunResponse, error) {
	if fe := takeInvalidUTF8(in); fe != nil {
		return nil, invalidArgument(reasonInvalidUTF8, fe)
	}
	ss, req, err := s.newSession(ctx, modeExecute, in.GetStart(), nil)
	if err != nil {
		return nil, err
	}
	defer s.endSession(ss)
	rf, err := ss.execute(req)
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.ExecuteRunResponse{RunId: ss.runID, ThreadId: ss.thread, TraceId: ss.traceID, Result: rf}
	if err := runStatus(rf.GetError(), resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// newSession checks a RunSpec and prepares its run. Errors are gRPC statuses: nothing has
// been sent yet.
func (s *Server) newSession(ctx context.Context, mode rpcMode, spec *agentdv1.RunSpec, send func(*agentdv1.RunEvent) error) (*session, *runtime.Request, error) {
	if s.isDraining() {
		return nil, nil, statusError(codes.Unavailable, reasonDraining, "the server is draining: start the run on another replica", nil)
	}
	if spec == nil {
		return nil, nil, invalidArgument(reasonInvalidArgument, fieldErrors{{Field: "start", Description: "must be set"}})
	}
	var ct *continuation
	if len(spec.GetContinuation()) > 0 {
		var err error
		if ct, err = s.codec.open(spec.GetContinuation()); err != nil {
			return nil, nil, continuationStatus(err)
		}
	}
	agentName := spec.GetAgent()
	if agentName == "" && ct != nil {
		agentName = ct.Agent
	}
	entry, err := s.agents.Agent(agentName)
	if err == nil && (entry == nil || entry.Runtime == nil) {
		err = fmt.Errorf("%w: %q", ErrAgentNotFound, agentName)
	}
	if err != nil {
		return nil, nil, statusError(codes.NotFound, reasonAgentNotFound, err.Error(), map[string]string{"agent": agentName})
	}

	ss := &session{
		srv: s, mode: mode, entry: entry,
		runID:       runtime.RandomID("run"),
		thread:      spec.GetThreadId(),
		reqID:       spec.GetRequestId(),
		inputDoneCh: make(chan struct{}),
		approvals:   map[string]*approvalSlot{},
		clientCalls: map[string]*clientSlot{},
		steerLimit:  rate.NewLimiter(rate.Limit(s.cfg.SteerRate), s.cfg.SteerBurst),
		msgLimit:    rate.NewLimiter(rate.Limit(s.cfg.MessageRate), s.cfg.MessageBurst),
		toolParams:  map[string]runtime.ToolSpec{},
		schemas:     map[string]*runtime.Schema{},
		hasher:      newTranscriptHasher(),
	}
	if mode != modeRun {
		ss.inputDone = true
		close(ss.inputDoneCh)
	}
	if ss.thread == "" && ct != nil {
		ss.thread = ct.ThreadID
	}
	if ss.thread == "" {
		ss.thread = runtime.RandomID("thread")
	}
	for _, t := range entry.Runtime.Tools() {
		ss.toolParams[t.Name] = t
	}

	var fe fieldErrors
	caller := ""
	if s.cfg.Caller != nil {
		caller = s.cfg.Caller(ctx)
	}
	req := &runtime.Request{RunID: ss.runID, ThreadID: ss.thread, Caller: caller, Steer: ss.drainSteers, EndSteer: ss.endSteer, Interrupt: &ss.interrupt, Approve: ss.approve}
	// The hooks the server's interceptors put on the RPC's context run first, in the
	// order they were installed; the agent's own hooks follow (runtime.Config.Hooks).
	if hs := hooks.FromContext(ctx); len(hs) > 0 {
		req.Hooks = runtime.Chain(s.log, hs...)
	}
	req.Messages = messagesFromProto(spec.GetMessages(), "start.messages", &fe)
	if n := transcriptBytes(spec); n > s.cfg.MaxTranscriptBytes {
		fe.add("start.messages", "messages and input are %d bytes; the limit is %d (MaxTranscriptBytes)", n, s.cfg.MaxTranscriptBytes)
	}

	// Client tools.
	if n := len(spec.GetClientTools()); n > s.cfg.MaxClientTools {
		fe.add("start.client_tools", "%d client tools declared; the limit is %d", n, s.cfg.MaxClientTools)
	}
	policy := runtime.Policy{Tools: map[string]runtime.ToolPolicy{}}
	schemaBytes := 0
	for i, ctool := range spec.GetClientTools() {
		if i == s.cfg.MaxClientTools {
			break // refused above; the rest is not worth compiling
		}
		f := fmt.Sprintf("start.client_tools[%d]", i)
		name := ctool.GetSpec().GetName()
		if _, clash := ss.toolParams[name]; clash {
			fe.add(f+".spec.name", "%q is already a tool of agent %s (or declared twice)", name, entry.Name)
			continue
		}
		ts := runtime.ToolSpec{Name: name, Description: ctool.GetSpec().GetDescription(), Executor: runtime.ExecutorClient, CompletesRun: ctool.GetCompletesRun(), Timeout: s.cfg.ClientToolTimeout}
		if p := ctool.GetSpec().GetParameters(); p != nil {
			raw, err := valueToJSON(structpb.NewStructValue(p))
			if err != nil {
				fe.add(f+".spec.parameters", "%v", err)
				continue
			}
			ts.Parameters = json.RawMessage(raw)
			if schemaBytes += len(raw); schemaBytes > s.cfg.MaxClientSchemaBytes {
				fe.add("start.client_tools", "the client tools' schemas hold more than %d bytes together, as many as the server compiles for one run", s.cfg.MaxClientSchemaBytes)
				break
			}
		}
		// Compiled once, within the runtime's limits: a schema whose validation could
		// cost too much is refused here, before the run starts.
		schema, err := runtime.CompileSchema(ts.Parameters)
		if err != nil {
			fe.add(f+".spec.parameters", "not a usable JSON Schema: %v", err)
			continue
		}
		ss.schemas[name] = schema
		if d := ctool.GetTimeout(); d != nil {
			switch t := d.AsDuration(); {
			case t <= 0:
				fe.add(f+".timeout", "must be positive")
			case t > s.cfg.MaxClientToolTimeout:
				fe.add(f+".timeout", "%s is longer than the server allows, %s", t, s.cfg.MaxClientToolTimeout)
			}
			ts.Timeout = d.AsDuration()
		}
		if ctool.GetRequiresApproval() {
			policy.Tools[name] = runtime.ToolPolicy{Approval: runtime.ApprovalAlways}
		}
		ss.toolParams[name] = ts
		req.ClientTools = append(req.ClientTools, ss.clientTool(ts, schema))
	}

	// Settings: a client may tighten the agent's policy, never loosen it.
	cfg := spec.GetConfig()
	if m := cfg.GetModel(); m != "" {
		if entry.Models == nil {
			return nil, nil, statusError(codes.PermissionDenied, reasonModelOverride, fmt.Sprintf("agent %s does not allow choosing the model", entry.Name), map[string]string{"agent": entry.Name})
		}
		model, err := entry.Models(m)
		if err != nil {
			fe.add("start.config.model", "%v", err)
		} else {
			req.Model = model
		}
	}
	if n := cfg.GetMaxSteps(); n != 0 {
		if n < 0 || int(n) > entry.Runtime.MaxSteps() {
			fe.add("start.config.max_steps", "must be between 1 and the agent's limit %d", entry.Runtime.MaxSteps())
		}
		req.MaxSteps = int(n)
	}
	ss.policy = cfg.GetApprovalPolicy()
	if ss.policy == agentdv1.ApprovalPolicy_APPROVAL_POLICY_UNSPECIFIED {
		ss.policy = agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK
		if mode != modeRun {
			ss.policy = agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT
		}
	}
	if _, ok := agentdv1.ApprovalPolicy_name[int32(ss.policy)]; !ok {
		fe.add("start.config.approval_policy", "unknown policy %d", ss.policy)
	}
	if ss.policy == agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK && mode == modeRun {
		req.ApprovalTimeout = s.cfg.ApprovalTimeout
		if d := cfg.GetApprovalTimeout(); d != nil {
			switch t := d.AsDuration(); {
			case t <= 0:
				fe.add("start.config.approval_timeout", "must be positive")
			case t > s.cfg.MaxApprovalTimeout:
				fe.add("start.config.approval_timeout", "%s is longer than the server allows, %s", t, s.cfg.MaxApprovalTimeout)
			}
			req.ApprovalTimeout = d.AsDuration()
		}
	}
	for i, tp := range cfg.GetToolPolicies() {
		if _, ok := ss.toolParams[tp.GetTool()]; !ok {
			fe.add(fmt.Sprintf("start.config.tool_policies[%d].tool", i), "agent %s has no tool %q", entry.Name, tp.GetTool())
			continue
		}
		p := policy.Tools[tp.GetTool()]
		if tp.GetDisabled() {
			p.Disabled = true
		}
		if tp.GetRequireApproval() {
			p.Approval = runtime.ApprovalAlways
		}
		policy.Tools[tp.GetTool()] = p
	}
	req.Policy = policy
	if md := spec.GetMetadata(); md != nil {
		if err := checkValueDepth(structpb.NewStructValue(md)); err != nil {
			fe.add("start.metadata", "%v", err)
		}
		req.Metadata = md.AsMap()
	}

	// New input, or a resume.
	if ct == nil {
		if len(spec.GetDecisions()) > 0 || len(spec.GetToolResults()) > 0 {
			fe.add("start.continuation", "decisions and tool_results resume a parked run: send its continuation too")
		}
		if in := spec.GetInput(); in != "" {
			// The input enters the transcript in the first step, like a steer, so it is
			// among the run's new messages.
			ss.steers = append(ss.steers, runtime.Steer{Message: runtime.UserMessage(in)})
		}
		if len(req.Messages) == 0 && spec.GetInput() == "" {
			fe.add("start.messages", "a run needs input: messages, or input")
		}
	} else if len(fe) == 0 {
		if spec.GetInput() != "" {
			fe.add("start.input", "a resumed run takes no new input; steer it once it runs, or start a new run")
		}
		err := ss.hashStart(messagesToProto(req.Messages))
		if err == nil {
			err = ct.check(entry.Name, ss.thread, ss.hasher)
		}
		if err != nil {
			return nil, nil, continuationStatus(err)
		}
		ss.preload(ctx, ct.Pending, spec, &fe)
		req.Resume = ct.Pending
	}
	if len(fe) > 0 {
		return nil, nil, invalidArgument(reasonInvalidArgument, fe)
	}
	if ss.startHash == nil {
		if err := ss.hashStart(messagesToProto(req.Messages)); err != nil {
			return nil, nil, statusError(codes.Internal, reasonInternal, "hashing the transcript: "+err.Error(), nil)
		}
	}

	// Admission: the caller's share first, then the server's.
	if caller != "" && s.cfg.MaxRunsPerCaller > 0 {
		if !s.callers.admit(caller, s.cfg.MaxRunsPerCaller) {
			return nil, nil, statusError(codes.ResourceExhausted, reasonTooManyCallerRuns, fmt.Sprintf("caller %s has %d runs in progress, as many as the server allows one caller: start this one when one of them ends", caller, s.cfg.MaxRunsPerCaller), map[string]string{"limit": strconv.Itoa(s.cfg.MaxRunsPerCaller)})
		}
		ss.caller = caller
	}
	if n := s.active.Add(1); n > int64(s.cfg.MaxConcurrentRuns) {
		s.active.Add(-1)
		s.callers.release(ss.caller)
		return nil, nil, statusError(codes.ResourceExhausted, reasonTooManyRuns, fmt.Sprintf("the server is running its limit of %d runs: retry later or elsewhere", s.cfg.MaxConcurrentRuns), nil)
	}
	s.runs.Add(1)
	ctx, req.SpanLinks = s.runTraceContext(ctx)
	ss.ctx, ss.cancel = context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.stopRuns, func() { ss.cancel(context.Cause(s.stopRuns)) })
	ss.stopAfter = stop
	if send != nil {
		ss.out = newOutbox(send, func(err error) { ss.cancel(err) })
	}
	return ss, req, nil
}

// hashStart feeds the client's history to the run's transcript hasher, and keeps a
// copy of the hasher at that point, from which a parked run's continuation is digested.
func (ss *session) hashStart(history []*agentdv1.Message) error {
	for i, m := range history {
		if err := ss.hasher.add(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	var err error
	ss.startHash, err = ss.hasher.clone()
	return err
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

// preload checks the decisions and client tool results a resume carries against the
// parked step, and keeps them for the run.
func (ss *session) preload(ctx context.Context, p *runtime.Pending, spec *agentdv1.RunSpec, fe *fieldErrors) {
	awaiting := map[string]runtime.PendingCall{}
	ready := map[string]runtime.PendingCall{}
	if p != nil {
		for _, c := range p.Calls {
			switch c.State {
			case runtime.CallAwaitingApproval:
				awaiting[c.ApprovalID] = c
			case runtime.CallReady:
				ready[c.Call.ID] = c
			}
		}
	}
	ss.preDecisions = map[string]runtime.Decision{}
	for i, d := range spec.GetDecisions() {
		f := fmt.Sprintf("start.decisions[%d]", i)
		c, ok := awaiting[d.GetApprovalId()]
		if !ok {
			fe.add(f+".approval_id", "%q is not an approval the parked run waits for", d.GetApprovalId())
			continue
		}
		if _, dup := ss.preDecisions[d.GetApprovalId()]; dup {
			fe.add(f+".approval_id", "%q is decided twice", d.GetApprovalId())
			continue
		}
		rd, refusal := ss.decision(ctx, d, c.Call.Name, c.Call.Arguments)
		if refusal != nil {
			fe.add(f, "%s", refusal.GetMessage())
			continue
		}
		ss.preDecisions[d.GetApprovalId()] = rd
	}
	ss.preResults = map[string]runtime.Output{}
	for i, tr := range spec.GetToolResults() {
		f := fmt.Sprintf("start.tool_results[%d]", i)
		c, ok := ready[tr.GetToolCallId()]
		if !ok || ss.toolParams[c.Call.Name].Executor != runtime.ExecutorClient {
			fe.add(f+".tool_call_id", "%q is not a client tool call the parked run waits for (declare the client tool again in client_tools)", tr.GetToolCallId())
			continue
		}
		out, err := outputFromProto(tr.GetText(), tr.GetJson(), tr.GetIsError(), tr.GetMedia())
		if err != nil {
			fe.add(f+".json", "%v", err)
			continue
		}
		ss.preResults[tr.GetToolCallId()] = out
	}
}

// continuationStatus is the status of a continuation that cannot be used.
func continuationStatus(err error) error {
	reason := reasonContinuation
	switch {
	case errors.Is(err, errContinuationExpired):
		reason = reasonContinuationExpired
	case errors.Is(err, errContinuationMismatch):
		reason = reasonContinuationMismatch
	}
	return statusError(codes.FailedPrecondition, reason, err.Error(), nil)
}

// endSession releases what a session holds.
func (s *Server) endSession(ss *session) {
	ss.stopAfter()
	ss.cancel(nil)
	s.callers.release(ss.caller)
	s.active.Add(-1)
	s.runs.Done()
}

// ListAgents implements agentdv1.AgentServiceServer.
func (s *Server) ListAgents(context.Context, *agentdv1.ListAgentsRequest) (*agentdv1.ListAgentsResponse, error) {
	resp := &agentdv1.ListAgentsResponse{}
	for _, e := range s.agents.List() {
		resp.Agents = append(resp.Agents, agentToProto(e))
	}
	return resp, nil
}
