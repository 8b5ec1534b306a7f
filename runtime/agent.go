package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"regexp"
	"time"

	"github.com/agentd/agentd/internal/ids"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Config configures an [Agent].
type Config struct {
	// Name of the agent, as clients name it.
	Name string
	// Model is the default model; required.
	Model Model
	// System is the system prompt, sent before the transcript.
	System string
	// Tools the model may call.
	Tools []Tool
	// Policy is the agent's tool policy; requests may tighten it, never loosen it.
	Policy Policy
	// Hooks are the agent's own hooks; they run after the request's.
	Hooks Hooks
	// Settings tunes every model call.
	Settings CallSettings
	// MaxSteps bounds the steps of one turn; 0 means 25.
	MaxSteps int
	// ParallelTools is how many calls of one step may run at once; 0 or 1 runs them one
	// after another. Only tools whose spec allows it run in parallel.
	ParallelTools int
	// ToolTimeout bounds a call whose tool names no timeout; 0 means one minute.
	ToolTimeout time.Duration
	// MaxToolOutput bounds the bytes of a tool's output the model reads (text or JSON);
	// a longer one is cut, with a note saying so. 0 means 64 KiB, negative no limit.
	MaxToolOutput int
	// OutputSchema, when set, is the JSON Schema of the run's result, an object: the
	// model answers by calling the output tool (OutputToolName) with arguments that
	// match it, after using its other tools if it needs them, and the arguments are
	// RunFinished.Output. It is compiled within CompileSchema's limits.
	OutputSchema json.RawMessage
	// OutputToolName names the output tool; "" means "final_answer". No other tool may
	// have its name.
	OutputToolName string
	// OutputCorrections is how many wrong answers (not matching OutputSchema, or in
	// text) the model may correct before the run ends EndFailed with an
	// *OutputInvalidError. 0 means 2, negative none.
	OutputCorrections int
	// OutputMode says how the model gives a typed answer: OutputAuto (the zero value)
	// asks the provider for JSON matching the schema where the model can
	// (NativeOutputModel), and offers the output tool otherwise.
	OutputMode OutputMode
	// Logger receives warnings (hook failures); nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID returns a fresh id with the given prefix ("run", "msg", "call", …); nil means
	// a random one.
	NewID func(prefix string) string
	// TracerProvider makes the spans of every run (see "Telemetry" in the package doc);
	// nil means otel.GetTracerProvider(), a no-op unless the program installs an SDK.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the runtime's metrics; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// RecordContent puts message content, tool arguments and tool results on the spans
	// (gen_ai.input.messages, gen_ai.output.messages, gen_ai.tool.call.arguments,
	// gen_ai.tool.call.result, hook event values). Off by default: they may hold personal
	// data, so only an operator should turn it on.
	RecordContent bool
}

// Agent runs the agent loop. It holds configuration only and keeps nothing between runs;
// it is safe for concurrent use.
type Agent struct {
	cfg   Config
	tools map[string]*toolEntry
	order []string
	out   *toolEntry // the output tool, for an agent with an OutputSchema
	log   *slog.Logger
	now   func() time.Time
	newID func(string) string
	tel   *telemetry
}

type toolEntry struct {
	tool   Tool
	spec   ToolSpec
	schema *Schema
	output bool // the output tool of a typed agent (output.go)
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// New returns an Agent for cfg.
func New(cfg Config) (*Agent, error) {
	if cfg.Model == nil {
		return nil, errors.New("runtime: Config.Model is required")
	}
	a := &Agent{cfg: cfg, tools: map[string]*toolEntry{}, log: cfg.Logger, now: cfg.Now, newID: cfg.NewID}
	if a.cfg.MaxSteps <= 0 {
		a.cfg.MaxSteps = 25
	}
	if a.cfg.ToolTimeout <= 0 {
		a.cfg.ToolTimeout = time.Minute
	}
	if a.cfg.MaxToolOutput == 0 {
		a.cfg.MaxToolOutput = 64 << 10
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.newID == nil {
		a.newID = ids.New
	}
	a.tel = newTelemetry(cfg, a.log)
	for _, t := range cfg.Tools {
		e, err := newToolEntry(t)
		if err != nil {
			return nil, err
		}
		if _, dup := a.tools[e.spec.Name]; dup {
			return nil, fmt.Errorf("runtime: tool %q registered twice", e.spec.Name)
		}
		a.tools[e.spec.Name] = e
		a.order = append(a.order, e.spec.Name)
	}
	out, err := newOutputEntry(&a.cfg)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if _, dup := a.tools[out.spec.Name]; dup {
			return nil, fmt.Errorf("runtime: tool %q has the name of the output tool (OutputToolName)", out.spec.Name)
		}
		a.out = out
	}
	// A run may ask for a typed result of an agent that has no schema (Request.OutputSchema).
	switch {
	case a.cfg.OutputCorrections == 0:
		a.cfg.OutputCorrections = 2
	case a.cfg.OutputCorrections < 0:
		a.cfg.OutputCorrections = 0
	}
	return a, nil
}

func newToolEntry(t Tool) (*toolEntry, error) {
	spec := t.Spec()
	if !toolNameRE.MatchString(spec.Name) {
		return nil, fmt.Errorf("runtime: tool name %q: want 1 to 64 letters, digits, '_' or '-'", spec.Name)
	}
	if spec.Executor == 0 {
		spec.Executor = ExecutorServer
	}
	var schema *Schema
	if st, ok := t.(SchemaTool); ok {
		schema = st.Schema()
	}
	if schema == nil {
		var err error
		if schema, err = CompileSchema(spec.Parameters); err != nil {
			return nil, fmt.Errorf("runtime: tool %q: %w", spec.Name, err)
		}
	}
	return &toolEntry{tool: t, spec: spec, schema: schema}, nil
}

// Name returns the agent's name.
func (a *Agent) Name() string { return a.cfg.Name }

// OutputSchema returns the schema of the agent's result (Config.OutputSchema), or nil
// for an agent that answers in text.
func (a *Agent) OutputSchema() json.RawMessage {
	if a.out == nil {
		return nil
	}
	return a.out.spec.Parameters
}

// Model returns the agent's default model.
func (a *Agent) Model() Model { return a.cfg.Model }

// MaxSteps returns the agent's step limit per turn.
func (a *Agent) MaxSteps() int { return a.cfg.MaxSteps }

// Policy returns the agent's tool policy.
func (a *Agent) Policy() Policy { return a.cfg.Policy }

// Tools returns the agent's tools in the order they were configured.
func (a *Agent) Tools() []ToolSpec {
	specs := make([]ToolSpec, 0, len(a.order))
	for _, name := range a.order {
		specs = append(specs, a.tools[name].spec)
	}
	return specs
}

// Request is one run of an agent.
type Request struct {
	// RunID and ThreadID name the run and its conversation; empty ones are generated.
	RunID, ThreadID string
	// Caller names who the run is for (an authenticated identity, say): hooks read it in
	// RunInfo, tools through [RunInfoFromContext], to keep what they store apart per
	// caller. Empty means unknown.
	Caller string
	// Messages is the transcript so far, new input included, oldest first. The agent's
	// system prompt goes before it.
	Messages []Message
	// Model replaces the agent's model for this run; nil keeps it.
	Model Model
	// ClientTools are tools the client runs; their Execute waits for the client's result
	// (or returns ErrInterrupt to park the run). They pass policy, approval and hooks like
	// any tool. Their names must not clash with the agent's tools.
	ClientTools []Tool
	// Policy tightens the agent's policy for this run; it cannot loosen it.
	Policy Policy
	// MaxSteps lowers the agent's step limit per turn; 0 or more than the agent's keeps it.
	MaxSteps int
	// OutputSchema asks this run for a typed result, as Config.OutputSchema does for
	// every run of an agent. On an agent that has an OutputSchema of its own, an answer
	// must match both, so a run can only tighten the agent's result; the model is offered
	// both at once ({"allOf": [agent's, run's]}), or the run's alone where either refers
	// within itself ($ref, $defs, $id), which nesting would break. It is compiled within
	// CompileSchema's limits; a schema past them, or not an object schema, is refused with
	// ErrInvalidRequest. Whether a client may set it is the server's to decide.
	OutputSchema json.RawMessage
	// ApprovalTimeout bounds each wait for a decision; past it the request expires and
	// the call is denied. Zero waits as long as the run's context allows.
	ApprovalTimeout time.Duration
	// Approve is asked for each call that needs an approval, after every request of the
	// step was reported. It blocks until a decision, and must return when ctx is done
	// (its deadline is the request's expiry). Returning ErrInterrupt parks the run. Nil
	// parks every call that needs an approval.
	Approve func(ctx context.Context, req ApprovalRequest) (Decision, error)
	// Inbox takes the steers sent while the run goes on; nil means none. Whoever takes
	// the user's input calls Inbox.Send from any goroutine: the run applies each steer
	// it accepted at the next step, or reports it dropped, or, parking, carries it in
	// Pending.Steers. See [Inbox].
	Inbox *Inbox
	// Hooks run before the agent's own hooks.
	Hooks Hooks
	// Resume continues a parked run from RunFinished.Pending: Messages is the history up
	// to the parked run's new messages included, and the calls of Pending.Message are
	// taken up where they stopped, without calling the model first. Calls without a
	// result are prepared again under the agent's policy and hooks as they are now (a
	// tool disabled since the run parked does not run; BeforeTool hooks see the call
	// again), keeping their approval: a call awaiting a decision keeps its approval id,
	// one approved stays approved while its arguments are unchanged.
	Resume *Pending
	// ReservedCallIDs are tool call ids the run must not give a new call: those of a
	// model stream lost with the process that ran it, before the run was taken up
	// elsewhere (clients saw them end cancelled). A model that returns one of them, or
	// the id of a call earlier in the transcript, has its call renamed (a new id, in the
	// events and the transcript alike), so that no id names two calls.
	ReservedCallIDs []string
	// Metadata is passed to hooks.
	Metadata map[string]any
	// SpanLinks are added to the run's span, invoke_agent; the service links the span of
	// the RPC that carries the run. The run's span is a child of the span in the context
	// given to Run, or the root of a new trace when that context has none.
	SpanLinks []trace.Link
}

// ApprovalRequest asks for a decision on a call.
type ApprovalRequest struct {
	ID   string
	Call ToolCall
	Spec ToolSpec
	// Editable says whether the decision may carry edited arguments.
	Editable bool
	// AutoApprovable says whether a client's auto-approve policy may approve the call
	// (the tool's approval is ApprovalAsk, not ApprovalAlways).
	AutoApprovable bool
	// ExpiresAt is zero when the request does not expire.
	ExpiresAt time.Time
	Reason    string
}

// Decision answers an ApprovalRequest.
type Decision struct {
	// Outcome is OutcomeApproved or OutcomeDenied.
	Outcome Outcome
	// EditedArguments, with OutcomeApproved, replaces the call's arguments; they are
	// validated again, and run byte for byte.
	EditedArguments string
	Reason          string
	// DecidedBy defaults to DecidedByClient.
	DecidedBy DecidedBy
}

// Steer is user input added while the run goes on.
type Steer struct {
	// Seq identifies the steer in SteerApplied (the client's sequence number).
	Seq     int64
	Message Message
	// Interrupt marks an interrupting steer: Inbox.Send stops the current step for it.
	Interrupt bool
}

// Pending is what a parked run waits for, and everything needed to take it up again.
type Pending struct {
	// Step, Turn and StepInTurn are the counters of the step the run parked in.
	Step, Turn, StepInTurn int
	// StepID is the id of that step.
	StepID string
	// Message is the step's assistant message. It is not in the parked run's new
	// messages: the resumed run reports it, as its calls finally ran.
	Message Message
	// Calls are the calls of Message, in order. Empty when the run parked before a model
	// call (shutdown): resuming calls the model.
	Calls []PendingCall
	// Steers were queued and not yet applied when the run parked: the resumed run applies
	// them at its next step, as this run would have.
	Steers []Steer
	// OutputErrors say, for an agent with an OutputSchema, what was wrong with each
	// answer the run refused so far: the resumed run counts them against its
	// corrections.
	OutputErrors []string
}

// CallState is where a pending call stands.
type CallState uint8

// The states of a pending call.
const (
	// CallDone: the call has its result.
	CallDone CallState = iota + 1
	// CallAwaitingApproval: the call waits for a decision on ApprovalID.
	CallAwaitingApproval
	// CallReady: the call may run (approved, or needing no approval); for a client tool
	// it waits for the client's result.
	CallReady
)

// PendingCall is one call of a parked step.
type PendingCall struct {
	// Call holds the arguments the call runs with.
	Call       ToolCall
	State      CallState
	ApprovalID string
	// Reason is why an approval is needed.
	Reason string
	// Approved records that a decision approved the call with Call.Arguments: a resumed
	// run that still requires an approval for it does not ask again.
	Approved bool
	// Result is set for CallDone.
	Result Output
}

// AwaitingApproval returns the calls waiting for a decision.
func (p *Pending) AwaitingApproval() []PendingCall {
	var out []PendingCall
	for _, c := range p.Calls {
		if c.State == CallAwaitingApproval {
			out = append(out, c)
		}
	}
	return out
}

// Run executes the loop and reports it as a sequence of events; consume it with
// for ev, err := range agent.Run(ctx, req). The sequence is single-use; breaking out of it
// cancels the model call and the running tools.
//
// The first event is *RunStarted and the last *RunFinished, which carries the outcome.
// A non-nil error comes alone, before any event, for a request Run refuses (it wraps
// ErrInvalidRequest); failures of the run itself are reported by RunFinished.
func (a *Agent) Run(ctx context.Context, req *Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if req != nil {
			// However Run returns (the run refused, finished, or left by its consumer
			// before it began), the inbox takes no more steers: none would be applied.
			defer req.Inbox.close()
		}
		r, err := a.newRun(ctx, req, yield)
		if err != nil {
			yield(nil, err)
			return
		}
		defer r.cancel(nil)
		// A run that unwinds before finish (its consumer stopped reading) still ends its
		// span and its metrics.
		defer r.endTelemetry(EndCancelled, nil)
		r.execute()
	}
}
