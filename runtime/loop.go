package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// errConsumerGone cancels a run whose consumer stopped iterating.
var errConsumerGone = errors.New("runtime: consumer stopped reading events")

// errInterrupted cancels the current step when an interrupting steer arrives.
var errInterrupted = errors.New("runtime: interrupted by a steer")

// run is the state of one Agent.Run. It lives on the consumer's goroutine.
type run struct {
	a      *Agent
	req    *Request
	ctx    context.Context
	cancel context.CancelCauseFunc
	yield  func(Event, error) bool
	gone   bool

	hooks     Hooks // nil when there are none
	info      *RunInfo
	hookQueue []*HookEvent
	model     Model
	tools     map[string]*toolEntry
	specs     []ToolSpec // offered to the model
	policy    Policy     // the request's tightening
	maxSteps  int

	transcript []Message // what the model sees, system prompt first
	added      []Message // what this run added
	usage      Usage
	step, turn int
	stepInTurn int
	queued     []Steer // taken from the inbox (or the resumed Pending), not yet applied
	finalText  string

	out           *outputState // a typed run's answers (output.go); nil for an untyped run
	finished      bool         // finish ran
	tel           runTelemetry // the run's span and metric attributes
	stopAfterTool *StopError   // a stop returned by an AfterTool hook
	guards        []guard      // the guardrails of the run's chain (guardrail.go)
	quietInfo     *RunInfo     // r.info that emits nothing: what tools and guardrails see
}

func (a *Agent) newRun(ctx context.Context, req *Request, yield func(Event, error) bool) (*run, error) {
	if req == nil {
		req = &Request{}
	}
	r := &run{a: a, req: req, yield: yield, tools: a.tools, policy: req.Policy, maxSteps: a.cfg.MaxSteps, model: a.cfg.Model}
	if req.Model != nil {
		r.model = req.Model
	}
	if req.MaxSteps > 0 && req.MaxSteps < r.maxSteps {
		r.maxSteps = req.MaxSteps
	}
	out, also, err := a.runOutput(req)
	if err != nil {
		return nil, err
	}
	if out != nil {
		native, err := nativeOutput(a.cfg.OutputMode, r.model)
		if err != nil {
			return nil, err
		}
		r.out = &outputState{entry: out, also: also, native: native, corrections: a.cfg.OutputCorrections}
		if req.Resume != nil {
			// The answers refused before the run parked still count.
			r.out.errs = slices.Clone(req.Resume.OutputErrors)
		}
	}
	offerOutput := r.out != nil && !r.out.native
	if len(req.ClientTools) > 0 || offerOutput {
		r.tools = make(map[string]*toolEntry, len(a.tools)+len(req.ClientTools)+1)
		for k, v := range a.tools {
			r.tools[k] = v
		}
		if offerOutput {
			r.tools[out.spec.Name] = out
		}
		for _, t := range req.ClientTools {
			e, err := newToolEntry(t)
			if err != nil {
				return nil, fmt.Errorf("%w: client tool: %v", ErrInvalidRequest, err)
			}
			if _, dup := r.tools[e.spec.Name]; dup {
				return nil, fmt.Errorf("%w: client tool %q clashes with a tool of the same name", ErrInvalidRequest, e.spec.Name)
			}
			e.spec.Executor = ExecutorClient
			r.tools[e.spec.Name] = e
		}
	}
	for _, name := range a.order {
		if !r.toolPolicy(name).Disabled {
			r.specs = append(r.specs, a.tools[name].spec)
		}
	}
	for _, t := range req.ClientTools {
		if name := t.Spec().Name; !r.toolPolicy(name).Disabled {
			r.specs = append(r.specs, r.tools[name].spec)
		}
	}
	if offerOutput {
		r.specs = append(r.specs, out.spec) // no policy disables it
		fm, ok := r.model.(ForcedToolModel)
		r.out.force = len(r.specs) == 1 && ok && fm.ForcesTool()
	}
	for i, m := range req.Messages {
		if err := checkMessage(m); err != nil {
			return nil, fmt.Errorf("%w: messages[%d]: %v", ErrInvalidRequest, i, err)
		}
	}
	if req.Resume != nil {
		if err := checkResume(req.Resume); err != nil {
			return nil, fmt.Errorf("%w: resume: %v", ErrInvalidRequest, err)
		}
	}

	runID, threadID := req.RunID, req.ThreadID
	if runID == "" {
		runID = a.newID("run")
	}
	if threadID == "" {
		threadID = a.newID("thread")
	}
	r.info = &RunInfo{RunID: runID, ThreadID: threadID, Agent: a.cfg.Name, Model: r.model.Name(), Caller: req.Caller, Metadata: req.Metadata}
	r.info.emit = func(name string, value any) { r.hookQueue = append(r.hookQueue, &HookEvent{Name: name, Value: value}) }
	// What tools read through RunInfoFromContext, and guardrails in their checks, is a
	// copy that emits nothing: tools and parallel checks run beside the run's goroutine,
	// and only hooks, which run one at a time on it, emit.
	ctxInfo := *r.info
	ctxInfo.emit = nil
	r.quietInfo = &ctxInfo
	if req.Hooks != nil || a.cfg.Hooks != nil {
		// One chain, one order: the request's hooks (the server's) before the agent's.
		// Hook failures are logged with the run's id (and, through ctx, its trace). The
		// run's own instances of the hooks that keep per-run state live in r.hooks, and go
		// with the run.
		r.hooks = Chain(a.log.With("run_id", runID), req.Hooks, a.cfg.Hooks).(chain).ForRun(r.info)
		r.guards = guardsOf(r.hooks)
	}
	// The run's span: everything below, hooks included, runs in its context.
	r.ctx, r.cancel = context.WithCancelCause(context.WithValue(r.startTelemetry(ctx), runInfoKey{}, &ctxInfo))
	r.transcript = make([]Message, 0, len(req.Messages)+8)
	if a.cfg.System != "" {
		r.transcript = append(r.transcript, SystemMessage(a.cfg.System))
	}
	r.transcript = append(r.transcript, req.Messages...)
	return r, nil
}

func checkMessage(m Message) error {
	if m.Role < RoleSystem || m.Role > RoleTool {
		return errors.New("role is not set")
	}
	if len(m.Parts) == 0 {
		return errors.New("no parts")
	}
	for j, p := range m.Parts {
		if p.Kind < PartText || p.Kind > PartMedia {
			return fmt.Errorf("parts[%d]: kind is not set", j)
		}
		if (m.Role == RoleTool) != (p.Kind == PartToolResult) {
			return fmt.Errorf("parts[%d]: tool results go in tool messages, and tool messages hold tool results only", j)
		}
		if p.Kind == PartToolCall && m.Role != RoleAssistant {
			return fmt.Errorf("parts[%d]: only assistant messages call tools", j)
		}
	}
	return nil
}

func checkResume(p *Pending) error {
	calls := p.Message.ToolCalls()
	if len(calls) != len(p.Calls) {
		return fmt.Errorf("the pending assistant message has %d tool calls, the pending step %d", len(calls), len(p.Calls))
	}
	if len(p.Calls) > 0 && p.Message.Role != RoleAssistant {
		return errors.New("the pending message is not an assistant message")
	}
	for i, c := range calls {
		if c.ID != p.Calls[i].Call.ID {
			return fmt.Errorf("tool call %d is %q in the pending message and %q in the pending step", i, c.ID, p.Calls[i].Call.ID)
		}
	}
	return nil
}

// toolPolicy is the effective policy of a tool: the agent's, tightened by the request's.
func (r *run) toolPolicy(name string) ToolPolicy {
	return r.a.cfg.Policy.For(name).Tighten(r.policy.For(name))
}

func (r *run) executorOf(name string) Executor {
	if e := r.tools[name]; e != nil {
		return e.spec.Executor
	}
	return ExecutorServer
}

// emit reports ev to the hooks and the consumer. It returns false once the consumer has
// stopped; the run's context is then cancelled and the run unwinds without reporting.
func (r *run) emit(ev Event) bool {
	if r.gone {
		return false
	}
	if r.hooks != nil {
		r.hooks.OnEvent(r.ctx, r.info, ev)
	}
	if !r.yield(ev, nil) {
		r.gone = true
		r.cancel(errConsumerGone)
		return false
	}
	return true
}

// flushHookEvents reports what hooks emitted.
func (r *run) flushHookEvents() bool {
	for len(r.hookQueue) > 0 {
		ev := r.hookQueue[0]
		r.hookQueue = r.hookQueue[1:]
		if r.tel.span.IsRecording() {
			if r.a.tel.content {
				r.event(eventHookEvent, attrHookEventName.String(ev.Name), attrHookEventValue.String(hookEventValue(ev.Value)))
			} else {
				r.event(eventHookEvent, attrHookEventName.String(ev.Name))
			}
		}
		if !r.emit(ev) {
			return false
		}
	}
	return true
}

// stopErr returns err as a *StopError, if it is one.
func stopErr(err error) *StopError {
	se, _ := errors.AsType[*StopError](err)
	return se
}

func (r *run) execute() {
	if !r.emit(&RunStarted{RunID: r.info.RunID, ThreadID: r.info.ThreadID, Agent: r.a.cfg.Name, Model: r.info.Model, TraceID: r.traceID(), Resumed: r.req.Resume != nil}) {
		return
	}
	// However the run unwinds (its consumer stopped reading, say), it finishes once; set
	// up before BeforeRun, so that a run that reached BeforeRun reaches AfterRun too.
	defer r.finish(EndCancelled, nil, nil)
	if r.hooks != nil {
		err := r.hooks.BeforeRun(r.ctx, r.info)
		if !r.flushHookEvents() {
			return
		}
		if se := stopErr(err); se != nil {
			r.finish(EndStopped, se, nil)
			return
		}
	}
	if p := r.req.Resume; p != nil {
		r.step, r.turn, r.stepInTurn = p.Step, p.Turn, p.StepInTurn
		r.queued = append(r.queued, p.Steers...)
		if len(p.Calls) > 0 {
			if done := r.resumeStep(p); done {
				return
			}
		}
	}
	for {
		if done := r.runStep(); done {
			return
		}
	}
}

// endOnContext finishes a run whose context is done: cancelled, or shut down.
func (r *run) endOnContext(pending *Pending) {
	cause := context.Cause(r.ctx)
	if errors.Is(cause, ErrShutdown) {
		if pending == nil {
			pending = &Pending{Step: r.step, Turn: r.turn, StepInTurn: r.stepInTurn}
		}
		r.finish(EndShutdown, cause, pending)
		return
	}
	r.finish(EndCancelled, cause, nil)
}

// takeLastSteers moves the inbox's steers into the run where it may end, closing the
// inbox if it holds none, so that no steer is accepted that the run will not see. It
// reports whether it found any: then the inbox stays open, and the run goes on.
func (r *run) takeLastSteers() bool {
	s := r.req.Inbox.takeOrClose()
	r.queued = append(r.queued, s...)
	return len(s) > 0
}

// closeSteers moves every steer out of the inbox as the run finishes, and closes it.
func (r *run) closeSteers() {
	for r.takeLastSteers() {
	}
}

// runStep runs one step; it reports whether the run finished.
func (r *run) runStep() (done bool) {
	// 1. A done context ends the run.
	if r.ctx.Err() != nil {
		r.endOnContext(nil)
		return true
	}
	// 2. Queued steers start a new turn with a fresh step budget.
	taken, seen := r.req.Inbox.take()
	steers := append(r.queued, taken...)
	r.queued = nil
	if len(steers) > 0 && r.step > 0 {
		r.turn++
		r.stepInTurn = 0
	}
	if r.stepInTurn >= r.maxSteps {
		r.queued = steers
		r.finish(EndMaxSteps, ErrMaxSteps, nil)
		return true
	}
	stepID := r.a.newID("step")
	if !r.emit(&StepStarted{StepID: stepID, Index: r.step, Turn: r.turn, IndexInTurn: r.stepInTurn}) {
		return true
	}
	var stepMsgs []Message
	for _, s := range steers {
		m := s.Message
		m.Role = RoleUser
		if m.ID == "" {
			m.ID = r.a.newID("msg")
		}
		r.transcript = append(r.transcript, m)
		r.added = append(r.added, m)
		stepMsgs = append(stepMsgs, m)
		r.event(eventSteerApplied, attrSteerSeq.Int64(s.Seq), attrSteerInterrupt.Bool(s.Interrupt), attrStepID.String(stepID), attrMessageID.String(m.ID))
		if !r.emit(&SteerApplied{Seq: s.Seq, StepID: stepID, MessageID: m.ID}) {
			return true
		}
	}

	stepCtx, cancel := r.beginStep(seen)
	defer r.endStep(cancel)

	// Guardrails check the step's new input: the blocking ones now, the parallel ones
	// alongside the model call.
	var input *GuardCheck
	if len(r.guards) > 0 {
		input = r.inputCheck(r.newInput(stepMsgs))
	}
	if input != nil {
		if ge, _ := r.checkAll(GuardInput, input, func(g guard) bool { return !g.spec.Parallel }); ge != nil {
			r.finishStep(stepID, FinishInterrupted, stepMsgs)
			r.finish(EndStopped, ge.stop(), nil)
			return true
		}
	}

	// 3. BeforeModel hooks may rewrite the call.
	mreq := &ModelRequest{Messages: r.transcript[:len(r.transcript):len(r.transcript)], Tools: r.specs, Settings: r.a.cfg.Settings}
	switch {
	case r.out == nil:
	case r.out.native:
		mreq.Output = &OutputFormat{Name: r.out.entry.spec.Name, Schema: r.out.entry.spec.Parameters}
	case r.out.force:
		mreq.ToolChoice = r.out.entry.spec.Name
	}
	if r.hooks != nil {
		err := r.hooks.BeforeModel(r.ctx, &ModelCall{RunInfo: r.info, Step: r.step, Request: mreq})
		if !r.flushHookEvents() {
			return true
		}
		if se := stopErr(err); se != nil {
			r.finishStep(stepID, FinishInterrupted, stepMsgs)
			r.finish(EndStopped, se, nil)
			return true
		}
	}

	// 4. Stream the model.
	var parallel *parallelChecks
	if input != nil {
		parallel = r.startParallel(input, cancel)
	}
	msg, callUsage, reason, err := r.callModel(stepCtx, stepID, mreq)
	trip := parallel.wait()
	if r.gone {
		return true
	}
	r.usage = r.usage.Add(callUsage)
	r.usage.ModelCalls++
	if len(msg.Parts) > 0 {
		r.transcript = append(r.transcript, msg)
		r.added = append(r.added, msg)
		stepMsgs = append(stepMsgs, msg)
	}
	if trip != nil {
		// A parallel input check tripped: nothing the model asked for happens.
		if pcs := r.newCalls(msg); len(pcs) > 0 && err == nil {
			return r.stopStep(stepID, reason, stepMsgs, pcs, trip.stop())
		}
		r.finishStep(stepID, FinishInterrupted, stepMsgs)
		r.finish(EndStopped, trip.stop(), nil)
		return true
	}
	if err != nil {
		switch {
		case r.ctx.Err() != nil:
			r.finishStep(stepID, FinishInterrupted, stepMsgs)
			r.endOnContext(nil)
			return true
		case stepCtx.Err() != nil: // an interrupting steer: next step, new turn
			r.event(eventInterrupted, attrStepID.String(stepID))
			if !r.finishStep(stepID, FinishInterrupted, stepMsgs) {
				return true
			}
			r.step++
			r.stepInTurn++
			return false
		}
		r.finishStep(stepID, FinishError, stepMsgs)
		r.finish(EndFailed, err, nil)
		return true
	}

	// 5. AfterModel hooks see the message and the usage.
	if r.hooks != nil {
		err := r.hooks.AfterModel(r.ctx, &ModelResponse{RunInfo: r.info, Step: r.step, Message: msg, Usage: callUsage, FinishReason: reason})
		if !r.flushHookEvents() {
			return true
		}
		if se := stopErr(err); se != nil {
			if pcs := r.newCalls(msg); len(pcs) > 0 {
				return r.stopStep(stepID, reason, stepMsgs, pcs, se)
			}
			r.finishStep(stepID, reason, stepMsgs)
			r.finish(EndStopped, se, nil)
			return true
		}
	}

	// 6. No tool calls: a queued steer continues the run, otherwise it is complete.
	pcs := r.newCalls(msg)
	if len(pcs) == 0 {
		if r.out != nil && len(r.queued) == 0 {
			return r.answeredInText(stepID, reason, stepMsgs, msg)
		}
		if !r.finishStep(stepID, reason, stepMsgs) {
			return true
		}
		if len(r.queued) > 0 || r.takeLastSteers() {
			r.step++
			r.stepInTurn++
			return false
		}
		r.finalText = msg.Text()
		r.complete()
		return true
	}

	// 7–9. Prepare, approve and execute the calls.
	if !r.emit(r.stepCalls(stepID, msg, pcs)) {
		return true
	}
	return r.toolStep(stepCtx, stepID, reason, stepMsgs, msg, pcs, false)
}

// newCalls returns the tool calls of the model's message, on their way to preparation.
func (r *run) newCalls(msg Message) []*pcall {
	calls := msg.ToolCalls()
	if len(calls) == 0 {
		return nil
	}
	pcs := make([]*pcall, len(calls))
	for i, c := range calls {
		pcs[i] = &pcall{PendingCall: PendingCall{Call: c}, entry: r.tools[c.Name]}
	}
	return pcs
}

// resumeStep takes up a parked step: its calls continue where they stopped.
func (r *run) resumeStep(p *Pending) (done bool) {
	stepID := p.StepID
	if stepID == "" {
		stepID = r.a.newID("step")
	}
	if !r.emit(&StepStarted{StepID: stepID, Index: r.step, Turn: r.turn, IndexInTurn: r.stepInTurn}) {
		return true
	}
	stepCtx, cancel := r.beginStep(r.req.Inbox.interruptsSeen())
	defer r.endStep(cancel)
	// The parked step's assistant message joins the transcript now, as it finally runs.
	msg := p.Message
	msg.Parts = slices.Clone(msg.Parts)
	r.transcript = append(r.transcript, msg)
	r.added = append(r.added, msg)
	pcs := make([]*pcall, len(p.Calls))
	for i, c := range p.Calls {
		// Results of calls done before the run parked were reported then.
		pcs[i] = &pcall{PendingCall: c, entry: r.tools[c.Call.Name], reported: c.State == CallDone}
	}
	return r.toolStep(stepCtx, stepID, FinishToolCalls, []Message{msg}, msg, pcs, true)
}

// callIDUsed reports whether a call of the run's transcript, or a reserved one, has id.
func (r *run) callIDUsed(id string) bool {
	if slices.Contains(r.req.ReservedCallIDs, id) {
		return true
	}
	for _, m := range r.transcript {
		for _, p := range m.Parts {
			if p.Kind == PartToolCall && p.ToolCall.ID == id {
				return true
			}
		}
	}
	return false
}

// beginStep starts a step's context, which an interrupting steer cancels (at once when
// one came after seen).
func (r *run) beginStep(seen uint64) (context.Context, context.CancelCauseFunc) {
	stepCtx, cancel := context.WithCancelCause(r.ctx)
	r.req.Inbox.attach(cancel, seen)
	return stepCtx, cancel
}

// endStep detaches the step from the inbox and releases its context.
func (r *run) endStep(cancel context.CancelCauseFunc) {
	r.req.Inbox.detach()
	cancel(nil)
}

// finishStep reports the end of a step.
func (r *run) finishStep(stepID string, reason FinishReason, msgs []Message) bool {
	return r.emit(&StepFinished{StepID: stepID, FinishReason: reason, Usage: r.usage, NewMessages: msgs})
}

// callModel streams one model call. A failure is final: the model's adapter has retried
// what a retry may fix, before the first event (see runtime/llm), so the run does not
// call again. The call is one chat span; the deltas touch no telemetry.
func (r *run) callModel(ctx context.Context, stepID string, mreq *ModelRequest) (Message, Usage, FinishReason, error) {
	asm := newAssembler(r.emit, r.a.newID, r.executorOf, r.a.newID("msg"), stepID)
	asm.used = r.callIDUsed
	cctx, span := r.startChat(ctx, mreq)
	r.tel.served = ""
	start := r.a.now()
	msg, u, reason, err := r.streamOnce(cctx, asm, mreq)
	r.endChat(ctx, span, start, msg, u, reason, err)
	if err == nil || r.gone || ctx.Err() != nil {
		return msg, u, reason, err
	}
	return msg, u, reason, &ModelError{Model: r.model.Name(), Err: err}
}

// streamState is what one model stream accumulates. It is one value, so the loop body
// that the model's iterator calls captures one variable: one allocation per model call
// rather than one per variable.
type streamState struct {
	usage    Usage
	reason   FinishReason
	finished bool
	err      error
}

func (r *run) streamOnce(ctx context.Context, asm *assembler, mreq *ModelRequest) (Message, Usage, FinishReason, error) {
	var st streamState
	for ev, err := range r.model.Stream(ctx, mreq) {
		if err != nil {
			st.err = err
			break
		}
		ok := true
		switch ev.Kind {
		case ModelTextDelta:
			ok = asm.delta(PartText, ev.Text)
		case ModelReasoningDelta:
			ok = asm.delta(PartReasoning, ev.Text)
		case ModelReasoningState:
			ok = asm.reasoningState(ev.State)
		case ModelToolCallDelta:
			ok = asm.toolDelta(ev)
		case ModelUsage:
			st.usage = ev.Usage
		case ModelFinish:
			st.reason, st.finished = ev.Reason, true
		case ModelResponseInfo:
			if ev.Name != "" {
				r.tel.served = ev.Name
			}
		}
		if !ok {
			st.err = errConsumerGone
			break
		}
		if st.finished {
			break
		}
	}
	if st.err == errConsumerGone {
		return Message{}, st.usage, st.reason, st.err
	}
	if st.err == nil && !st.finished {
		if ctx.Err() != nil {
			st.err = context.Cause(ctx)
		} else {
			st.err = ErrMissingFinishReason
		}
	}
	if st.err != nil {
		if ctx.Err() != nil {
			why := "the run was cancelled"
			if errors.Is(context.Cause(ctx), errInterrupted) {
				why = "interrupted by a steer"
			}
			return asm.abort(why), st.usage, FinishInterrupted, st.err
		}
		if !asm.emitted {
			return Message{}, st.usage, FinishError, st.err
		}
		return asm.abort("the model call failed"), st.usage, FinishError, st.err
	}
	msg, ok := asm.finish()
	if !ok {
		return Message{}, st.usage, st.reason, errConsumerGone
	}
	return msg, st.usage, st.reason, nil
}

func (r *run) unknownTool(name string) string {
	names := make([]string, 0, len(r.specs))
	for _, s := range r.specs {
		names = append(names, s.Name)
	}
	return fmt.Sprintf("unknown tool %q; the available tools are: %s", name, strings.Join(names, ", "))
}

// finish reports the end of the run: steers still queued are reported dropped, AfterRun
// sees the outcome, and RunFinished goes out last.
func (r *run) finish(reason EndReason, err error, pending *Pending) {
	if r.finished {
		return
	}
	r.finished = true
	if r.gone {
		r.finishUnread()
		return
	}
	r.closeSteers()
	if pending != nil && r.out != nil {
		pending.OutputErrors = slices.Clip(r.out.errs)
	}
	if pending != nil && len(r.queued) > 0 {
		// A parked run keeps its steers: they take effect where it resumes.
		pending.Steers = slices.Clip(r.queued)
		r.queued = nil
	}
	for _, s := range r.queued {
		r.event(eventSteerDropped, attrSteerSeq.Int64(s.Seq), attrReason.String(reason.String()))
		if !r.emit(&SteerApplied{Seq: s.Seq, Dropped: true, DropReason: "the run ended (" + reason.String() + ") before the steer could be applied"}) {
			r.finishUnread()
			return
		}
	}
	r.queued = nil
	fin := &RunFinished{Reason: reason, Err: err, NewMessages: slices.Clip(r.added), Usage: r.usage, FinalText: r.finalText, Pending: pending}
	if r.out != nil && reason == EndCompleted {
		fin.Output = r.out.result
	}
	if r.hooks != nil {
		r.hooks.AfterRun(context.WithoutCancel(r.ctx), r.info, fin)
		if !r.flushHookEvents() {
			return
		}
	}
	// The span ends before the consumer learns the run ended, so that whoever reads
	// RunFinished finds the run's trace complete.
	r.endTelemetry(reason, err)
	r.emit(fin)
}

// complete ends the run EndCompleted with its answer, unless an output guardrail trips:
// then it ends EndStopped, the answer withheld.
func (r *run) complete() {
	if se := r.checkOutput(); se != nil {
		r.finish(EndStopped, se, nil)
		return
	}
	r.finish(EndCompleted, nil, nil)
}

// finishUnread ends a run whose consumer stopped reading: nobody reads the events any
// more, but the hooks learn how the run ended, and its span ends cancelled.
func (r *run) finishUnread() {
	// Steers sent from now on are refused: nobody would learn of them.
	r.closeSteers()
	r.queued = nil
	cause := context.Cause(r.ctx)
	if r.hooks != nil {
		fin := &RunFinished{Reason: EndCancelled, Err: cause, NewMessages: slices.Clip(r.added), Usage: r.usage}
		r.hooks.AfterRun(context.WithoutCancel(r.ctx), r.info, fin)
	}
	r.endTelemetry(EndCancelled, cause)
}

// answeredInText handles a typed run's step that ended in text, not in a call of its
// output tool: the model is told to call it, and the run goes on, unless it used up its
// corrections.
func (r *run) answeredInText(stepID string, reason FinishReason, stepMsgs []Message, msg Message) bool {
	text := msg.Text()
	why, tell := "the answer was plain text, not a call of "+r.out.entry.spec.Name, r.out.textAnswer()
	if r.out.native {
		// The reply is the answer: JSON that matches the schema.
		err := r.out.validate(r.ctx, text)
		if err == nil {
			r.out.accept(text)
			r.finalText = string(r.out.result)
			if !r.finishStep(stepID, reason, stepMsgs) {
				return true
			}
			r.complete()
			return true
		}
		why = r.out.nativeAnswer(err)
		tell = why
	}
	more := r.out.wrong(text, why)
	if more {
		m := UserMessage(tell)
		m.ID = r.a.newID("msg")
		r.transcript = append(r.transcript, m)
		r.added = append(r.added, m)
		stepMsgs = append(stepMsgs, m)
	}
	if !r.finishStep(stepID, reason, stepMsgs) {
		return true
	}
	if !more {
		r.finish(EndFailed, r.out.err(), nil)
		return true
	}
	r.step++
	r.stepInTurn++
	return false
}
