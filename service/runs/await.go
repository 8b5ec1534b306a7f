package runs

import (
	"cmp"
	"context"
	"errors"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// answerSlot is an answer the run awaits from the client: the decision on an approval
// (T is runtime.Decision) or the result of a client tool call (runtime.Output). An
// answer is accepted only while the run still waits for it: closed says why it no
// longer does. Its fields are guarded by session.mu.
type answerSlot[T any] struct {
	// tool and args are an approval's call, which edited arguments are checked against.
	tool, args string
	answered   bool   // an answer was acked: it is in ch, or was taken
	closed     string // why the slot takes no answer; empty while it does
	ch         chan T // buffered: the waiting call takes the answer after its ack went out
	// order is the slot's place among the session's slots of its kind, in the order
	// the run opened them; event is an approval's approval_requested, for attached.
	order int
	event *agentdv1.ApprovalRequested
}

func newAnswerSlot[T any](tool, args string, order int) *answerSlot[T] {
	return &answerSlot[T]{tool: tool, args: args, ch: make(chan T, 1), order: order}
}

// answerLocked hands v, just acked, to the call that waits for it.
func (s *answerSlot[T]) answerLocked(v T) {
	s.answered = true
	s.ch <- v
}

// closeLocked records why s takes no answer from now on, unless it was answered or
// closed already. A nil s is a call nobody could answer.
func (s *answerSlot[T]) closeLocked(why string) {
	if s != nil && s.closed == "" && !s.answered {
		s.closed = why
	}
}

// awaiting says what await waits for.
type awaiting[T any] struct {
	id        string                    // the approval's id, or the call's
	slots     map[string]*answerSlot[T] // the session's slots of this kind
	preloaded map[string]T              // the answers a resume carried
	// policy, when set, answers without the client (the run's approval policy).
	policy *policyAnswer[T]
	// parked is what the slot says when the run parks rather than wait; expired, when
	// the wait's own deadline passes.
	parked, expired string
}

// policyAnswer is how the run's policy answers a call: with v, or with err; why is
// what the call's slot says of it from then on.
type policyAnswer[T any] struct {
	v   T
	err error
	why string
}

// await answers the call w.id for the run: from what a resume carried, from the run's
// policy, or from the client, whose answer it waits for. The run parks (ErrInterrupt)
// when nobody can answer: on an RPC that takes no input, or once the client has
// half-closed, it ends AWAITING_INPUT with a continuation; a run whose client went away
// parks in the store (park.go), at once with no Run stream attached to answer, after
// ParkAfter with one. However await returns, the slot takes no answer afterwards: one
// acked is one applied.
func await[T any](ctx context.Context, ss *session, w awaiting[T]) (T, error) {
	var zero T
	ss.mu.Lock()
	slot := w.slots[w.id]
	if v, ok := w.preloaded[w.id]; ok {
		delete(w.preloaded, w.id)
		if slot != nil {
			slot.answered = true
		}
		ss.mu.Unlock()
		return v, nil
	}
	// An answer the client sent, and was told was accepted, before the run asked (the
	// run announces a step's approvals before it asks for any of them) is applied
	// whatever the policy: one acked is one applied.
	if slot != nil && slot.answered {
		select {
		case v := <-slot.ch:
			ss.mu.Unlock()
			return v, nil
		default:
		}
	}
	switch {
	case w.policy != nil:
		slot.closeLocked(w.policy.why)
		ss.mu.Unlock()
		return w.policy.v, w.policy.err
	case !ss.answerableLocked() || slot == nil:
		slot.closeLocked(w.parked)
		ss.mu.Unlock()
		return zero, runtime.ErrInterrupt
	case ctx.Err() != nil:
		// Expired already (a woken run's approval past its first expiry): no wait.
	case ss.phase == phaseParking || ss.canParkLocked():
		// Nobody attached can answer: the run parks in the store (park.go), and the
		// slot comes back when it wakes.
		ss.startParkingLocked()
		ss.mu.Unlock()
		return zero, runtime.ErrInterrupt
	}
	nobody, inputDone := ss.nobody, ss.inputDoneCh
	var rootNobody chan struct{}
	if root := ss.tree; root != nil {
		// The root's clients are the child's: the last of them gone, the tree parks.
		inputDone = root.inputDoneCh
		root.mu.Lock()
		rootNobody = root.nobody
		root.mu.Unlock()
	}
	// A stream that can answer is attached: the run waits for it, and parks after
	// ParkAfter all the same, so that a person's hours of thought cost no goroutine.
	var parkAfter <-chan time.Time
	if ss.canParkAttachedLocked() {
		t := time.NewTimer(ss.srv.cfg.ParkAfter)
		defer t.Stop()
		parkAfter = t.C
	}
	ss.mu.Unlock()
	parkNow := false
	select {
	case v := <-slot.ch:
		return v, nil
	case <-ctx.Done():
	case <-inputDone:
	case <-nobody: // the last stream that could answer went away
	case <-rootNobody:
	case <-parkAfter:
		parkNow = true
	}
	// The wait ended; an answer may have been acked just before, and is then applied.
	ss.mu.Lock()
	defer ss.mu.Unlock()
	select {
	case v := <-slot.ch:
		return v, nil
	default:
	}
	if ctx.Err() == nil && ss.ctx.Err() == nil && (ss.canParkLocked() || (parkNow && ss.canParkAttachedLocked())) {
		ss.startParkingLocked()
		return zero, runtime.ErrInterrupt
	}
	slot.closed = ss.waitEnded(ctx, w.expired)
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	// A client that went away (its RPC cancelled, its connection closed) also ends the
	// input, but it cancels the run: only a half-close parks it.
	if err := ss.ctx.Err(); err != nil {
		return zero, err
	}
	return zero, runtime.ErrInterrupt // the client half-closed: park
}

// answerableLocked reports whether a client may answer the run while it waits: a Run
// stream's run, or a child of one, whose root's Run streams answer it (and any Run
// stream attached to the child itself).
func (ss *session) answerableLocked() bool {
	return ss.mode == ModeRun || (ss.tree != nil && ss.tree.mode == ModeRun)
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

// approve is Request.Approve: it answers from the decisions a resume carried, applies
// the run's approval policy, or waits for the client (await).
func (ss *session) approve(ctx context.Context, req runtime.ApprovalRequest) (runtime.Decision, error) {
	const parked = "the run parked; resume it with the continuation and this decision"
	var policy *policyAnswer[runtime.Decision]
	switch ss.policy {
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_DENY:
		policy = &policyAnswer[runtime.Decision]{
			v:   runtime.Decision{Outcome: runtime.OutcomeDenied, DecidedBy: runtime.DecidedByPolicy, Reason: "the run's approval policy denies calls that need an approval"},
			why: "the run's approval policy denied it",
		}
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE:
		if req.AutoApprovable {
			policy = &policyAnswer[runtime.Decision]{
				v:   runtime.Decision{Outcome: runtime.OutcomeApproved, DecidedBy: runtime.DecidedByPolicy},
				why: "the run's approval policy approved it",
			}
		}
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT:
		policy = &policyAnswer[runtime.Decision]{err: runtime.ErrInterrupt, why: parked}
	}
	if d, ok := ss.grantDecision(ctx, req); ok {
		return d, nil // the run's policy (AUTO_DENY, AUTO_APPROVE) goes first: see grantDecision
	}
	ss.mu.Lock()
	pre, scope := ss.preDecisions[req.ID], ss.preScopes[req.ID]
	var g *agentdv1.Grant
	if scope > agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE && pre.Outcome == runtime.OutcomeApproved {
		// A resume's decision of a wider scope makes its grant as the call is approved.
		_, any := ss.allowedScopes(req.Call.Name, true)
		g = ss.grantLocked(req.ID, req.Call.Name, cmp.Or(pre.EditedArguments, req.Call.Arguments), scope, any)
	}
	ss.mu.Unlock()
	if g != nil {
		ss.keepGrant(g)
	}
	ss.mu.Lock()
	due, ok := ss.approvalDue[req.ID]
	ss.mu.Unlock()
	if ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, due)
		defer cancel()
	}
	return await(ctx, ss, awaiting[runtime.Decision]{
		id: req.ID, slots: ss.approvals, preloaded: ss.preDecisions,
		policy: policy, parked: parked, expired: "it expired",
	})
}

// compiledTool is a tool that carries its compiled schema (runtime.SchemaTool), so that
// the runtime does not compile a client tool's schema a second time.
type compiledTool struct {
	runtime.Tool
	schema *runtime.Schema
}

func (t compiledTool) Schema() *runtime.Schema { return t.schema }

// clientTool is the runtime tool behind a tool the client runs: Execute answers from
// the results a resume carried, or waits for the client's tool_result (await).
func (ss *session) clientTool(spec runtime.ToolSpec, schema *runtime.Schema) runtime.Tool {
	return compiledTool{schema: schema, Tool: runtime.NewTool(spec, func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
		return await(ctx, ss, awaiting[runtime.Output]{
			id: call.ID, slots: ss.clientCalls, preloaded: ss.preResults,
			parked: "the run parked; resume it with the continuation and this result", expired: "it timed out",
		})
	})}
}
