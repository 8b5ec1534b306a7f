package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// rpcMode says which RPC a session serves.
type rpcMode uint8

const (
	modeRun     rpcMode = iota // bidi: the client answers on the stream
	modeStart                  // server stream: nothing comes back from the client
	modeExecute                // unary: the outcome only
)

// errClientCancel is the cause of a run the client cancelled with a cancel message.
var errClientCancel = errors.New("cancelled by the client")

// session is one run over one RPC. The run's loop runs on the RPC's goroutine and sends
// the events; the Run RPC's receive goroutine feeds decisions, steers, client tool
// results and cancels into it. Every send, and every change to the input state below,
// happens under mu, so an input_ack is always sent before any event its message causes.
type session struct {
	srv    *Server
	mode   rpcMode
	entry  *AgentEntry
	ctx    context.Context
	cancel context.CancelCauseFunc
	policy agentdv1.ApprovalPolicy
	runID  string
	thread string
	reqID  string
	send   func(*agentdv1.RunEvent) error // nil for ExecuteRun
	// stopAfter unhooks the session from the server's shutdown.
	stopAfter func() bool
	// started, if set, is called once run_started has been sent.
	started func()
	// traceID is the run's trace id, from run_started; set on the run's goroutine.
	traceID string

	// Set up before the run starts, read-only after.
	toolParams map[string]runtime.ToolSpec // every tool of the run, for edited arguments
	hasher     *transcriptHasher           // the transcript so far: history, then each step's messages
	startHash  *transcriptHasher           // the history alone

	mu              sync.Mutex
	seq             int64
	lastSent        time.Time
	sendErr         error
	ended           bool // run_finished is going out: nothing more is acked
	inputDone       bool // the client half-closed, or the RPC takes no input
	inputDoneCh     chan struct{}
	approvals       map[string]*approvalSlot
	clientCalls     map[string]*clientSlot
	steers          []runtime.Steer
	interrupt       runtime.Interrupter
	steerLimit      *rate.Limiter
	clientCancelled bool
	preDecisions    map[string]runtime.Decision
	preResults      map[string]runtime.Output
	step            runtime.StepStarted // the last step started, for checkpoints
}

type approvalSlot struct {
	tool, args string
	decided    bool
	ch         chan runtime.Decision
}

type clientSlot struct {
	done bool
	ch   chan runtime.Output
}

// sendLocked stamps and sends one event; numbered events take the next seq. A failed
// send cancels the run: the client is gone.
func (ss *session) sendLocked(ev *agentdv1.RunEvent, numbered bool) error {
	if ss.sendErr != nil {
		return ss.sendErr
	}
	now := ss.srv.now()
	if numbered {
		ss.seq++
		ev.Seq = ss.seq
	}
	ev.RunId = ss.runID
	ev.Time = timestamppb.New(now)
	ss.lastSent = now
	if ss.send == nil {
		return nil
	}
	if err := ss.send(ev); err != nil {
		ss.sendErr = err
		ss.cancel(err)
		return err
	}
	return nil
}

func (ss *session) sendEvent(ev *agentdv1.RunEvent) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.sendLocked(ev, true)
}

// ackLocked answers a client message.
func (ss *session) ackLocked(clientSeq int64, refusal *agentdv1.RunError) {
	ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_InputAck{InputAck: &agentdv1.InputAck{ClientSeq: clientSeq, Accepted: refusal == nil, Error: refusal}}}, true)
}

// closeInput records that nothing more comes from the client: what then needs the client
// parks the run.
func (ss *session) closeInput() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.inputDone {
		ss.inputDone = true
		close(ss.inputDoneCh)
	}
}

// receive reads the client's messages until the stream ends. It is not joined: it ends
// when the RPC does.
func (ss *session) receive(recv func() (*agentdv1.RunRequest, error)) {
	for {
		req, err := recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				ss.srv.log.Debug("receive ended", "run_id", ss.runID, "error", err)
			}
			if c := status.Code(err); c == codes.Canceled || c == codes.DeadlineExceeded {
				// The client went away (its RPC cancelled, its connection closed): that
				// cancels the run, before the input ends, so that what waits for the
				// client does not park it as it would after a half-close. The RPC's own
				// context may be seen done a moment after Recv fails.
				ss.cancel(err)
			}
			ss.closeInput()
			return
		}
		ss.handle(req)
	}
}

// handle acts on one client message after start.
func (ss *session) handle(req *agentdv1.RunRequest) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended {
		return // run_finished is out: the stream carries nothing more
	}
	seq := req.GetClientSeq()
	if fe := takeInvalidUTF8(req); fe != nil {
		// Decoded with the strings made valid (Codec): refused, and the run goes on.
		ss.ackLocked(seq, utf8Refusal(fe))
		return
	}
	switch k := req.GetKind().(type) {
	case *agentdv1.RunRequest_Start:
		ss.ackLocked(seq, ackError("ALREADY_STARTED", "the run has already started: one run per stream"))
	case *agentdv1.RunRequest_ApprovalDecision:
		ss.decideLocked(seq, k.ApprovalDecision)
	case *agentdv1.RunRequest_Steer:
		ss.steerLocked(seq, k.Steer)
	case *agentdv1.RunRequest_ToolResult:
		ss.toolResultLocked(seq, k.ToolResult)
	case *agentdv1.RunRequest_Cancel:
		ss.ackLocked(seq, nil)
		ss.clientCancelled = true
		reason := k.Cancel.GetReason()
		if reason == "" {
			ss.cancel(errClientCancel)
		} else {
			ss.cancel(fmt.Errorf("%w: %s", errClientCancel, reason))
		}
	case *agentdv1.RunRequest_Ping:
		ss.ackLocked(seq, nil)
	default:
		ss.ackLocked(seq, ackError("EMPTY_MESSAGE", "the message has no kind: set one of approval_decision, steer, tool_result, cancel or ping"))
	}
}

// decision turns a client's approval decision into the runtime's, checking it against
// the call: outcome, editability and the tool's schema.
func (ss *session) decision(d *agentdv1.ApprovalDecision, tool, args string) (runtime.Decision, *agentdv1.RunError) {
	rd := runtime.Decision{Reason: d.GetReason(), DecidedBy: runtime.DecidedByClient}
	switch d.GetOutcome() {
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED:
		rd.Outcome = runtime.OutcomeApproved
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED:
		rd.Outcome = runtime.OutcomeDenied
	default:
		return rd, ackError("INVALID_DECISION", "outcome must be APPROVAL_OUTCOME_APPROVED or APPROVAL_OUTCOME_DENIED, got %s", d.GetOutcome())
	}
	if d.GetEditedArguments() == nil {
		return rd, nil
	}
	if rd.Outcome != runtime.OutcomeApproved {
		return rd, ackError("INVALID_DECISION", "edited_arguments go with APPROVAL_OUTCOME_APPROVED only")
	}
	edited, err := valueToJSON(d.GetEditedArguments())
	if err != nil {
		return rd, ackError("INVALID_ARGUMENTS", "edited_arguments: %v", err)
	}
	spec := ss.toolParams[tool]
	schema, err := runtime.CompileSchema(spec.Parameters)
	if err != nil {
		return rd, ackError("INVALID_ARGUMENTS", "tool %s has no usable schema: %v", tool, err)
	}
	if err := schema.Validate(edited); err != nil {
		return rd, ackError("INVALID_ARGUMENTS", "edited_arguments for tool %s: %v", tool, err)
	}
	if edited != args {
		rd.EditedArguments = edited
	}
	return rd, nil
}

func (ss *session) decideLocked(seq int64, d *agentdv1.ApprovalDecision) {
	slot := ss.approvals[d.GetApprovalId()]
	switch {
	case slot == nil:
		ss.ackLocked(seq, ackError("UNKNOWN_APPROVAL", "no approval %q is open in this run", d.GetApprovalId()))
		return
	case slot.decided:
		ss.ackLocked(seq, ackError("ALREADY_DECIDED", "approval %q was already decided", d.GetApprovalId()))
		return
	}
	rd, refusal := ss.decision(d, slot.tool, slot.args)
	if refusal != nil {
		ss.ackLocked(seq, refusal)
		return
	}
	slot.decided = true
	ss.ackLocked(seq, nil)
	slot.ch <- rd // buffered: the waiting Approve picks it up after the ack went out
}

func (ss *session) steerLocked(seq int64, st *agentdv1.Steer) {
	var m runtime.Message
	switch {
	case st.GetMessage() != nil && st.GetText() != "":
		ss.ackLocked(seq, ackError("INVALID_STEER", "set message or text, not both"))
		return
	case st.GetMessage() != nil:
		var fe fieldErrors
		pm := st.GetMessage()
		if pm.GetRole() == agentdv1.Role_ROLE_UNSPECIFIED {
			pm = &agentdv1.Message{Id: pm.GetId(), Role: agentdv1.Role_ROLE_USER, Parts: pm.GetParts()}
		}
		m = messageFromProto(pm, "steer.message", &fe)
		if m.Role != runtime.RoleUser {
			fe.add("steer.message.role", "a steer is a user message")
		}
		if len(fe) > 0 {
			ss.ackLocked(seq, ackError("INVALID_STEER", "%s", fe.summary()))
			return
		}
	case st.GetText() != "":
		m = runtime.UserMessage(st.GetText())
	default:
		ss.ackLocked(seq, ackError("INVALID_STEER", "a steer needs a message or a text"))
		return
	}
	if !ss.steerLimit.Allow() {
		ss.ackLocked(seq, ackError("STEER_RATE_LIMITED", "too many steers: at most %g a second (burst %d)", float64(ss.steerLimit.Limit()), ss.steerLimit.Burst()))
		return
	}
	interrupt := st.GetMode() == agentdv1.SteerMode_STEER_MODE_INTERRUPT
	ss.ackLocked(seq, nil)
	ss.steers = append(ss.steers, runtime.Steer{Seq: seq, Message: m, Interrupt: interrupt})
	if interrupt {
		ss.interrupt.Interrupt()
	}
}

func (ss *session) toolResultLocked(seq int64, tr *agentdv1.ToolResult) {
	slot := ss.clientCalls[tr.GetToolCallId()]
	if slot == nil || slot.done {
		ss.ackLocked(seq, ackError("UNKNOWN_TOOL_CALL", "no client tool call %q is waiting for a result", tr.GetToolCallId()))
		return
	}
	out, err := outputFromProto(tr.GetText(), tr.GetJson(), tr.GetIsError(), tr.GetMedia())
	if err != nil {
		ss.ackLocked(seq, ackError("INVALID_TOOL_RESULT", "json: %v", err))
		return
	}
	slot.done = true
	ss.ackLocked(seq, nil)
	slot.ch <- out
}

// drainSteers is Request.Steer.
func (ss *session) drainSteers() []runtime.Steer {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.steers
	ss.steers = nil
	return s
}

// approve is Request.Approve: it applies the run's approval policy, answers from the
// decisions a resume carried, or waits for the client.
func (ss *session) approve(ctx context.Context, req runtime.ApprovalRequest) (runtime.Decision, error) {
	ss.mu.Lock()
	if d, ok := ss.preDecisions[req.ID]; ok {
		delete(ss.preDecisions, req.ID)
		if slot := ss.approvals[req.ID]; slot != nil {
			slot.decided = true
		}
		ss.mu.Unlock()
		return d, nil
	}
	slot := ss.approvals[req.ID]
	ss.mu.Unlock()
	switch ss.policy {
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_DENY:
		return runtime.Decision{Outcome: runtime.OutcomeDenied, DecidedBy: runtime.DecidedByPolicy, Reason: "the run's approval policy denies calls that need an approval"}, nil
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE:
		if req.AutoApprovable {
			return runtime.Decision{Outcome: runtime.OutcomeApproved, DecidedBy: runtime.DecidedByPolicy}, nil
		}
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT:
		return runtime.Decision{}, runtime.ErrInterrupt
	}
	if ss.mode != modeRun || slot == nil {
		return runtime.Decision{}, runtime.ErrInterrupt
	}
	select {
	case d := <-slot.ch:
		return d, nil
	case <-ctx.Done():
		return runtime.Decision{}, ctx.Err()
	case <-ss.inputDoneCh:
		select {
		case d := <-slot.ch:
			return d, nil
		default:
		}
		// A client that went away (its RPC cancelled, its connection closed) also ends
		// the input, but it cancels the run: only a half-close parks it.
		if err := ctx.Err(); err != nil {
			return runtime.Decision{}, err
		}
		return runtime.Decision{}, runtime.ErrInterrupt // the client left: park
	}
}

// clientTool is the runtime tool behind a tool the client runs: Execute waits for the
// client's tool_result, or parks the run when the client cannot answer.
func (ss *session) clientTool(spec runtime.ToolSpec) runtime.Tool {
	return runtime.NewTool(spec, func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
		ss.mu.Lock()
		if out, ok := ss.preResults[call.ID]; ok {
			delete(ss.preResults, call.ID)
			ss.mu.Unlock()
			return out, nil
		}
		slot := ss.clientCalls[call.ID]
		ss.mu.Unlock()
		defer func() {
			ss.mu.Lock()
			if slot != nil {
				slot.done = true // a late result is refused
			}
			ss.mu.Unlock()
		}()
		if ss.mode != modeRun || slot == nil {
			return runtime.Output{}, runtime.ErrInterrupt
		}
		select {
		case out := <-slot.ch:
			return out, nil
		case <-ctx.Done():
			return runtime.Output{}, ctx.Err()
		case <-ss.inputDoneCh:
			select {
			case out := <-slot.ch:
				return out, nil
			default:
			}
			if err := ctx.Err(); err != nil {
				return runtime.Output{}, err // the client went away: see approve
			}
			return runtime.Output{}, runtime.ErrInterrupt
		}
	})
}

// keepAlive sends a heartbeat after each interval of silence, and go_away when the server
// starts draining, until the returned stop is called. It holds no goroutine while idle:
// a parked run costs what its state costs, not a goroutine's stack.
func (ss *session) keepAlive() (stop func()) {
	interval := ss.srv.cfg.HeartbeatInterval
	stopped := false
	var t *time.Timer
	beat := func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if stopped || ss.ended {
			return
		}
		silent := ss.srv.now().Sub(ss.lastSent)
		if silent >= interval {
			ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_Heartbeat{Heartbeat: &agentdv1.Heartbeat{LastSeq: ss.seq}}}, false)
			silent = 0
		}
		t.Reset(interval - silent)
	}
	ss.mu.Lock()
	t = time.AfterFunc(interval, beat)
	ss.mu.Unlock()
	stopDrain := context.AfterFunc(ss.srv.drainCtx, func() {
		left := max(ss.srv.drainDeadline().Sub(ss.srv.now()), 0)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if !stopped && !ss.ended {
			ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_GoAway{GoAway: &agentdv1.GoAway{TimeLeft: durationpb.New(left)}}}, true)
		}
	})
	return func() {
		ss.mu.Lock()
		stopped = true
		ss.mu.Unlock()
		t.Stop()
		stopDrain()
	}
}

// emit converts one runtime event, does what the session must know of it, and sends it.
func (ss *session) emit(ev runtime.Event) error {
	pe := eventToProto(ev)
	switch e := ev.(type) {
	case *runtime.RunStarted:
		ss.traceID = e.TraceID
		pe.GetRunStarted().RequestId = ss.reqID
		if err := ss.sendEvent(pe); err != nil {
			return err
		}
		if ss.started != nil {
			ss.started()
		}
		return nil
	case *runtime.StepStarted:
		ss.mu.Lock()
		ss.step = *e
		ss.mu.Unlock()
	case *runtime.ApprovalRequested:
		ss.mu.Lock()
		ss.approvals[e.ApprovalID] = &approvalSlot{tool: e.ToolName, args: e.Arguments, ch: make(chan runtime.Decision, 1)}
		ss.mu.Unlock()
	case *runtime.ToolExecutionStarted:
		if e.Executor == runtime.ExecutorClient {
			ss.mu.Lock()
			if _, pre := ss.preResults[e.CallID]; !pre {
				ss.clientCalls[e.CallID] = &clientSlot{ch: make(chan runtime.Output, 1)}
			}
			ss.mu.Unlock()
		}
	case *runtime.StepFinished:
		for _, m := range pe.GetStepFinished().GetNewMessages() {
			ss.hasher.add(m)
		}
		if err := ss.sendEvent(pe); err != nil {
			return err
		}
		return ss.checkpoint(e)
	}
	return ss.sendEvent(pe)
}

// checkpoint sends a continuation from which the run can resume after the step.
func (ss *session) checkpoint(e *runtime.StepFinished) error {
	ss.mu.Lock()
	st := ss.step
	ss.mu.Unlock()
	ct := &continuation{
		Agent: ss.entry.Name, ThreadID: ss.thread, Digest: ss.hasher.sum(),
		Pending: &runtime.Pending{Step: st.Index + 1, Turn: st.Turn, StepInTurn: st.IndexInTurn + 1},
	}
	b, err := ss.srv.codec.seal(ct)
	if err != nil {
		ss.srv.log.Error("sealing a checkpoint failed", "run_id", ss.runID, "error", err)
		return nil
	}
	return ss.sendEvent(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_Checkpoint{Checkpoint: &agentdv1.Checkpoint{Continuation: b, StepId: e.StepID}}})
}

// finished builds run_finished from the runtime's RunFinished.
func (ss *session) finished(fin *runtime.RunFinished) *agentdv1.RunFinished {
	ss.mu.Lock()
	clientCancelled := ss.clientCancelled && errors.Is(fin.Err, errClientCancel)
	ss.mu.Unlock()
	rf := &agentdv1.RunFinished{
		Reason:      endReasonToProto(fin.Reason),
		Error:       runError(fin, clientCancelled),
		NewMessages: messagesToProto(fin.NewMessages),
		Usage:       usageToProto(fin.Usage),
		FinalText:   protoString(fin.FinalText),
	}
	if p := fin.Pending; p != nil {
		// The parked step's assistant message travels in Pending, not in NewMessages, so
		// the digest is the history's and NewMessages', not the running hasher's.
		digest, err := ss.startHash.digestWith(rf.NewMessages)
		if err == nil {
			rf.Continuation, err = ss.srv.codec.seal(&continuation{Agent: ss.entry.Name, ThreadID: ss.thread, Digest: digest, Pending: p})
		}
		if err != nil {
			ss.srv.log.Error("sealing a continuation failed", "run_id", ss.runID, "error", err)
		}
		for _, c := range p.Calls {
			switch {
			case c.State == runtime.CallAwaitingApproval:
				rf.PendingApprovals = append(rf.PendingApprovals, &agentdv1.ApprovalRequested{
					ApprovalId: c.ApprovalID, ToolCallId: c.Call.ID, ToolName: c.Call.Name,
					ArgumentsJson: protoString(c.Call.Arguments), Editable: true, Reason: c.Reason,
				})
			case c.State == runtime.CallReady && ss.toolParams[c.Call.Name].Executor == runtime.ExecutorClient:
				rf.PendingClientToolCallIds = append(rf.PendingClientToolCallIds, c.Call.ID)
			}
		}
	}
	return rf
}

// execute runs the loop to its end, sending every event, and returns run_finished and the
// status the RPC ends with.
func (ss *session) execute(req *runtime.Request) (*agentdv1.RunFinished, error) {
	defer ss.cancel(nil)
	var rf *agentdv1.RunFinished
	for ev, err := range ss.entry.Runtime.Run(ss.ctx, req) {
		if err != nil {
			// Refused before it started: nothing was sent.
			return nil, invalidArgument(reasonInvalidArgument, fieldErrors{{Field: "start", Description: err.Error()}})
		}
		if fin, ok := ev.(*runtime.RunFinished); ok {
			rf = ss.finished(fin)
			ss.mu.Lock()
			ss.ended = true
			err := ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunFinished{RunFinished: rf}}, true)
			ss.mu.Unlock()
			if err != nil {
				return rf, sendStatus(err)
			}
			continue
		}
		if err := ss.emit(ev); err != nil {
			return nil, sendStatus(err)
		}
	}
	if rf == nil {
		return nil, statusError(codes.Internal, reasonInternal, "the run ended without run_finished", nil)
	}
	return rf, nil
}

// sendStatus is the status of an RPC whose stream broke.
func sendStatus(err error) error {
	return statusError(codes.Unavailable, "STREAM_BROKEN", "sending to the client failed: "+err.Error(), nil)
}
