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
	"google.golang.org/protobuf/proto"
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
	entry  *Agent
	ctx    context.Context
	cancel context.CancelCauseFunc
	policy agentdv1.ApprovalPolicy
	runID  string
	thread string
	reqID  string
	out    *outbox // the stream's events go out through it; nil for ExecuteRun
	// caller is the key of the per-caller run limit; empty when none applies.
	caller string
	// stopAfter unhooks the session from the server's shutdown.
	stopAfter func() bool
	// started, if set, is called once run_started has been sent.
	started func()
	// traceID is the run's trace id, from run_started; set on the run's goroutine.
	traceID string

	// Set up before the run starts, read-only after.
	toolParams map[string]runtime.ToolSpec // every tool of the run, for edited arguments
	// schemas are the compiled schemas of the run's tools, for edited arguments: the
	// client tools' from the start, the agent's tools' compiled when first needed. Only
	// the goroutine that reads client messages uses it once the run has started.
	schemas   map[string]*runtime.Schema
	hasher    *transcriptHasher // the transcript so far: history, then each step's messages
	startHash *transcriptHasher // the history alone

	mu              sync.Mutex
	seq             int64
	lastSent        time.Time
	ended           bool // run_finished is going out: nothing more is acked
	inputDone       bool // the client half-closed, or the RPC takes no input
	inputDoneCh     chan struct{}
	approvals       map[string]*approvalSlot
	clientCalls     map[string]*clientSlot
	steers          []runtime.Steer // accepted, not yet taken by the run
	steerBytes      int             // the encoded size of steers
	steerClosed     bool            // the run takes no more steers (Request.EndSteer)
	interrupt       runtime.Interrupter
	steerLimit      *rate.Limiter
	msgLimit        *rate.Limiter // every client message after start
	clientCancelled bool
	preDecisions    map[string]runtime.Decision
	preResults      map[string]runtime.Output
	step            runtime.StepStarted // the last step started, for checkpoints
}

// approvalSlot is an approval the run asked the client for. A decision is accepted only
// while the run still waits for it: closed says why it no longer does.
type approvalSlot struct {
	tool, args string
	decided    bool
	closed     string
	ch         chan runtime.Decision
}

// clientSlot is a client tool call whose result the run awaits; closed says why it no
// longer does.
type clientSlot struct {
	done   bool
	closed string
	ch     chan runtime.Output
}

// sendLocked stamps one event and queues it for the stream; numbered events take the
// next seq. It never blocks: the order events are queued in, under mu, is the order they
// go out in. A failed send has cancelled the run (the client is gone): its error comes
// back from every later call.
func (ss *session) sendLocked(ev *agentdv1.RunEvent, numbered bool) error {
	now := ss.srv.now()
	if numbered {
		ss.seq++
		ev.Seq = ss.seq
	}
	ev.RunId = ss.runID
	ev.Time = timestamppb.New(now)
	ss.lastSent = now
	if ss.out == nil {
		return nil
	}
	return ss.out.put(ev)
}

// sendEvent sends one of the run's events. Called on the run's goroutine, it waits while
// the client is behind, which holds the model back.
func (ss *session) sendEvent(ev *agentdv1.RunEvent) error {
	ss.mu.Lock()
	err := ss.sendLocked(ev, true)
	ss.mu.Unlock()
	if err == nil && ss.out != nil {
		err = ss.out.wait(ss.ctx)
	}
	return err
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
		// Acks queue like events: while the client reads nothing, read nothing from it
		// either, so that flow control, not agentd's memory, holds what it sends.
		if ss.out.wait(ss.ctx) != nil {
			ss.closeInput()
			return
		}
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
		if !ss.handle(req) {
			// Over the stream's message rate: read nothing more until the bucket has a
			// token again, so that a client flooding the stream is held back by flow
			// control instead of being served at the flood's pace.
			r := ss.msgLimit.Reserve()
			wait := r.Delay()
			r.Cancel() // the token is the next message's to take
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ss.ctx.Done():
			}
			t.Stop()
		}
	}
}

// handle acts on one client message after start. It returns false when the message was
// refused for the stream's message rate.
func (ss *session) handle(req *agentdv1.RunRequest) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended {
		return true // run_finished is out: the stream carries nothing more
	}
	seq := req.GetClientSeq()
	_, cancel := req.GetKind().(*agentdv1.RunRequest_Cancel)
	if !(cancel && !ss.clientCancelled) && !ss.msgLimit.Allow() {
		// A client's first cancel is never refused: it ends the run, and the flood.
		ss.ackLocked(seq, ackError(reasonRateLimited, "too many messages on this stream: at most %g a second (burst %d)", float64(ss.msgLimit.Limit()), ss.msgLimit.Burst()))
		return false
	}
	if fe := takeInvalidUTF8(req); fe != nil {
		// Decoded with the strings made valid (Codec): refused, and the run goes on.
		ss.ackLocked(seq, utf8Refusal(fe))
		return true
	}
	switch k := req.GetKind().(type) {
	case *agentdv1.RunRequest_Start:
		ss.ackLocked(seq, ackError(reasonAlreadyStarted, "the run has already started: one run per stream"))
	case *agentdv1.RunRequest_ApprovalDecision:
		// Validating edited arguments must not hold up the run's events.
		ss.mu.Unlock()
		ss.decide(seq, k.ApprovalDecision)
		ss.mu.Lock()
	case *agentdv1.RunRequest_Steer:
		ss.steerLocked(seq, k.Steer)
	case *agentdv1.RunRequest_ToolResult:
		ss.toolResultLocked(seq, k.ToolResult)
	case *agentdv1.RunRequest_Cancel:
		if refusal := ss.endingLocked(); refusal != nil {
			ss.ackLocked(seq, refusal)
			return true
		}
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
		ss.ackLocked(seq, ackError(reasonEmptyMessage, "the message has no kind: set one of approval_decision, steer, tool_result, cancel or ping"))
	}
	return true
}

// endingLocked refuses input once the run's context is done: whatever the message asks,
// the run will not act on it any more.
func (ss *session) endingLocked() *agentdv1.RunError {
	if ss.ctx.Err() == nil {
		return nil
	}
	why := "it is ending"
	switch cause := context.Cause(ss.ctx); {
	case errors.Is(cause, errClientCancel):
		why = "it was cancelled"
	case errors.Is(cause, runtime.ErrShutdown):
		why = "the server is shutting down; resume it from its continuation on another replica"
	case errors.Is(cause, errClientStalled):
		why = "its client read nothing for too long"
	}
	return ackError(reasonRunEnding, "the run cannot act on this any more: %s", why)
}

// decision turns a client's approval decision into the runtime's, checking it against
// the call: outcome, editability and the tool's schema. It validates edited arguments,
// which may take a while, so it is called without mu held; ctx bounds the validation.
func (ss *session) decision(ctx context.Context, d *agentdv1.ApprovalDecision, tool, args string) (runtime.Decision, *agentdv1.RunError) {
	rd := runtime.Decision{Reason: d.GetReason(), DecidedBy: runtime.DecidedByClient}
	switch d.GetOutcome() {
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED:
		rd.Outcome = runtime.OutcomeApproved
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED:
		rd.Outcome = runtime.OutcomeDenied
	default:
		return rd, ackError(reasonInvalidDecision, "outcome must be APPROVAL_OUTCOME_APPROVED or APPROVAL_OUTCOME_DENIED, got %s", d.GetOutcome())
	}
	if d.GetEditedArguments() == nil {
		return rd, nil
	}
	if rd.Outcome != runtime.OutcomeApproved {
		return rd, ackError(reasonInvalidDecision, "edited_arguments go with APPROVAL_OUTCOME_APPROVED only")
	}
	edited, err := valueToJSON(d.GetEditedArguments())
	if err != nil {
		return rd, ackError(reasonInvalidEditedArgs, "edited_arguments: %v", err)
	}
	schema := ss.schemas[tool]
	if schema == nil {
		if schema, err = runtime.CompileSchema(ss.toolParams[tool].Parameters); err != nil {
			return rd, ackError(reasonInvalidEditedArgs, "tool %s has no usable schema: %v", tool, err)
		}
		ss.schemas[tool] = schema
	}
	if err := schema.ValidateContext(ctx, edited); err != nil {
		return rd, ackError(reasonInvalidEditedArgs, "edited_arguments for tool %s: %v", tool, err)
	}
	if edited != args {
		rd.EditedArguments = edited
	}
	return rd, nil
}

// decide acts on a client's approval decision. It is called without mu held: edited
// arguments are validated outside the lock, then the approval is checked again.
func (ss *session) decide(seq int64, d *agentdv1.ApprovalDecision) {
	ss.mu.Lock()
	slot := ss.approvals[d.GetApprovalId()]
	refusal := ss.approvalRefusalLocked(slot, d.GetApprovalId())
	if refusal != nil {
		ss.ackLocked(seq, refusal)
		ss.mu.Unlock()
		return
	}
	tool, args := slot.tool, slot.args
	ss.mu.Unlock()
	rd, refusal := ss.decision(ss.ctx, d, tool, args)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended {
		return
	}
	// The approval may have closed, or the run begun to end, while the arguments were
	// validated: that, not the validation it cut short, is the answer.
	if closed := ss.approvalRefusalLocked(slot, d.GetApprovalId()); closed != nil {
		refusal = closed
	}
	if refusal != nil {
		ss.ackLocked(seq, refusal)
		return
	}
	slot.decided = true
	ss.ackLocked(seq, nil)
	slot.ch <- rd // buffered: the waiting Approve picks it up after the ack went out
}

// approvalRefusalLocked says why approval id takes no decision, or nil when it does. A
// run that is ending says so first, whatever became of the approval on the way.
func (ss *session) approvalRefusalLocked(slot *approvalSlot, id string) *agentdv1.RunError {
	if refusal := ss.endingLocked(); refusal != nil {
		return refusal
	}
	switch {
	case slot == nil:
		return ackError(reasonUnknownApproval, "no approval %q is open in this run", id)
	case slot.decided:
		return ackError(reasonAlreadyDecided, "approval %q was already decided", id)
	case slot.closed != "":
		return ackError(reasonApprovalClosed, "approval %q is no longer open: %s", id, slot.closed)
	}
	return nil
}

func (ss *session) steerLocked(seq int64, st *agentdv1.Steer) {
	if refusal := ss.endingLocked(); refusal != nil {
		ss.ackLocked(seq, refusal)
		return
	}
	if ss.steerClosed {
		ss.ackLocked(seq, ackError(reasonRunEnding, "the run is ending and takes no more steers: start a new run with this input"))
		return
	}
	var m runtime.Message
	size := 0
	switch {
	case st.GetMessage() != nil && st.GetText() != "":
		ss.ackLocked(seq, ackError(reasonInvalidSteer, "set message or text, not both"))
		return
	case st.GetMessage() != nil:
		pm := st.GetMessage()
		if pm.GetRole() == agentdv1.Role_ROLE_UNSPECIFIED {
			pm = &agentdv1.Message{Id: pm.GetId(), Role: agentdv1.Role_ROLE_USER, Parts: pm.GetParts()}
		}
		var fe fieldErrors
		m = steerMessage(pm, &fe)
		if len(fe) > 0 {
			ss.ackLocked(seq, ackError(reasonInvalidSteer, "%s", fe.summary()))
			return
		}
		size = proto.Size(pm)
	case st.GetText() != "":
		m = runtime.UserMessage(st.GetText())
		size = len(st.GetText())
	default:
		ss.ackLocked(seq, ackError(reasonInvalidSteer, "a steer needs a message or a text"))
		return
	}
	cfg := &ss.srv.cfg
	switch {
	case len(ss.steers) >= cfg.MaxQueuedSteers:
		ss.ackLocked(seq, ackError(reasonSteerQueueFull, "%d steers already wait to be applied, as many as this server holds for a run: send this one once steer_applied reports them", len(ss.steers)))
		return
	case ss.steerBytes+size > cfg.MaxQueuedSteerBytes:
		ss.ackLocked(seq, ackError(reasonSteerQueueFull, "the steers waiting to be applied would hold %d bytes, more than the %d this server holds for a run: send this one once steer_applied reports them", ss.steerBytes+size, cfg.MaxQueuedSteerBytes))
		return
	}
	if !ss.steerLimit.Allow() {
		ss.ackLocked(seq, ackError(reasonSteerRateLimited, "too many steers: at most %g a second (burst %d)", float64(ss.steerLimit.Limit()), ss.steerLimit.Burst()))
		return
	}
	interrupt := st.GetMode() == agentdv1.SteerMode_STEER_MODE_INTERRUPT
	ss.ackLocked(seq, nil)
	ss.steers = append(ss.steers, runtime.Steer{Seq: seq, Message: m, Interrupt: interrupt})
	ss.steerBytes += size
	if interrupt {
		ss.interrupt.Interrupt()
	}
}

// steerMessage converts a steer's message, which must be what a start's new input may
// be: a user message of text and media.
func steerMessage(pm *agentdv1.Message, fe *fieldErrors) runtime.Message {
	m := messageFromProto(pm, "steer.message", fe)
	if m.Role != runtime.RoleUser {
		fe.add("steer.message.role", "a steer is a user message")
	}
	for j, p := range m.Parts {
		if p.Kind != runtime.PartText && p.Kind != runtime.PartMedia {
			fe.add(fmt.Sprintf("steer.message.parts[%d]", j), "a steer holds text and media; %s parts come from the model and tools, never from a steer", partKindName(p.Kind))
		}
	}
	return m
}

func partKindName(k runtime.PartKind) string {
	switch k {
	case runtime.PartReasoning:
		return "reasoning"
	case runtime.PartToolCall:
		return "tool_call"
	case runtime.PartToolResult:
		return "tool_result"
	}
	return "these"
}

func (ss *session) toolResultLocked(seq int64, tr *agentdv1.ToolResult) {
	if refusal := ss.endingLocked(); refusal != nil {
		ss.ackLocked(seq, refusal)
		return
	}
	slot := ss.clientCalls[tr.GetToolCallId()]
	switch {
	case slot == nil || slot.done:
		ss.ackLocked(seq, ackError(reasonUnknownToolCall, "no client tool call %q is waiting for a result", tr.GetToolCallId()))
		return
	case slot.closed != "":
		ss.ackLocked(seq, ackError(reasonToolCallClosed, "client tool call %q no longer waits for a result: %s", tr.GetToolCallId(), slot.closed))
		return
	}
	out, err := outputFromProto(tr.GetText(), tr.GetJson(), tr.GetIsError(), tr.GetMedia())
	if err != nil {
		ss.ackLocked(seq, ackError(reasonInvalidToolResult, "json: %v", err))
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
	ss.steers, ss.steerBytes = nil, 0
	return s
}

// endSteer is Request.EndSteer: the queued steers, or, with none, the end of steering.
func (ss *session) endSteer() []runtime.Steer {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.steers) == 0 {
		ss.steerClosed = true
		return nil
	}
	s := ss.steers
	ss.steers, ss.steerBytes = nil, 0
	return s
}

// closeSlot records why an approval no longer takes a decision.
func (ss *session) closeSlot(slot *approvalSlot, why string) {
	if slot == nil {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if slot.closed == "" && !slot.decided {
		slot.closed = why
	}
}

// waitEnded says why a wait for the client ended without its answer; expired is what
// the wait's own deadline means.
func (ss *session) waitEnded(ctx context.Context, expired string) string {
	switch {
	case ss.ctx.Err() != nil:
		return "the run is ending"
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return expired
	case ctx.Err() != nil:
		return "the step was interrupted"
	}
	return "the run parked; resume it with the continuation"
}

// resolvedWhy says in words how the run resolved an approval.
func resolvedWhy(e *runtime.ApprovalResolved) string {
	var why string
	switch e.Outcome {
	case runtime.OutcomeExpired:
		why = "it expired"
	case runtime.OutcomeCancelled:
		why = "it was cancelled"
	default:
		why = "it was " + e.Outcome.String() + " by " + e.DecidedBy.String()
	}
	if e.Reason != "" {
		why += " (" + e.Reason + ")"
	}
	return why
}

// approve is Request.Approve: it applies the run's approval policy, answers from the
// decisions a resume carried, or waits for the client. However it returns, the
// approval takes no decision afterwards: one acked is one applied.
func (ss *session) approve(ctx context.Context, req runtime.ApprovalRequest) (runtime.Decision, error) {
	ss.mu.Lock()
	slot := ss.approvals[req.ID]
	if d, ok := ss.preDecisions[req.ID]; ok {
		delete(ss.preDecisions, req.ID)
		if slot != nil {
			slot.decided = true
		}
		ss.mu.Unlock()
		return d, nil
	}
	ss.mu.Unlock()
	switch ss.policy {
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_DENY:
		ss.closeSlot(slot, "the run's approval policy denied it")
		return runtime.Decision{Outcome: runtime.OutcomeDenied, DecidedBy: runtime.DecidedByPolicy, Reason: "the run's approval policy denies calls that need an approval"}, nil
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE:
		if req.AutoApprovable {
			ss.closeSlot(slot, "the run's approval policy approved it")
			return runtime.Decision{Outcome: runtime.OutcomeApproved, DecidedBy: runtime.DecidedByPolicy}, nil
		}
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT:
		ss.closeSlot(slot, "the run parked; resume it with the continuation and this decision")
		return runtime.Decision{}, runtime.ErrInterrupt
	}
	if ss.mode != modeRun || slot == nil {
		ss.closeSlot(slot, "the run parked; resume it with the continuation and this decision")
		return runtime.Decision{}, runtime.ErrInterrupt
	}
	select {
	case d := <-slot.ch:
		return d, nil
	case <-ctx.Done():
	case <-ss.inputDoneCh:
	}
	// The wait ended; a decision may have been acked just before.
	ss.mu.Lock()
	defer ss.mu.Unlock()
	select {
	case d := <-slot.ch:
		return d, nil
	default:
	}
	slot.closed = ss.waitEnded(ctx, "it expired")
	if err := ctx.Err(); err != nil {
		return runtime.Decision{}, err
	}
	// A client that went away (its RPC cancelled, its connection closed) also ends the
	// input, but it cancels the run: only a half-close parks it.
	if err := ss.ctx.Err(); err != nil {
		return runtime.Decision{}, err
	}
	return runtime.Decision{}, runtime.ErrInterrupt // the client left: park
}

// compiledTool is a tool that carries its compiled schema (runtime.SchemaTool), so that
// the runtime does not compile a client tool's schema a second time.
type compiledTool struct {
	runtime.Tool
	schema *runtime.Schema
}

func (t compiledTool) Schema() *runtime.Schema { return t.schema }

// clientTool is the runtime tool behind a tool the client runs: Execute waits for the
// client's tool_result, or parks the run when the client cannot answer. However it
// returns, the call takes no result afterwards: one acked is one used.
func (ss *session) clientTool(spec runtime.ToolSpec, schema *runtime.Schema) runtime.Tool {
	return compiledTool{schema: schema, Tool: runtime.NewTool(spec, func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
		ss.mu.Lock()
		if out, ok := ss.preResults[call.ID]; ok {
			delete(ss.preResults, call.ID)
			ss.mu.Unlock()
			return out, nil
		}
		slot := ss.clientCalls[call.ID]
		ss.mu.Unlock()
		if ss.mode != modeRun || slot == nil {
			if slot != nil {
				ss.mu.Lock()
				slot.closed = "the run parked; resume it with the continuation and this result"
				ss.mu.Unlock()
			}
			return runtime.Output{}, runtime.ErrInterrupt
		}
		select {
		case out := <-slot.ch:
			return out, nil
		case <-ctx.Done():
		case <-ss.inputDoneCh:
		}
		// The wait ended; a result may have been acked just before.
		ss.mu.Lock()
		defer ss.mu.Unlock()
		select {
		case out := <-slot.ch:
			return out, nil
		default:
		}
		slot.closed = ss.waitEnded(ctx, "it timed out")
		if err := ctx.Err(); err != nil {
			return runtime.Output{}, err
		}
		if err := ss.ctx.Err(); err != nil {
			return runtime.Output{}, err // the client went away: see approve
		}
		return runtime.Output{}, runtime.ErrInterrupt
	})}
}

// keepAlive sends a heartbeat after each interval of silence, and go_away when the server
// starts draining, until the returned stop is called; it also ends the run of a client
// that read nothing for the stall timeout. It holds no goroutine while idle: a parked run
// costs what its state costs, not a goroutine's stack.
func (ss *session) keepAlive() (stop func()) {
	interval := ss.srv.cfg.HeartbeatInterval
	stallCheck := ss.srv.cfg.StallTimeout / 4
	stopped := false
	var t *time.Timer
	beat := func() {
		if ss.out.stalledFor() >= ss.srv.cfg.StallTimeout {
			ss.stall()
			return
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if stopped || ss.ended {
			return
		}
		silent := ss.srv.now().Sub(ss.lastSent)
		if silent >= interval {
			// Behind events the client has not read yet, a heartbeat says nothing.
			if !ss.out.pending() {
				ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_Heartbeat{Heartbeat: &agentdv1.Heartbeat{LastSeq: ss.seq}}}, false)
			}
			silent = 0
		}
		t.Reset(min(interval-silent, stallCheck))
	}
	ss.mu.Lock()
	t = time.AfterFunc(min(interval, stallCheck), beat)
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

// stall ends the run of a client that has read nothing for the stall timeout: what is
// queued for it is dropped, and the run ends FAILED (CLIENT_STALLED) with its transcript,
// which the RPC's status carries.
func (ss *session) stall() {
	ss.srv.log.Warn("the client read nothing for the stall timeout: ending its run", "run_id", ss.runID, "stall_timeout", ss.srv.cfg.StallTimeout.String())
	ss.out.abandon()
	ss.cancel(errClientStalled)
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
	case *runtime.ApprovalResolved:
		// However the run resolved it (an interrupting steer cancels approvals it never
		// asked the client about), the approval takes no decision from now on.
		ss.mu.Lock()
		if slot := ss.approvals[e.ApprovalID]; slot != nil && !slot.decided && slot.closed == "" {
			slot.closed = resolvedWhy(e)
		}
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
	if fin.Reason == runtime.EndCancelled && errors.Is(fin.Err, errClientStalled) {
		rf.Reason = agentdv1.RunEndReason_RUN_END_REASON_FAILED
		rf.Error = stalledError(ss.srv.cfg.StallTimeout)
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

// executeStreaming runs the session with heartbeats and go_away, and returns the status
// the RPC ends with once every event went out. A client that reads nothing for the stall
// timeout, during the run or after it, is let go: the RPC ends RESOURCE_EXHAUSTED
// (CLIENT_STALLED) with the run's outcome, transcript included, as a status detail.
func (ss *session) executeStreaming(req *runtime.Request) error {
	stop := ss.keepAlive()
	defer stop() // a panic in the run too: the timer must not re-arm for ever
	flushed := false
	defer func() {
		if !flushed {
			ss.out.abandon() // a panic: the sender goroutine ends now
		}
	}()
	rf, err := ss.execute(req)
	stop()
	flushed = true
	if !ss.out.flush(ss.srv.cfg.StallTimeout) && err == nil {
		if sendErr := ss.out.failed(); sendErr != nil {
			return sendStatus(sendErr)
		}
		re := stalledError(ss.srv.cfg.StallTimeout)
		return statusError(codes.ResourceExhausted, re.GetReason(), re.GetMessage(), nil, rf)
	}
	if err != nil {
		return err
	}
	return runStatus(rf.GetError())
}

// stalledError is the RunError of a run whose client read nothing for the stall timeout.
func stalledError(stall time.Duration) *agentdv1.RunError {
	return &agentdv1.RunError{
		Code:    int32(codes.ResourceExhausted),
		Reason:  reasonClientStalled,
		Message: protoString(fmt.Sprintf("the client read nothing for %s while events waited for it, so the run ended; its outcome and transcript are in the status details", stall)),
	}
}

// sendStatus is the status of an RPC whose stream broke.
func sendStatus(err error) error {
	return statusError(codes.Unavailable, reasonStreamBroken, "sending to the client failed: "+err.Error(), nil)
}
