package runs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

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

// receive reads a Run stream's client messages until the stream ends; o is the stream's
// outbox, and starter says whether the stream started the run. It is not joined: it
// ends when the RPC does. The end of the stream that started the run may end the input
// (a half-close: what then needs the client parks the run) or the run (a client gone,
// under ON_DISCONNECT_CANCEL); an attached stream's end changes nothing for the run.
//
// The stream counts as an answerer (addAnswerer) from before receive starts, which its
// caller does, so that the run never parks for want of it; receive uncounts it when it
// ends.
func (ss *session) receive(recv func() (*agentdv1.RunRequest, error), o *journal.Outbox, starter bool) {
	defer ss.dropAnswerer()
	lim := rate.NewLimiter(rate.Limit(ss.srv.cfg.MessageRate), ss.srv.cfg.MessageBurst)
	for {
		// Acks queue like events: while the client reads nothing, read nothing from it
		// either, so that flow control, not agentd's memory, holds what it sends.
		ctx, cancel := ss.runCtx()
		if o.Wait(ctx) != nil {
			if starter && !ss.detach {
				ss.closeInput()
			}
			return
		}
		req, err := recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				ss.srv.log.Debug("receive ended", "run_id", ss.runID, "error", err)
			}
			if !starter {
				return
			}
			if errors.Is(err, ErrClientGone) {
				if ss.detach {
					return // the run goes on, and waits for whoever attaches
				}
				// The client went away (its RPC cancelled, its connection closed): that
				// cancels the run, before the input ends, so that what waits for the
				// client does not park it as it would after a half-close. The RPC's own
				// context may be seen done a moment after Recv fails.
				cancel(err)
			}
			ss.closeInput()
			return
		}
		if ss.srv.gated && wakes(req) {
			// What a run acts on is kept before it is acted on, so that a replica taking
			// the run up after its ack was journaled acts on it too (ackedBefore).
			ss.srv.keepStreamInput(ss.runID, o.ID, req)
		}
		if !ss.handle(req, lim, o.ID) {
			// Over the stream's message rate: read nothing more until the bucket has a
			// token again, so that a client flooding the stream is held back by flow
			// control instead of being served at the flood's pace.
			r := lim.Reserve()
			wait := r.Delay()
			r.Cancel() // the token is the next message's to take
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}

// ErrClientGone is what the receive of a Run stream whose client went away (its RPC
// cancelled, its connection closed, its deadline passed) returns, wrapping the
// receive's own error (clientRecv).
var ErrClientGone = errors.New("the client went away")

// StreamInputPrefix begins the keys under which the inputs of Run streams are kept:
// SendRunInput refuses client keys that begin with it.
const StreamInputPrefix = "~"

// streamInputKey is the key a Run stream's input is kept under: its stream's
// attachment_id (empty for the stream that started the run) and its client_seq, which
// its ack names.
func streamInputKey(attachment string, seq int64) string {
	return StreamInputPrefix + attachment + "/" + strconv.FormatInt(seq, 10)
}

// streamAnswer is the answer a Run stream's input is kept with: its ack is in the
// journal, and nobody asks for it by its key; kept answered, no replica's look for
// inputs to act on takes it.
var streamAnswer = func() []byte {
	b, _ := proto.Marshal(&continuationv1.InputAnswer{Message: "the input came on a Run stream: its ack is in the run's journal"})
	return b
}()

// keepStreamInput keeps a Run stream's input in the store before the run acts on it,
// so that a replica taking the run up after its ack was journaled acts on it too. A
// store that fails leaves it unkept: the run acts on it all the same.
func (s *Manager) keepStreamInput(runID, attachment string, req *agentdv1.RunRequest) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err == nil {
		digest := sha256.Sum256(b)
		ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
		_, _, err = s.store.PutInput(ctx, store.Input{RunID: runID, Key: streamInputKey(attachment, req.GetClientSeq()), Digest: digest[:], Request: b, Answer: streamAnswer})
		cancel()
	}
	if err != nil {
		s.log.Warn("keeping a Run stream's input failed: were this process lost once it is acked, the replica taking the run up would not act on it", "run_id", runID, "error", err)
	}
}

// wakes reports whether a client message wakes a parked run: what the run waits for, or
// what changes it.
func wakes(req *agentdv1.RunRequest) bool {
	switch req.GetKind().(type) {
	case *agentdv1.RunRequest_ApprovalDecision, *agentdv1.RunRequest_ToolResult, *agentdv1.RunRequest_Steer, *agentdv1.RunRequest_Cancel:
		return true
	}
	return false
}

// handle acts on one client message of a Run stream after its first. It returns false
// when the message was refused for the stream's message rate, lim.
func (ss *session) handle(req *agentdv1.RunRequest, lim *rate.Limiter, stream string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.phase == phaseEnded {
		return true // run_finished is out: the stream carries nothing more
	}
	if wakes(req) {
		ss.readyLocked()
		if ss.phase == phaseEnded {
			return true
		}
	}
	in := input{seq: req.GetClientSeq(), stream: stream}
	_, cancel := req.GetKind().(*agentdv1.RunRequest_Cancel)
	if !(cancel && !ss.clientCancelled) && !lim.Allow() {
		// A client's first cancel is never refused: it ends the run, and the flood.
		ss.ackLocked(in, ackError(reasonRateLimited, "too many messages on this stream: at most %g a second (burst %d)", float64(lim.Limit()), lim.Burst()))
		return false
	}
	if re := ss.srv.check(req); re != nil {
		// The wire's refusal of what it could not take as sent: the run goes on.
		ss.ackLocked(in, re)
		return true
	}
	if ss.actLocked(in, req) {
		return true
	}
	switch req.GetKind().(type) {
	case *agentdv1.RunRequest_Start:
		ss.ackLocked(in, ackError(reasonAlreadyStarted, "the run has already started: one run per stream"))
	case *agentdv1.RunRequest_Attach:
		ss.ackLocked(in, ackError(reasonAlreadyAttached, "the stream already carries a run: one run per stream"))
	case *agentdv1.RunRequest_Ping:
		ss.ackLocked(in, nil)
	default:
		ss.ackLocked(in, ackError(reasonEmptyMessage, "the message has no kind: set one of approval_decision, steer, tool_result, cancel or ping"))
	}
	return true
}

// actLocked acts on what a Run stream and SendRunInput both bring: a decision, a steer,
// a client tool's result, a cancel. It reports false for any other kind.
func (ss *session) actLocked(in input, req *agentdv1.RunRequest) bool {
	switch k := req.GetKind().(type) {
	case *agentdv1.RunRequest_ApprovalDecision:
		ss.decideLocked(in, k.ApprovalDecision)
	case *agentdv1.RunRequest_Steer:
		ss.steerLocked(in, k.Steer)
	case *agentdv1.RunRequest_ToolResult:
		ss.toolResultLocked(in, k.ToolResult)
	case *agentdv1.RunRequest_Cancel:
		ss.cancelLocked(in, k.Cancel)
	default:
		return false
	}
	return true
}

// cancelLocked acts on a client's cancel: the run ends CANCELLED.
func (ss *session) cancelLocked(in input, c *agentdv1.Cancel) {
	if refusal := ss.endingLocked(); refusal != nil {
		ss.ackLocked(in, refusal)
		return
	}
	ss.ackLocked(in, nil)
	ss.clientCancelled = true
	if reason := c.GetReason(); reason == "" {
		ss.cancel(errClientCancel)
	} else {
		ss.cancel(fmt.Errorf("%w: %s", errClientCancel, reason))
	}
}

// decideLocked acts on a decision with mu held, which it releases while edited
// arguments are validated (decide).
func (ss *session) decideLocked(in input, d *agentdv1.ApprovalDecision) {
	ss.mu.Unlock()
	defer ss.mu.Lock()
	ss.decide(in, d)
}

// endingLocked refuses input once the run's context is done: whatever the message asks,
// the run will not act on it any more.
func (ss *session) endingLocked() *agentdv1.RunError {
	if ss.ctx.Err() == nil {
		return nil
	}
	if ss.phase == phaseParked {
		// readyLocked could not wake it: the run is parked, not ending.
		return ackError(reasonWakeFailed, "the run is parked and could not be taken up again to act on this (%v): send it again (from SendRunInput, under a new client_key)", ss.wakeErr)
	}
	why := "it is ending"
	switch cause := context.Cause(ss.ctx); {
	case errors.Is(cause, errClientCancel):
		why = "it was cancelled"
	case errors.Is(cause, runtime.ErrShutdown):
		why = "the server is shutting down; resume it from its continuation on another replica"
	case errors.Is(cause, journal.ErrClientStalled):
		why = "its client read nothing for too long"
	}
	return ackError(reasonRunEnding, "the run cannot act on this any more: %s", why)
}

// runTools are the tools of a run, by name, for checking the arguments a decision edits:
// every tool's spec, and the schemas compiled so far. The client tools' schemas are
// compiled at the start; an agent tool's is compiled when first needed, and kept: every
// stream attached to the run, and SendRunInput, may decide at once, so compiled is
// guarded by its lock.
type runTools struct {
	specs   map[string]runtime.ToolSpec
	schemas map[string]*runtime.Schema // the client tools', read-only once planned
	agent   *compiledSchemas           // the agent tools' compiled so far
}

// compiledSchemas are schemas compiled as decisions need them.
type compiledSchemas struct {
	mu sync.Mutex
	m  map[string]*runtime.Schema
}

// schema returns the compiled schema of tool.
func (t runTools) schema(tool string) (*runtime.Schema, error) {
	if s := t.schemas[tool]; s != nil {
		return s, nil
	}
	t.agent.mu.Lock()
	defer t.agent.mu.Unlock()
	if s := t.agent.m[tool]; s != nil {
		return s, nil
	}
	s, err := runtime.CompileSchema(t.specs[tool].Parameters)
	if err != nil {
		return nil, err
	}
	t.agent.m[tool] = s
	return s, nil
}

// decision turns a client's approval decision into the runtime's, checking it against
// the call: outcome, editability and the tool's schema. It validates edited arguments,
// which may take a while, so it is called without mu held; ctx bounds the validation.
func (t runTools) decision(ctx context.Context, d *agentdv1.ApprovalDecision, tool, args string) (runtime.Decision, *agentdv1.RunError) {
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
	edited, err := wire.ValueToJSON(d.GetEditedArguments())
	if err != nil {
		return rd, ackError(reasonInvalidEditedArgs, "edited_arguments: %v", err)
	}
	schema, err := t.schema(tool)
	if err != nil {
		return rd, ackError(reasonInvalidEditedArgs, "tool %s has no usable schema: %v", tool, err)
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
// arguments are validated outside the lock, then the approval is checked again. A
// decision on an approval of a run below ss goes to that run, and is acked here.
func (ss *session) decide(in input, d *agentdv1.ApprovalDecision) {
	ss.mu.Lock()
	if ss.approvals[d.GetApprovalId()] == nil {
		if c := ss.belowLocked(d.GetApprovalId(), ""); c != nil {
			ss.mu.Unlock()
			c.decideFor(ss, in, d)
			return
		}
	}
	ss.mu.Unlock()
	ss.decideFor(ss, in, d)
}

// decideFor acts on a decision for ss, which acker, ss or its tree's root, acks in its
// journal: the client sent it there.
func (ss *session) decideFor(acker *session, in input, d *agentdv1.ApprovalDecision) {
	ss.mu.Lock()
	slot := ss.approvals[d.GetApprovalId()]
	refusal := ss.approvalRefusalLocked(slot, d.GetApprovalId())
	if refusal != nil {
		ss.ackToLocked(acker, in, refusal)
		ss.mu.Unlock()
		return
	}
	tool, args, tools, ctx := slot.tool, slot.args, ss.tools, ss.ctx
	ss.mu.Unlock()
	rd, refusal := tools.decision(ctx, d, tool, args)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.phase == phaseEnded {
		return
	}
	// The run may have parked while the arguments were validated: it wakes, with the
	// approval's slot anew.
	ss.readyLocked()
	if ss.phase == phaseEnded {
		return
	}
	slot = ss.approvals[d.GetApprovalId()]
	// The approval may have closed, or the run begun to end, while the arguments were
	// validated: that, not the validation it cut short, is the answer.
	if closed := ss.approvalRefusalLocked(slot, d.GetApprovalId()); closed != nil {
		refusal = closed
	}
	scope := d.GetScope()
	if refusal == nil && scope > agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE {
		refusal = ss.scopeRefusalLocked(slot, scope, rd)
	}
	if refusal != nil {
		ss.ackToLocked(acker, in, refusal)
		return
	}
	ss.ackToLocked(acker, in, nil)
	if scope > agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE {
		args := cmp.Or(rd.EditedArguments, slot.args)
		_, any := ss.allowedScopes(slot.tool, true)
		if g := ss.grantLocked(d.GetApprovalId(), slot.tool, args, scope, any); g != nil {
			// Stored before the run goes on with the decision: the thread's next calls
			// find it.
			ss.mu.Unlock()
			ss.keepGrant(g)
			ss.mu.Lock()
			if slot.answered || slot.closed != "" {
				return
			}
		}
	} else {
		ss.noteLocked(d.GetApprovalId(), "", agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE)
	}
	slot.answerLocked(rd)
}

// scopeRefusalLocked refuses a decision whose scope the request did not allow.
func (ss *session) scopeRefusalLocked(slot *answerSlot[runtime.Decision], scope agentdv1.ApprovalScope, rd runtime.Decision) *agentdv1.RunError {
	if rd.Outcome != runtime.OutcomeApproved {
		return ackError(reasonScopeNotAllowed, "a scope goes with APPROVAL_OUTCOME_APPROVED only")
	}
	var allowed []agentdv1.ApprovalScope
	if slot.event != nil {
		allowed = slot.event.GetAllowedScopes()
	}
	if !slices.Contains(allowed, scope) {
		return ackError(reasonScopeNotAllowed, "scope %s is not among this approval's allowed_scopes %v: the agent's policy allows no wider approval of %s", scope, allowed, slot.tool)
	}
	return nil
}

// approvalRefusalLocked says why approval id takes no decision, or nil when it does. A
// run that is ending says so first, whatever became of the approval on the way.
func (ss *session) approvalRefusalLocked(slot *answerSlot[runtime.Decision], id string) *agentdv1.RunError {
	if refusal := ss.endingLocked(); refusal != nil {
		return refusal
	}
	switch {
	case slot == nil:
		return ackError(reasonUnknownApproval, "no approval %q is open in this run", id)
	case slot.answered:
		return ackError(reasonAlreadyDecided, "approval %q was already decided", id)
	case slot.closed != "":
		return ackError(reasonApprovalClosed, "approval %q is no longer open: %s", id, slot.closed)
	}
	return nil
}

// steerLocked sends a client's steer to the run's inbox, within the steer rate; the inbox
// bounds what waits, and interrupts the step for an interrupting steer. The ack goes out
// under mu, before any event the steer causes.
func (ss *session) steerLocked(in input, st *agentdv1.Steer) {
	if id := st.GetRunId(); id != "" && id != ss.runID {
		c := ss.belowLocked("", id)
		if c == nil {
			ss.ackLocked(in, ackError(reasonInvalidSteer, "run_id: no run %q below this one is going on", id))
			return
		}
		// The child's lock first, then this one's, for the ack.
		ss.mu.Unlock()
		defer ss.mu.Lock()
		c.mu.Lock()
		defer c.mu.Unlock()
		c.steerToLocked(ss, in, st)
		return
	}
	ss.steerToLocked(ss, in, st)
}

// steerToLocked queues a steer for ss, which acker, ss or its tree's root, acks.
func (ss *session) steerToLocked(acker *session, in input, st *agentdv1.Steer) {
	if refusal := ss.endingLocked(); refusal != nil {
		ss.ackToLocked(acker, in, refusal)
		return
	}
	var m runtime.Message
	switch {
	case st.GetMessage() != nil && st.GetText() != "":
		ss.ackToLocked(acker, in, ackError(reasonInvalidSteer, "set message or text, not both"))
		return
	case st.GetMessage() != nil:
		pm := st.GetMessage()
		if pm.GetRole() == agentdv1.Role_ROLE_UNSPECIFIED {
			pm = &agentdv1.Message{Id: pm.GetId(), Role: agentdv1.Role_ROLE_USER, Parts: pm.GetParts()}
		}
		var fe wire.FieldErrors
		m = steerMessage(pm, &fe)
		if len(fe) > 0 {
			ss.ackToLocked(acker, in, ackError(reasonInvalidSteer, "%s", fe.Summary()))
			return
		}
	case st.GetText() != "":
		m = runtime.UserMessage(st.GetText())
	default:
		ss.ackToLocked(acker, in, ackError(reasonInvalidSteer, "a steer needs a message or a text"))
		return
	}
	// A token is spent only on a steer the inbox takes: one it refuses costs none. A
	// steer acted on again, as a run is taken up, was counted when it came.
	res := ss.steerLimit.Reserve()
	if in.replay == nil && (!res.OK() || res.Delay() > 0) {
		res.Cancel()
		ss.ackToLocked(acker, in, ackError(reasonSteerRateLimited, "too many steers: at most %g a second (burst %d)", float64(ss.steerLimit.Limit()), ss.steerLimit.Burst()))
		return
	}
	interrupt := st.GetMode() == agentdv1.SteerMode_STEER_MODE_INTERRUPT
	steer := runtime.Steer{Seq: in.seq, Message: m, Interrupt: interrupt}
	if err := ss.inbox.Send(steer); err != nil {
		res.Cancel()
		if in.replay != nil {
			ss.srv.log.Warn("a steer the run acked before it was taken up could not be queued again", "run_id", ss.runID, "error", err)
		}
		ss.ackToLocked(acker, in, steerRefusal(err))
		return
	}
	ss.steers = append(ss.steers, steer)
	ss.ackToLocked(acker, in, nil)
}

// ackToLocked acks in, an input for ss, in acker's journal: ss's own, or its tree's
// root's, where the client sent it. Called with ss's mu held: a root's lock is taken
// under its child's, never the other way.
func (ss *session) ackToLocked(acker *session, in input, refusal *agentdv1.RunError) {
	if acker == ss {
		ss.ackLocked(in, refusal)
		return
	}
	acker.mu.Lock()
	defer acker.mu.Unlock()
	acker.ackLocked(in, refusal)
}

// steerRefusal says why the run's inbox refused a steer.
func steerRefusal(err error) *agentdv1.RunError {
	if full, ok := errors.AsType[*runtime.InboxFullError](err); ok {
		if full.Limit == runtime.LimitSteers {
			return ackError(reasonSteerQueueFull, "%d steers already wait to be applied, as many as this server holds for a run: send this one once steer_applied reports them", full.Want-1)
		}
		return ackError(reasonSteerQueueFull, "the steers waiting to be applied would hold %d bytes, more than the %d this server holds for a run: send this one once steer_applied reports them", full.Want, full.Max)
	}
	return ackError(reasonRunEnding, "the run is ending and takes no more steers: start a new run with this input")
}

// steerMessage converts a steer's message, which must be what a start's new input may
// be: a user message of text and media.
func steerMessage(pm *agentdv1.Message, fe *wire.FieldErrors) runtime.Message {
	m := wire.MessageFromProto(pm, "steer.message", fe)
	if m.Role != runtime.RoleUser {
		fe.Add("steer.message.role", "a steer is a user message")
	}
	for j, p := range m.Parts {
		if p.Kind != runtime.PartText && p.Kind != runtime.PartMedia {
			fe.Add(fmt.Sprintf("steer.message.parts[%d]", j), "a steer holds text and media; %s parts come from the model and tools, never from a steer", partKindName(p.Kind))
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

// toolResultLocked hands a client tool's result to the call that waits for it.
func (ss *session) toolResultLocked(in input, tr *agentdv1.ToolResult) {
	slot := ss.clientCalls[tr.GetToolCallId()]
	if refusal := ss.toolResultRefusalLocked(slot, tr.GetToolCallId()); refusal != nil {
		ss.ackLocked(in, refusal)
		return
	}
	out, err := wire.OutputFromProto(tr.GetText(), tr.GetJson(), tr.GetIsError(), tr.GetMedia())
	if err != nil {
		ss.ackLocked(in, ackError(reasonInvalidToolResult, "json: %v", err))
		return
	}
	ss.ackLocked(in, nil)
	slot.answerLocked(out)
}

// toolResultRefusalLocked says why client tool call id takes no result, or nil when it
// does. A run that is ending says so first.
func (ss *session) toolResultRefusalLocked(slot *answerSlot[runtime.Output], id string) *agentdv1.RunError {
	if refusal := ss.endingLocked(); refusal != nil {
		return refusal
	}
	switch {
	case slot == nil || slot.answered:
		return ackError(reasonUnknownToolCall, "no client tool call %q is waiting for a result", id)
	case slot.closed != "":
		return ackError(reasonToolCallClosed, "client tool call %q no longer waits for a result: %s", id, slot.closed)
	}
	return nil
}
