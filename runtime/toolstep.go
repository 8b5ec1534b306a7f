package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// pcall is one tool call of a step on its way through preparation, approval and execution.
type pcall struct {
	PendingCall
	entry          *toolEntry // nil for an unknown tool
	autoApprovable bool
	executed       bool      // Result came from running the tool
	cancelled      bool      // did not run because the step or the run ended
	cancelledFrom  CallState // the state it was cancelled in
	reported       bool      // its terminal event went out
	parked         bool      // waits for the client (approval or client tool result)
	duration       time.Duration
}

func (c *pcall) resolve(out Output) {
	c.State = CallDone
	c.Result = out
}

// syncArguments writes the arguments the calls run with into their assistant message,
// whose parts the transcript shares.
func syncArguments(msg Message, pcs []*pcall) {
	i := 0
	for j := range msg.Parts {
		if msg.Parts[j].Kind == PartToolCall && i < len(pcs) {
			msg.Parts[j].ToolCall.Arguments = pcs[i].Call.Arguments
			i++
		}
	}
}

// toolStep runs steps 7 to 11 of the loop for the calls of one assistant message. With
// resumed set the calls come from a parked step: those without a result are prepared
// again (see Request.Resume).
func (r *run) toolStep(stepCtx context.Context, stepID string, reason FinishReason, stepMsgs []Message, msg Message, pcs []*pcall, resumed bool) (done bool) {
	// 7. Prepare: arguments, BeforeTool hooks, policy.
	for _, c := range pcs {
		if c.State == CallDone {
			continue // a resumed call whose result came before the run parked
		}
		if stop := r.prepare(c, resumed); stop != nil {
			return r.stopStep(stepID, reason, stepMsgs, pcs, stop)
		}
		if r.gone {
			return true
		}
	}
	// Approvals: every request goes out before the first wait.
	if !r.approve(stepCtx, pcs) {
		return true
	}
	// The transcript records the arguments calls run with (hook rewrites, edits).
	syncArguments(msg, pcs)
	if r.ctx.Err() != nil {
		return r.endToolStep(stepID, reason, stepMsgs, msg, pcs)
	}
	for _, c := range pcs {
		if c.parked {
			// Nothing runs until every decision is in, so calls run in call order.
			return r.park(stepID, msg, pcs)
		}
	}
	// Guardrails that check a call once it is approved, before it runs.
	for _, c := range pcs {
		if c.State == CallReady {
			if stop := r.checkToolInput(c, true); stop != nil {
				return r.stopStep(stepID, reason, stepMsgs, pcs, stop)
			}
		}
	}
	// 8–9. Execute what may run; report results in call order.
	if !r.executeCalls(stepCtx, pcs) {
		return true
	}
	if r.ctx.Err() != nil {
		return r.endToolStep(stepID, reason, stepMsgs, msg, pcs)
	}
	for _, c := range pcs {
		if c.parked || c.State != CallDone {
			return r.park(stepID, msg, pcs)
		}
	}
	if se := r.stopAfterTool; se != nil {
		return r.stopStep(stepID, reason, stepMsgs, pcs, se)
	}
	toolMsg := r.toolMessage(pcs)
	r.transcript = append(r.transcript, toolMsg)
	r.added = append(r.added, toolMsg)
	stepMsgs = append(stepMsgs, toolMsg)
	if !r.finishStep(stepID, reason, stepMsgs) {
		return true
	}
	// 10. A completing tool that succeeded ends the run: a typed run's answer, or
	// another. A typed run past its corrections ends without an answer.
	for _, c := range pcs {
		if c.executed && !c.Result.IsError && c.entry != nil && c.entry.spec.CompletesRun {
			r.finalText = c.Result.String()
			if c.entry.output {
				r.out.accept(c.Call.Arguments)
				r.finalText = string(r.out.result)
			}
			r.complete()
			return true
		}
	}
	if r.out != nil && r.out.exhausted() {
		r.finish(EndFailed, r.out.err(), nil)
		return true
	}
	r.step++
	r.stepInTurn++
	return false
}

// prepare validates a call, runs the BeforeTool hooks and applies policy. It returns a
// stop requested by a hook. A resumed call keeps the approval it had: one awaiting a
// decision keeps its approval id, so that the decision a resume carries applies, and one
// approved needs no new decision while its arguments stay as approved.
func (r *run) prepare(c *pcall, resumed bool) *StopError {
	if c.entry == nil {
		c.resolve(ErrorOutput(r.unknownTool(c.Call.Name)))
		return nil
	}
	prev := c.PendingCall
	name := c.Call.Name
	if c.entry.output {
		// The answer: checked against the schema, never by hooks or policy.
		if err := r.out.validate(r.ctx, c.Call.Arguments); err != nil {
			why := r.out.invalidAnswer(err)
			r.out.wrong(c.Call.Arguments, why)
			c.resolve(ErrorOutput(why))
			return nil
		}
		c.State = CallReady
		return nil
	}
	if err := c.entry.schema.ValidateContext(r.ctx, c.Call.Arguments); err != nil {
		c.resolve(ErrorOutput(fmt.Sprintf("tool %s got %v", name, err)))
		return nil
	}
	requireApproval := false
	if r.hooks != nil {
		in := &ToolCallInput{RunInfo: r.info, Spec: c.entry.spec, Call: c.Call}
		err := r.hooks.BeforeTool(r.ctx, in)
		if !r.flushHookEvents() {
			return nil
		}
		if se := stopErr(err); se != nil {
			return se
		}
		switch {
		case in.Answer != nil:
			c.resolve(*in.Answer)
			return nil
		case in.Deny != "":
			c.resolve(ErrorOutput(fmt.Sprintf("tool %s was denied: %s", name, in.Deny)))
			return nil
		}
		if in.Call.Arguments != c.Call.Arguments {
			if err := c.entry.schema.ValidateContext(r.ctx, in.Call.Arguments); err != nil {
				c.resolve(ErrorOutput(fmt.Sprintf("tool %s got, from a hook, %v", name, err)))
				return nil
			}
			c.Call.Arguments = in.Call.Arguments
		}
		requireApproval = in.RequireApproval
	}
	pol := r.toolPolicy(name)
	c.autoApprovable = pol.Approval < ApprovalAlways
	switch needs := pol.Approval > ApprovalAuto || requireApproval; {
	case pol.Disabled:
		c.resolve(ErrorOutput(fmt.Sprintf("tool %s is disabled for this run", name)))
	case resumed && prev.State == CallAwaitingApproval && c.Call.Arguments == prev.Call.Arguments:
		// Still asked, even if policy no longer asks: the client may have decided.
		c.State, c.ApprovalID, c.Reason = CallAwaitingApproval, prev.ApprovalID, prev.Reason
	case needs && resumed && prev.Approved && c.Call.Arguments == prev.Call.Arguments:
		c.State = CallReady
	case needs:
		c.State = CallAwaitingApproval
		c.ApprovalID = r.a.newID("appr")
		c.Approved = false
		c.Reason = "the policy of tool " + name + " requires an approval"
		if pol.Approval == ApprovalAuto {
			c.Reason = "a hook requires an approval for this call"
		}
	default:
		c.State = CallReady
	}
	if c.State == CallReady || c.State == CallAwaitingApproval {
		// Nobody is asked to approve what a guardrail refuses.
		return r.checkToolInput(c, false)
	}
	return nil
}

// approve asks for every decision the calls need: all requests first, then the waits.
// It returns false when the consumer is gone.
func (r *run) approve(stepCtx context.Context, pcs []*pcall) bool {
	var waiting []*pcall
	expires := map[*pcall]time.Time{}
	for _, c := range pcs {
		if c.State != CallAwaitingApproval {
			continue
		}
		var exp time.Time
		if r.req.ApprovalTimeout > 0 && r.req.Approve != nil {
			exp = r.a.now().Add(r.req.ApprovalTimeout)
		}
		expires[c] = exp
		waiting = append(waiting, c)
		if !r.emit(&ApprovalRequested{ApprovalID: c.ApprovalID, CallID: c.Call.ID, ToolName: c.Call.Name, Arguments: c.Call.Arguments, Editable: true, ExpiresAt: exp, Reason: c.Reason, AutoApprovable: c.autoApprovable}) {
			return false
		}
	}
	for _, c := range waiting {
		if stepCtx.Err() != nil {
			if !r.resolveApproval(c, OutcomeCancelled, DecidedByRunEnd, "", r.endReason(stepCtx)) {
				return false
			}
			continue
		}
		if r.req.Approve == nil {
			c.parked = true
			continue
		}
		actx, span := r.startApproval(stepCtx, c)
		start := r.a.now()
		d, err := r.askApproval(actx, c, expires[c])
		wait := r.a.now().Sub(start)
		switch {
		case errors.Is(err, ErrInterrupt):
			r.endApproval(span, c, wait, "parked", DecidedByUnspecified, nil)
			c.parked = true
			continue
		case stepCtx.Err() != nil:
			r.endApproval(span, c, wait, OutcomeCancelled.String(), DecidedByRunEnd, nil)
			if !r.resolveApproval(c, OutcomeCancelled, DecidedByRunEnd, "", r.endReason(stepCtx)) {
				return false
			}
			continue
		case errors.Is(err, context.DeadlineExceeded):
			r.endApproval(span, c, wait, OutcomeExpired.String(), DecidedByTimeout, nil)
			if !r.resolveApproval(c, OutcomeExpired, DecidedByTimeout, "", "nobody decided within "+r.req.ApprovalTimeout.String()) {
				return false
			}
			continue
		case err != nil:
			d = Decision{Outcome: OutcomeDenied, DecidedBy: DecidedByPolicy, Reason: "the approval failed: " + err.Error()}
		}
		if d.DecidedBy == DecidedByUnspecified {
			d.DecidedBy = DecidedByClient
		}
		if d.Outcome == OutcomeApproved && d.EditedArguments != "" && d.EditedArguments != c.Call.Arguments {
			if verr := c.entry.schema.ValidateContext(r.ctx, d.EditedArguments); verr != nil {
				d = Decision{Outcome: OutcomeDenied, DecidedBy: d.DecidedBy, Reason: fmt.Sprintf("the edited arguments are not valid: %v", verr)}
			} else {
				c.Call.Arguments = d.EditedArguments
			}
		}
		if d.Outcome != OutcomeApproved && d.Outcome != OutcomeDenied {
			d = Decision{Outcome: OutcomeDenied, DecidedBy: d.DecidedBy, Reason: fmt.Sprintf("the decision had no valid outcome (%v)", d.Outcome)}
		}
		r.endApproval(span, c, wait, d.Outcome.String(), d.DecidedBy, err)
		if !r.resolveApproval(c, d.Outcome, d.DecidedBy, c.Call.Arguments, d.Reason) {
			return false
		}
	}
	return true
}

// askApproval calls Request.Approve, bounded by the request's expiry. A panic in it
// counts as a failed approval.
func (r *run) askApproval(stepCtx context.Context, c *pcall, exp time.Time) (d Decision, err error) {
	ctx := stepCtx
	if !exp.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(stepCtx, exp)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("approval callback panicked: %v", p)
		}
	}()
	return r.req.Approve(ctx, ApprovalRequest{ID: c.ApprovalID, Call: c.Call, Spec: c.entry.spec, Editable: true, AutoApprovable: c.autoApprovable, ExpiresAt: exp, Reason: c.Reason})
}

// endReason says in words why the step's context ended.
func (r *run) endReason(stepCtx context.Context) string {
	switch cause := context.Cause(stepCtx); {
	case errors.Is(cause, errInterrupted):
		return "interrupted by a steer"
	case errors.Is(cause, ErrShutdown):
		return "the server is shutting down"
	default:
		return "the run was cancelled"
	}
}

// resolveApproval records and reports a decision.
func (r *run) resolveApproval(c *pcall, o Outcome, by DecidedBy, args, reason string) bool {
	switch o {
	case OutcomeApproved:
		c.State, c.Approved = CallReady, true
	case OutcomeDenied:
		msg := fmt.Sprintf("the call of %s was denied", c.Call.Name)
		if reason != "" {
			msg += ": " + reason
		}
		c.resolve(ErrorOutput(msg))
	case OutcomeExpired:
		c.resolve(ErrorOutput(fmt.Sprintf("the call of %s was not approved in time (%s); it did not run", c.Call.Name, reason)))
	case OutcomeCancelled:
		c.resolve(ErrorOutput(fmt.Sprintf("the call of %s did not run: %s", c.Call.Name, reason)))
		c.cancelled, c.cancelledFrom = true, CallAwaitingApproval
	}
	return r.emit(&ApprovalResolved{ApprovalID: c.ApprovalID, CallID: c.Call.ID, Outcome: o, DecidedBy: by, Arguments: args, Reason: reason})
}

// toolCancelGrace is how long a cancelled or timed-out tool may take to return before the
// run goes on without it.
const toolCancelGrace = 50 * time.Millisecond

type execDone struct {
	c        *pcall
	out      Output
	duration time.Duration
	parked   bool
}

// executeCalls runs the ready calls, one after another or in parallel up to the agent's
// limit for tools that allow it, and reports every result in call order. Calls not yet
// started when the step is interrupted or the run ends are cancelled.
func (r *run) executeCalls(stepCtx context.Context, pcs []*pcall) bool {
	limit := max(r.a.cfg.ParallelTools, 1)
	results := make(chan execDone, len(pcs))
	inflight := 0
	next := 0       // first call whose result is not reported yet
	parked := false // a client tool parked the run
	ok := true

	flush := func() {
		for ; next < len(pcs) && ok; next++ {
			c := pcs[next]
			switch {
			case c.reported || c.parked || c.cancelled:
			case c.State == CallDone:
				ok = r.reportResult(c)
			default:
				return // still running, or not started
			}
		}
	}
	collect := func() {
		d := <-results
		inflight--
		d.c.duration = d.duration
		if d.parked {
			d.c.parked, parked = true, true
		} else {
			d.c.executed = true
			d.c.resolve(d.out)
			r.usage.ToolCalls++
		}
		flush()
	}

	// No call is parked on entry (toolStep parks the run first), so only the calls this
	// loop starts can park.
	var cancelled []*pcall
	for _, c := range pcs {
		flush()
		if c.State != CallReady {
			continue
		}
		if parked {
			break // a client tool parked the run: later calls wait for the resume
		}
		if stepCtx.Err() != nil || !ok || r.stopAfterTool != nil {
			cancelled = append(cancelled, c)
			continue
		}
		parallel := limit > 1 && c.entry.spec.Parallel
		for inflight > 0 && (!parallel || inflight >= limit) {
			collect()
		}
		if stepCtx.Err() != nil || !ok || r.stopAfterTool != nil {
			cancelled = append(cancelled, c)
			continue
		}
		deadline := r.a.now().Add(r.toolTimeout(c))
		if ok = r.emit(&ToolExecutionStarted{CallID: c.Call.ID, Name: c.Call.Name, Arguments: c.Call.Arguments, Executor: c.entry.spec.Executor, Deadline: deadline}); !ok {
			break
		}
		inflight++
		if parallel {
			go func() { results <- r.runTool(c) }()
		} else {
			results <- r.runTool(c)
			collect()
		}
	}
	for inflight > 0 {
		collect()
	}
	if !ok {
		return false
	}
	why := r.endReason(stepCtx)
	if r.stopAfterTool != nil {
		why = "the run was stopped"
	}
	for _, c := range cancelled {
		c.resolve(ErrorOutput(fmt.Sprintf("the call of %s did not run: %s", c.Call.Name, why)))
		c.cancelled, c.cancelledFrom = true, CallReady
	}
	if !r.reportCancelled(pcs, why) {
		return false
	}
	flush()
	return ok
}

// reportCancelled ends the lifecycle of every call cancelled and not yet reported with
// one ToolCallsCancelled event.
func (r *run) reportCancelled(pcs []*pcall, why string) bool {
	var ids []string
	for _, c := range pcs {
		if c.cancelled && !c.reported {
			c.reported = true
			ids = append(ids, c.Call.ID)
		}
	}
	if len(ids) == 0 {
		return true
	}
	r.event(eventToolCallsCancelled, attrCallIDs.StringSlice(ids), attrReason.String(why))
	return r.emit(&ToolCallsCancelled{CallIDs: ids, Reason: why})
}

func (r *run) toolTimeout(c *pcall) time.Duration {
	if t := c.entry.spec.Timeout; t > 0 {
		return t
	}
	return r.a.cfg.ToolTimeout
}

// runTool executes one call with its timeout, on the run's context (an interrupting steer
// lets running calls finish). An error or a panic becomes an error result. A tool that
// ignores its context past the timeout is abandoned: its goroutine ends when it returns,
// and the run goes on without it.
//
// The call is an execute_tool span; a client tool's Execute, which is the wait for the
// client's result, is also an await_client_tool span inside it.
func (r *run) runTool(c *pcall) execDone {
	sctx, span := r.startTool(c)
	sctx = context.WithValue(sctx, idempotencyKey{}, r.info.RunID+"/"+c.Call.ID)
	ctx, cancel := context.WithTimeout(sctx, r.toolTimeout(c))
	defer cancel()
	var wait trace.Span
	if c.entry.spec.Executor == ExecutorClient {
		ctx, wait = r.startClientWait(ctx, c)
	}
	type ret struct {
		out      Output
		err      error
		panicked bool
	}
	ch := make(chan ret, 1)
	start := r.a.now()
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- ret{err: fmt.Errorf("panic: %v", p), panicked: true}
			}
		}()
		out, err := c.entry.tool.Execute(ctx, c.Call)
		ch <- ret{out: out, err: err}
	}()
	var res ret
	select {
	case res = <-ch:
	case <-ctx.Done():
		// Give a tool that honours its context a moment to return, so it is joined.
		grace := time.NewTimer(toolCancelGrace)
		select {
		case res = <-ch:
		case <-grace.C:
			res.err = ctx.Err()
		}
		grace.Stop()
	}
	d := execDone{c: c, duration: r.a.now().Sub(start)}
	name := c.Call.Name
	var o toolOutcome
	switch {
	case errors.Is(res.err, ErrInterrupt):
		d.parked = true
	case res.err != nil && c.entry.spec.Executor == ExecutorClient && errors.Is(context.Cause(r.ctx), ErrShutdown):
		// The client may still send the result: to the replica that resumes the run.
		d.parked = true
	case res.err == nil:
		d.out = res.out
		if res.out.IsError {
			o.errType, o.errText = "tool_error", "the tool returned an error result"
		}
	case r.ctx.Err() != nil:
		d.out = ErrorOutput(fmt.Sprintf("tool %s was cancelled: %s", name, r.endReason(r.ctx)))
		o.cancelled = true
	case errors.Is(res.err, context.DeadlineExceeded) && ctx.Err() != nil:
		d.out = ErrorOutput(fmt.Sprintf("tool %s timed out after %s", name, r.toolTimeout(c)))
		o.errType, o.errText = "timeout", d.out.Text
	default:
		d.out = ErrorOutput(fmt.Sprintf("tool %s failed: %v", name, res.err))
		o.errType, o.errText = "tool_error", d.out.Text
		if res.panicked {
			o.errType = "panic"
		}
	}
	if wait != nil {
		r.endToolSpan(wait, d, o, false)
	}
	r.endToolSpan(span, d, o, true)
	r.recordTool(c, d, o)
	return d
}

// reportResult runs the AfterTool hooks on a result and reports it.
func (r *run) reportResult(c *pcall) bool {
	c.reported = true
	if r.hooks != nil && (c.entry == nil || !c.entry.output) {
		in := &ToolCallOutput{RunInfo: r.info, Call: c.Call, Output: c.Result, Duration: c.duration}
		err := r.hooks.AfterTool(r.ctx, in)
		c.Result = in.Output
		if !r.flushHookEvents() {
			return false
		}
		if se := stopErr(err); se != nil {
			r.stopAfterTool = se
		}
	}
	if se := r.checkToolOutput(c); se != nil && r.stopAfterTool == nil {
		r.stopAfterTool = se
	}
	c.Result = limitOutput(c.Result, r.a.cfg.MaxToolOutput)
	return r.emit(&ToolCallResult{Result: ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Output: c.Result}, Duration: c.duration})
}

// stopStep ends a step a hook stopped, and the run with it. Every call keeps a result,
// so the transcript stays one a provider accepts: results already known are reported,
// calls that did not run are cancelled with a result saying so.
func (r *run) stopStep(stepID string, reason FinishReason, stepMsgs []Message, pcs []*pcall, stop *StopError) bool {
	const why = "the run was stopped"
	for _, c := range pcs {
		if c.State != CallDone || c.parked {
			c.resolve(ErrorOutput(fmt.Sprintf("the call of %s did not run: %s", c.Call.Name, why)))
			c.cancelled, c.parked = true, false
		}
	}
	for _, c := range pcs {
		if !c.reported && !c.cancelled && !r.reportResult(c) {
			return true
		}
	}
	if !r.reportCancelled(pcs, why) {
		return true
	}
	toolMsg := r.toolMessage(pcs)
	r.transcript = append(r.transcript, toolMsg)
	r.added = append(r.added, toolMsg)
	if !r.finishStep(stepID, reason, append(stepMsgs, toolMsg)) {
		return true
	}
	r.finish(EndStopped, stop, nil)
	return true
}

// toolMessage is the transcript entry holding the step's results, in call order.
func (r *run) toolMessage(pcs []*pcall) Message {
	m := Message{ID: r.a.newID("msg"), Role: RoleTool, Parts: make([]Part, len(pcs))}
	for i, c := range pcs {
		m.Parts[i] = Part{Kind: PartToolResult, ToolResult: ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Output: c.Result}}
	}
	return m
}

// park ends the run AWAITING_INPUT: some call waits for a decision or a client's result.
func (r *run) park(stepID string, msg Message, pcs []*pcall) bool {
	r.finish(EndAwaitingInput, nil, r.pending(stepID, msg, pcs))
	return true
}

// pending describes a parked step. Its assistant message leaves the run's new messages
// and travels in the Pending instead, so that a client's history stays the plain
// concatenation of every run's new messages: the resumed run reports the message, with
// the arguments its calls finally ran with (toolStep wrote them into msg already).
func (r *run) pending(stepID string, msg Message, pcs []*pcall) *Pending {
	if i := slices.IndexFunc(r.added, func(m Message) bool { return m.ID == msg.ID && m.Role == RoleAssistant }); i >= 0 {
		r.added = slices.Delete(r.added, i, i+1)
	}
	p := &Pending{Step: r.step, Turn: r.turn, StepInTurn: r.stepInTurn, StepID: stepID, Message: msg, Calls: make([]PendingCall, len(pcs))}
	for i, c := range pcs {
		p.Calls[i] = c.PendingCall
	}
	return p
}

// stepCalls reports a step's calls before any is prepared (StepCalls).
func (r *run) stepCalls(stepID string, msg Message, pcs []*pcall) *StepCalls {
	m := msg
	m.Parts = slices.Clone(msg.Parts)
	p := &Pending{Step: r.step, Turn: r.turn, StepInTurn: r.stepInTurn, StepID: stepID, Message: m, Calls: make([]PendingCall, len(pcs))}
	for i, c := range pcs {
		p.Calls[i] = PendingCall{Call: c.Call, State: CallReady}
	}
	added := slices.DeleteFunc(slices.Clone(r.added), func(m Message) bool { return m.ID == msg.ID && m.Role == RoleAssistant })
	return &StepCalls{Pending: p, Usage: r.usage, NewMessages: added}
}

// endToolStep ends a step whose run's context is done. A cancelled run records every
// result (cancelled calls say so) so the transcript stays whole; a shut down one parks
// the calls that have no result yet.
func (r *run) endToolStep(stepID string, reason FinishReason, stepMsgs []Message, msg Message, pcs []*pcall) bool {
	if errors.Is(context.Cause(r.ctx), ErrShutdown) {
		for _, c := range pcs {
			if c.cancelled && !c.executed {
				// Not run: it stays pending, to run where the run resumes.
				c.cancelled = false
				c.State, c.Result = c.cancelledFrom, Output{}
			}
		}
		r.endOnContext(r.pending(stepID, msg, pcs))
		return true
	}
	if !r.reportCancelled(pcs, r.endReason(r.ctx)) {
		return true
	}
	toolMsg := r.toolMessage(pcs)
	r.added = append(r.added, toolMsg)
	stepMsgs = append(stepMsgs, toolMsg)
	r.finishStep(stepID, FinishInterrupted, stepMsgs)
	r.endOnContext(nil)
	return true
}

// limitOutput cuts an output longer than max bytes (text, or JSON, which then becomes
// text since cut JSON is no JSON), on a character boundary, and says so in words the
// model can act on. A negative max is no limit.
func limitOutput(o Output, max int) Output {
	if max < 0 {
		return o
	}
	full := o.Text
	if o.JSON != nil {
		full = string(o.JSON)
	}
	if len(full) <= max {
		return o
	}
	cut := cutAtRune(full, max)
	o.JSON = nil
	o.Text = full[:cut] + fmt.Sprintf("\n\n[the output was %d bytes; only the first %d are shown. Ask the tool for less, or for a narrower part.]", len(full), cut)
	return o
}
