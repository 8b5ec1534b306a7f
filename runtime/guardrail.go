package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Guardrails check what enters and leaves a run, at fixed stages, and trip when it must
// not: a trip ends the run EndStopped with a *GuardrailError naming the guardrail, its
// stage and its reason, or, at a tool stage where the guardrail says so, turns the call's
// result into an error the model reads and may correct from.
//
// A guardrail is a hook: a [Hooks] value that also implements [Guardrail], installed
// wherever hooks are (Request.Hooks, Config.Hooks, a server's hook interceptors) and
// found in the run's chain, in the chain's order. Its other hook points work as any
// hook's. Every check is a span, "guardrail <name>", under the run's.
//
// The stages:
//
//   - GuardInput: the user's input. A run's new messages (those after the last
//     message of another role in Request.Messages, and the steers its first step takes)
//     are checked before its first model call; each later steer before the model call
//     that follows it.
//   - GuardOutput: the run's answer, before RunFinished: the final text, or a typed
//     run's result. A trip withholds it: RunFinished carries no Output and no FinalText.
//     What was streamed before (text deltas, the output tool's argument deltas) has
//     reached the consumer; a client that must show only checked answers shows
//     RunFinished's.
//   - GuardToolInput: a call's arguments, after the BeforeTool hooks and policy, before
//     its approval is asked, so that nobody is asked to approve what a guardrail refuses;
//     or, with GuardSpec.AfterApproval, once it is approved (with any edited arguments),
//     just before it runs.
//   - GuardToolOutput: the result of a call that ran (a server's tool, a client's), after
//     the AfterTool hooks, before the model sees it: the whole result, before it is cut
//     to Config.MaxToolOutput. The runtime's own results (a denial, a cancellation, an
//     invalid call) and a hook's answer are not checked.
//
// A guardrail checks one stage blocking: the run waits for it. At the input stage,
// GuardSpec.Parallel checks alongside the model call instead, to add no latency: the run
// waits for the check before anything else happens (no tool runs, no approval is asked,
// no answer is accepted), and a trip cancels the model call at once and ends the run.
// What may already have happened: the model was called and billed, and the deltas it
// streamed before the trip reached the consumer; they stay in the transcript, marked
// interrupted.
//
// A check that fails (an error, a panic, a remote guardrail that does not answer) trips
// the guardrail, unless GuardSpec.FailOpen: a guardrail that cannot say yes says no. A
// check cut short because the run ended is no trip.

// GuardStage is a stage where guardrails check a run; a GuardSpec's Stages may hold
// several.
type GuardStage uint8

const (
	// GuardInput checks the user's input before the model reads it.
	GuardInput GuardStage = 1 << iota
	// GuardOutput checks the run's answer before RunFinished.
	GuardOutput
	// GuardToolInput checks a tool call's arguments before the call is approved or runs.
	GuardToolInput
	// GuardToolOutput checks a tool call's result before the model reads it.
	GuardToolOutput
)

var stageNames = []string{"input", "output", "tool_input", "tool_output"}

// String names the stages in s, as agents files and the wire do: "input", "output",
// "tool_input", "tool_output", joined with "|".
func (s GuardStage) String() string {
	var names []string
	for i, n := range stageNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// ParseGuardStage reads one stage's name.
func ParseGuardStage(name string) (GuardStage, error) {
	if i := slices.Index(stageNames, name); i >= 0 {
		return GuardStage(1 << i), nil
	}
	return 0, fmt.Errorf("unknown guardrail stage %q: want %s", name, strings.Join(stageNames, ", "))
}

// GuardAction is what a guardrail's trip at a tool stage does.
type GuardAction uint8

const (
	// GuardEnd ends the run EndStopped with a *GuardrailError; the step's calls that did
	// not run get results saying so. The only action at the input and output stages.
	GuardEnd GuardAction = iota
	// GuardCorrect gives the call an error result naming the guardrail and its reason
	// (the tool does not run, or its result is not shown), and the run goes on: the
	// model may try another way.
	GuardCorrect
)

// GuardSpec describes a guardrail.
type GuardSpec struct {
	// Name names the guardrail in errors, spans and logs; empty means its Go type's
	// name.
	Name string
	// Stages are the stages it checks.
	Stages GuardStage
	// Parallel checks the input stage alongside the model call rather than before it.
	// Other stages are always checked blocking.
	Parallel bool
	// AfterApproval checks the tool input stage once a call is approved, rather than
	// before its approval is asked.
	AfterApproval bool
	// OnToolTrip is what a trip at a tool stage does; GuardEnd, the zero value, ends the
	// run.
	OnToolTrip GuardAction
	// Tools limits the tool stages to calls of these tools; empty means every tool. A
	// typed run's output tool is never a tool stage's: its answer is the output stage's.
	Tools []string
	// FailOpen lets the run go on when a check fails, rather than trip.
	FailOpen bool
}

// Guardrail is a hook that checks a run at the stages of its Guard spec. Guard is read
// once per run, as it starts.
//
// Check runs on the run's goroutine, one check at a time, except a Parallel check,
// which runs on a goroutine of its own while the model streams. A nil Trip and a nil
// error pass. A Guardrail that implements PerRun is found through what its ForRun
// returns, which must then be a Guardrail too.
type Guardrail interface {
	Hooks
	Guard() GuardSpec
	Check(ctx context.Context, in *GuardCheck) (*Trip, error)
}

// GuardCheck is what a guardrail checks. Read it, never change it.
type GuardCheck struct {
	// RunInfo is the run's; its Emit does nothing here.
	*RunInfo
	// Stage is the one stage checked.
	Stage GuardStage
	// Text is what is checked, as text: the input messages' text, the answer (a typed
	// run's as JSON), the call's arguments (JSON), the result's text or JSON.
	Text string
	// Messages are the input stage's new user messages.
	Messages []Message
	// Output is a typed run's result at the output stage; nil otherwise.
	Output json.RawMessage
	// Call and Spec are the call at a tool stage.
	Call ToolCall
	Spec ToolSpec
	// Result is the call's result at the tool output stage.
	Result Output
}

// Trip is a guardrail's refusal.
type Trip struct {
	// Reason says why, for the client and the logs; at a tool stage with GuardCorrect,
	// for the model too.
	Reason string
	// Details are facts for clients that handle a trip (a rule's name, a limit).
	Details map[string]string
}

// ErrGuardrailTripped is wrapped by every *GuardrailError.
var ErrGuardrailTripped = errors.New("runtime: a guardrail tripped")

// GuardrailError is the end of a run a guardrail stopped: it is the Err of the
// *StopError the run finishes EndStopped with.
type GuardrailError struct {
	Guardrail string
	Stage     GuardStage
	Reason    string
	// CallID and Tool name the call at a tool stage.
	CallID, Tool string
	Details      map[string]string
}

func (e *GuardrailError) Error() string {
	at := e.Stage.String()
	if e.Tool != "" {
		at += " of " + e.Tool
	}
	return fmt.Sprintf("guardrail %s tripped at %s: %s", e.Guardrail, at, e.Reason)
}

func (e *GuardrailError) Unwrap() error { return ErrGuardrailTripped }

// ErrorType names the failure on spans and metrics (error.type).
func (e *GuardrailError) ErrorType() string { return "guardrail_tripped" }

// stop is the StopError a run finishes with when e ends it.
func (e *GuardrailError) stop() *StopError {
	return &StopError{Hook: "guardrail " + e.Guardrail, Reason: e.Reason, Err: e}
}

// correction is the error result of a call a GuardCorrect guardrail tripped on.
func (e *GuardrailError) correction() Output {
	what := "The call of " + e.Tool + " was blocked"
	if e.Stage == GuardToolOutput {
		what = "The result of " + e.Tool + " was withheld"
	}
	return ErrorOutput(fmt.Sprintf("%s by the guardrail %s: %s", what, e.Guardrail, e.Reason))
}

// guard is a guardrail of a run, its spec read once.
type guard struct {
	g    Guardrail
	spec GuardSpec
}

// guardsOf returns the guardrails of a run's chain, in its order.
func guardsOf(h Hooks) []guard {
	c, ok := h.(chain)
	if !ok {
		return nil
	}
	var gs []guard
	for _, h := range c.hs {
		if g, ok := h.(Guardrail); ok {
			spec := g.Guard()
			if spec.Name == "" {
				spec.Name = fmt.Sprintf("%T", g)
			}
			if spec.Stages != 0 {
				gs = append(gs, guard{g: g, spec: spec})
			}
		}
	}
	return gs
}

// applies reports whether g checks stage for call (at a tool stage), parallel or not.
func (g guard) applies(stage GuardStage, tool string) bool {
	if g.spec.Stages&stage == 0 {
		return false
	}
	if stage&(GuardToolInput|GuardToolOutput) != 0 && len(g.spec.Tools) > 0 {
		return slices.Contains(g.spec.Tools, tool)
	}
	return true
}

// check runs one guardrail's check in its span, and returns its trip: a refusal, or a
// failure unless the guardrail fails open. A check cut short because ctx ended is none.
func (r *run) check(ctx context.Context, g guard, in *GuardCheck) *GuardrailError {
	ctx, span := r.startGuard(ctx, g, in.Stage)
	trip, err := safeCheck(ctx, g.g, in)
	switch {
	case err != nil && ctx.Err() != nil:
		trip, err = nil, nil
	case err != nil:
		r.a.log.WarnContext(ctx, "guardrail failed", "guardrail", g.spec.Name, "stage", in.Stage.String(), "run_id", in.RunID, "error", err, "fail_open", g.spec.FailOpen)
		if !g.spec.FailOpen {
			trip = &Trip{Reason: "the guardrail could not check: " + err.Error()}
		}
	}
	var ge *GuardrailError
	if trip != nil {
		ge = &GuardrailError{Guardrail: g.spec.Name, Stage: in.Stage, Reason: cmp.Or(trip.Reason, "refused"), Details: maps.Clone(trip.Details)}
		if in.Stage&(GuardToolInput|GuardToolOutput) != 0 {
			ge.CallID, ge.Tool = in.Call.ID, in.Call.Name
		}
	}
	endGuard(span, ge, err)
	return ge
}

// safeCheck calls Check, turning a panic into an error.
func safeCheck(ctx context.Context, g Guardrail, in *GuardCheck) (trip *Trip, err error) {
	defer func() {
		if p := recover(); p != nil {
			trip, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	return g.Check(ctx, in)
}

// checkAll runs the blocking checks of stage that pick leaves in (nil: all), in order;
// the first trip wins, and what its guardrail does at a tool stage comes with it.
func (r *run) checkAll(stage GuardStage, in *GuardCheck, pick func(guard) bool) (*GuardrailError, GuardAction) {
	for _, g := range r.guards {
		if !g.applies(stage, in.Call.Name) || (pick != nil && !pick(g)) {
			continue
		}
		if ge := r.check(r.ctx, g, in); ge != nil {
			return ge, g.spec.OnToolTrip
		}
	}
	return nil, GuardEnd
}

// inputCheck is the input stage's check of msgs, the new user messages of a step; nil
// when there are none.
func (r *run) inputCheck(msgs []Message) *GuardCheck {
	if len(msgs) == 0 {
		return nil
	}
	texts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		texts = append(texts, m.Text())
	}
	return &GuardCheck{RunInfo: r.quietInfo, Stage: GuardInput, Text: strings.Join(texts, "\n"), Messages: msgs}
}

// newInput returns the user messages a step brings: its steers, and on a run's first
// step the request's trailing user messages.
func (r *run) newInput(steers []Message) []Message {
	if r.step > 0 || r.req.Resume != nil {
		return steers
	}
	i := len(r.req.Messages)
	for i > 0 && r.req.Messages[i-1].Role == RoleUser {
		i--
	}
	return append(slices.Clip(r.req.Messages[i:]), steers...)
}

// parallelChecks are the input stage's parallel checks of one step.
type parallelChecks struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	trip *GuardrailError
}

// startParallel starts the parallel input checks of in; a trip cancels the step's model
// call through cancel. It returns nil when there are none.
func (r *run) startParallel(in *GuardCheck, cancel context.CancelCauseFunc) *parallelChecks {
	var p *parallelChecks
	for _, g := range r.guards {
		if !g.spec.Parallel || !g.applies(GuardInput, "") {
			continue
		}
		if p == nil {
			p = &parallelChecks{}
		}
		p.wg.Go(func() {
			ge := r.check(r.ctx, g, in)
			if ge == nil {
				return
			}
			p.mu.Lock()
			if p.trip == nil {
				p.trip = ge
				cancel(ge)
			}
			p.mu.Unlock()
		})
	}
	return p
}

// wait waits for every check and returns the first trip.
func (p *parallelChecks) wait() *GuardrailError {
	if p == nil {
		return nil
	}
	p.wg.Wait()
	return p.trip
}

// checkOutput runs the output stage on the answer the run is about to complete with. A
// trip withholds it.
func (r *run) checkOutput() *StopError {
	if len(r.guards) == 0 {
		return nil
	}
	in := &GuardCheck{RunInfo: r.quietInfo, Stage: GuardOutput, Text: r.finalText}
	if r.out != nil {
		in.Output = r.out.result
	}
	ge, _ := r.checkAll(GuardOutput, in, nil)
	if ge == nil {
		return nil
	}
	r.finalText = ""
	if r.out != nil {
		r.out.result = nil
	}
	return ge.stop()
}

// checkToolInput runs the tool input stage, before approval or after, on a prepared
// call. A GuardCorrect trip resolves the call with an error result; a GuardEnd trip
// is returned as the run's stop.
func (r *run) checkToolInput(c *pcall, afterApproval bool) *StopError {
	if len(r.guards) == 0 || c.entry == nil || c.entry.output {
		return nil
	}
	in := &GuardCheck{RunInfo: r.quietInfo, Stage: GuardToolInput, Text: c.Call.Arguments, Call: c.Call, Spec: c.entry.spec}
	ge, action := r.checkAll(GuardToolInput, in, func(g guard) bool { return g.spec.AfterApproval == afterApproval })
	if ge == nil {
		return nil
	}
	if action == GuardCorrect {
		c.resolve(ge.correction())
		return nil
	}
	return ge.stop()
}

// checkToolOutput runs the tool output stage on a call's result, as the model would read
// it. A GuardCorrect trip replaces the result with an error; a GuardEnd trip is
// returned as the run's stop.
func (r *run) checkToolOutput(c *pcall) *StopError {
	if len(r.guards) == 0 || !c.executed || c.entry == nil || c.entry.output {
		return nil
	}
	in := &GuardCheck{RunInfo: r.quietInfo, Stage: GuardToolOutput, Text: c.Result.String(), Call: c.Call, Spec: c.entry.spec, Result: c.Result}
	ge, action := r.checkAll(GuardToolOutput, in, nil)
	if ge == nil {
		return nil
	}
	if action == GuardCorrect {
		c.Result = ge.correction()
		return nil
	}
	c.Result = ErrorOutput(fmt.Sprintf("The result of %s was withheld by the guardrail %s.", c.Call.Name, ge.Guardrail))
	return ge.stop()
}

// startGuard starts the span of one check.
func (r *run) startGuard(ctx context.Context, g guard, stage GuardStage) (context.Context, trace.Span) {
	if !r.tel.live {
		return ctx, noSpan
	}
	return r.a.tel.tracer.Start(ctx, spanGuardrail+" "+g.spec.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrGuardrail.String(g.spec.Name), attrGuardStage.String(stage.String()), attrGuardParallel.Bool(g.spec.Parallel && stage == GuardInput)))
}

// endGuard ends a check's span with what it found.
func endGuard(span trace.Span, ge *GuardrailError, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrGuardTripped.Bool(ge != nil))
		if ge != nil {
			span.SetAttributes(attrReason.String(ge.Reason))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorTypeKey.String("guardrail_failed"))
		}
	}
	span.End()
}
