package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/internal/ids"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/continuation"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// Mode says which RPC a run serves.
type Mode uint8

const (
	ModeRun     Mode = iota // bidi: the client answers on the stream
	ModeStart               // server stream: nothing comes back from the client
	ModeExecute             // unary: the outcome only
	// ModeChild: a sub-agent's run, started by its parent's call, which waits for it.
	// Its clients are its tree's: the root's Run streams answer it (tree).
	ModeChild
)

// errClientCancel is the cause of a run the client cancelled with a cancel message.
var errClientCancel = errors.New("cancelled by the client")

// session is one run: started by an RPC, owned by the server. The run's loop runs on a
// goroutine of its own (on the RPC's for ExecuteRun) and journals its events; every
// stream attached to the run (the one that started it, and any that attached since)
// sends them from the journal through its own outbox, and the Run streams among them
// feed decisions, steers, client tool results and cancels into it, as SendRunInput does.
//
// Events and acks are journaled under mu, together with every change to the input state
// below: an input_ack always comes before any event its message causes, on every
// stream. No lock is held across a Send, which flow control may block while acks and
// cancels must still be handled. Only the run's goroutine waits for a client, the one
// that started the run while it stays attached (outbox.wait, with mu not held): that
// holds the model back when it reads slowly.
type session struct {
	srv    *Manager
	mode   Mode
	entry  *Agent
	ctx    context.Context
	cancel context.CancelCauseFunc
	policy agentdv1.ApprovalPolicy
	runID  string
	thread string
	reqID  string
	// owner is the identity that started the run: only it may attach or send input.
	owner string
	// lineage places the run in its tree: zero for a root, set for a child (children.go).
	lineage lineage
	// childEvents is which events of its children the run's journal shows; forward,
	// set for a child before it runs, journals one of its events in its parent's, and
	// is called under mu (a child's lock is taken before its parent's, never after).
	childEvents agentdv1.ChildEvents
	forward     func(ev *agentdv1.RunEvent)
	// tree is a child's root run, whose clients answer the whole tree, and parentRun
	// the run whose call started it; both nil for a root. treeRuns are the runs below
	// this one going on now, by id, which input sent to this one reaches by the ids of
	// their approvals (and a steer by run id): under mu.
	tree, parentRun *session
	treeRuns        map[string]*session
	// routes name the run below this one that asked each approval its streams showed
	// (as child_event), by approval id: a decision sent here goes there, whether that
	// run goes on, is parked, or this one has just woken. Under mu.
	routes map[string]string
	// kids are the children this run's calls started or waited for that have not
	// ended: those its end leaves parked are cancelled (endKids). Under mu.
	kids map[string]*session
	// childrenStarted counts the child runs the run's calls started; childUsage is what
	// its ended children and theirs used, for its run_finished (tree_usage), by run
	// (childSeen). Under mu. treeTokens, on a root, adds up the tokens its tree's ended
	// runs spent, for Config.MaxTreeTokens.
	childrenStarted int
	childUsage      []*agentdv1.ChildUsage
	childSeen       map[string]bool
	treeTokens      atomic.Int64
	// detach says what the run does when the stream that started it goes away: true
	// goes on (ON_DISCONNECT_CONTINUE), false cancels.
	detach bool
	// caller is the key of the per-caller run limit; empty when none applies.
	caller string
	// stopAfter unhooks the session from the server's shutdown.
	stopAfter func() bool
	// started, if set, is called once run_started has been journaled.
	started func()
	// traceID is the run's trace id, from run_started; set on the run's goroutine.
	traceID string

	// Set up before each stretch of the run starts, read-only during it (tools guards
	// the schemas it compiles itself).
	tools      runTools
	transcript *continuation.Hasher // history, then each step's messages
	history    *continuation.Hasher // the history alone

	done   chan struct{} // closed when the run has ended and its journal closed
	result *agentdv1.RunFinished
	status error // the status the RPC that started the run ends with, once done

	mu    sync.Mutex
	phase phase // where the run is in its life here (phase.go)
	// phaseCh, when set, is closed at the next change of phase (phaseChangedLocked).
	phaseCh chan struct{}
	// The run's three parts, each under mu: the streams attached to it, what its
	// clients send it and it waits for, and what must survive a crash.
	attachments
	inputs
	durable

	// Parking (park.go): a run that waits for a client with nobody attached who can
	// answer parks in the store, with nothing running, and wakes on the next input.
	callerName string        // Config.Caller's name for the run's caller
	parkDone   chan struct{} // closed when a park in progress is over, parked or not
	parked     *parkedRun    // what the run waits for, in phaseParked
	parkHold   *parkHold     // the park's place in Server.parkedLoad, from park to its end
	// toPark, parkedNew and parkedUsage are a park prepared, which publishPark makes the
	// run's once its stretch has unwound.
	toPark      *parkedRun
	wakeErr     error // why the last wake failed, for the refusal of what it was for
	parkedNew   []*agentdv1.Message
	parkedUsage *agentdv1.Usage
	woken       *wakeFilter // set while a woken run re-reports what the journal has
	wakeMu      sync.Mutex  // held while the run wakes or expires
	// wakeCtx carries the values (hooks, trace, caller) of the RPC that last started or
	// woke the run, for a wake nobody's RPC asks for.
	wakeCtx context.Context

	// moved says this server stopped running the run, another replica holding it now
	// (fleet.go): not a phase, as a run in any phase may be let go of.
	moved    bool
	handOver bool // the run parks to be taken up at once by another replica (drain)
	// ready, while the run is taken up, is closed once it can take input.
	ready chan struct{}
}

// attachments are the streams attached to a run. Each sends the run's journal through
// an outbox of its own; the Run streams among them can answer the run (answerers), and
// while none can, a wait for a client parks the run.
type attachments struct {
	primary   *journal.Outbox              // the starting stream's, while it stays attached
	outs      map[*journal.Outbox]struct{} // every attached stream's, primary included
	answerers int                          // Run streams attached that can answer (their receive goroutines)
	nobody    chan struct{}                // closed when answerers falls to 0; nil while it is 0
}

// inputs are what the run's clients send it and what it waits for from them: the
// approvals and client tool calls it asked for, steers, answers given before it asked,
// and SendRunInput's inputs by key.
type inputs struct {
	inputDone       bool // the starting client half-closed, or the RPC takes no input
	inputDoneCh     chan struct{}
	approvals       map[string]*answerSlot[runtime.Decision]
	clientCalls     map[string]*answerSlot[runtime.Output]
	inbox           *runtime.Inbox // the stretch's steers: the start's input, then the client's
	steerLimit      *rate.Limiter
	clientCancelled bool
	preDecisions    map[string]runtime.Decision
	preResults      map[string]runtime.Output
	keyed           keyedInputs // SendRunInput's inputs, by client_key
	// grantOf names the grant that decided, or that a decision made, by approval id;
	// scopeOf the scope of a client's decision, by approval id.
	grantOf map[string]string
	scopeOf map[string]agentdv1.ApprovalScope
	// preScopes are the wider scopes of a resume's decisions (startPlan.preScopes).
	preScopes map[string]agentdv1.ApprovalScope
	// approvalDue are the expiries of the approvals a woken run asks again: they expire
	// when they first would have.
	approvalDue map[string]time.Time
}

// durable is what of the run must survive a crash: its journal and the store's lease on
// it, and what its checkpoints carry, from which a replica takes the run up.
type durable struct {
	seq     int64
	journal *journal.Journal
	writing journal.Writing // the journal writer's state of the run
	// lease is the run's lease in the store while this server runs it (fleet.go).
	lease store.Lease
	// steers are the steers the inbox took, or the run carried, that the run has not
	// applied (nor dropped) yet, in the order it applies them: a checkpoint carries
	// them, so that a replica taking the run up from it applies them still.
	steers []runtime.Steer
	step   runtime.StepStarted // the last step started, for checkpoints
	usage  *agentdv1.Usage     // as of the last step finished
	// threaded is the run's thread start (history THREAD); nil for history CLIENT.
	threaded *threadStart
	// historyMsgs are the history the run started from; priorNew and priorUsage what
	// the run did before it last parked, which its end reports with what it does after.
	historyMsgs []*agentdv1.Message
	priorNew    []*agentdv1.Message
	priorUsage  *agentdv1.Usage
	newSoFar    []*agentdv1.Message // the stretch's new messages, for a store on disk's checkpoints
	// reservedCalls are the ids of calls a lost stretch's model stream started, which
	// the run's next calls must not take.
	reservedCalls []string
	// grants are the run's grants of scope RUN (grants.go), sealed in its continuation.
	grants []*agentdv1.Grant
}

// Start checks a RunSpec and prepares its run, which the engine then keeps: any stream
// its owner opens may attach to it. It says what the start came to: a new run, or a run
// resumed before, or a thread's active run steered into. Its errors are *Error, and
// nothing has been sent yet.
func (s *Manager) Start(ctx context.Context, mode Mode, spec *agentdv1.RunSpec) (*Started, error) {
	if s.Draining() {
		return nil, drainingError()
	}
	if spec == nil {
		return nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "start", Description: "must be set"}})
	}
	var ct *opened
	if len(spec.GetContinuation()) > 0 {
		var err error
		if ct, err = s.openContinuation(spec.GetContinuation()); err != nil {
			return nil, continuationStatus(err)
		}
		// Checked before anything else of the start: another caller's resume must not
		// take the run's id in the store, which would leave its owner a run it cannot see.
		if err := ct.CheckCaller(s.identity(ctx)); err != nil {
			return nil, continuationStatus(err)
		}
	}
	spec, threaded, err := s.withThread(ctx, mode, spec, ct)
	if err != nil {
		return nil, err
	}
	entry, err := s.agentFor(spec, ct)
	if err != nil {
		return nil, err
	}
	plan, err := planStart(ctx, startInput{spec: spec, ct: ct, agent: entry, limits: &s.cfg, mode: mode})
	if err != nil {
		return nil, err
	}
	caller := ""
	if s.cfg.Caller != nil {
		caller = s.cfg.Caller(ctx)
	}
	counted, err := s.admit(caller)
	if err != nil {
		return nil, err
	}
	lin, _ := ctx.Value(lineageKey{}).(lineage)
	runID := cmp.Or(lin.childID, ids.New("run"))
	if ct != nil {
		// A continuation resumes once: its run's id is the continuation's, so that the
		// store refuses a second run of it, which attaches to the first instead.
		runID = resumedRunID(spec.GetContinuation())
	}
	ss := s.sessionFor(mode, entry, runID, spec.GetRequestId(), plan)
	ss.caller, ss.threaded, ss.callerName, ss.lineage = counted, threaded, caller, lin
	ss.childEvents = spec.GetConfig().GetChildEvents()
	if ct != nil {
		ss.grants = ct.Grants // sealed: a client cannot add one
	}
	req := ss.request(plan, caller)
	// The hooks the server's interceptors put on the RPC's context run first, in the
	// order they were installed; the agent's own hooks follow (runtime.Config.Hooks).
	if hs := hooks.FromContext(ctx); len(hs) > 0 {
		req.Hooks = runtime.Chain(s.log, hs...)
	}
	ss.owner = s.identity(ctx)
	if other, err := s.createRun(ctx, ss, spec); err != nil || other != nil {
		s.unadmit(counted)
		return other, err
	}
	if lin.parent == "" {
		ctx, req.SpanLinks = s.traceContext(ctx)
	} // else the child's span is a child of its parent's call's (the tool span ctx carries)
	if ss.detach {
		// The run outlives the RPC that started it, with the RPC's values (trace,
		// hooks, caller), not its end.
		ctx = context.WithoutCancel(ctx)
		ss.wakeCtx = ctx
	}
	var cancel context.CancelCauseFunc
	ss.ctx, cancel = context.WithCancelCause(ctx)
	ss.cancel = cancel
	ss.stopAfter = context.AfterFunc(s.stopRuns, func() { cancel(context.Cause(s.stopRuns)) })
	s.keep(ss)
	return &Started{Outcome: StartedNew, RunID: runID, ss: ss, req: req}, nil
}

// agentFor returns the agent a start names, or its continuation's, or the default one.
func (s *Manager) agentFor(spec *agentdv1.RunSpec, ct *opened) (*Agent, error) {
	name := spec.GetAgent()
	if name == "" && ct != nil {
		name = ct.Agent
	}
	entry, err := s.agents.Agent(name)
	if err == nil && (entry == nil || entry.Runtime == nil) {
		err = fmt.Errorf("%w: %q", ErrAgentNotFound, name)
	}
	if err != nil {
		return nil, statusError(NotFound, reasonAgentNotFound, err.Error(), map[string]string{"agent": name})
	}
	return entry, nil
}

// admit counts a run against the caller's share of the server, then against the
// server's limit. It returns the caller it counted, which unadmit releases: empty
// when no per-caller limit applies.
func (s *Manager) admit(caller string) (string, error) {
	counted := ""
	if caller != "" && s.cfg.MaxRunsPerCaller > 0 {
		if !s.callers.add(caller, 1, s.cfg.MaxRunsPerCaller) {
			return "", statusError(ResourceExhausted, reasonTooManyCallerRuns, fmt.Sprintf("caller %s has %d runs in progress, as many as the server allows one caller: start this one when one of them ends", caller, s.cfg.MaxRunsPerCaller), map[string]string{"limit": strconv.Itoa(s.cfg.MaxRunsPerCaller)})
		}
		counted = caller
	}
	if n := s.active.Add(1); n > int64(s.cfg.MaxConcurrentRuns) {
		s.active.Add(-1)
		s.callers.sub(counted, 1)
		return "", statusError(ResourceExhausted, reasonTooManyRuns, fmt.Sprintf("the server is running its limit of %d runs: retry later or elsewhere", s.cfg.MaxConcurrentRuns), nil)
	}
	// Checked again where the run is counted: a start that passed the first check as
	// draining began is refused like any start after it.
	s.admitMu.RLock()
	defer s.admitMu.RUnlock()
	if s.Draining() {
		s.active.Add(-1)
		s.callers.sub(counted, 1)
		return "", drainingError()
	}
	s.runs.Add(1)
	return counted, nil
}

// drainingError refuses a run on a server that is draining.
func drainingError() error {
	return statusError(Unavailable, reasonDraining, "the server is draining: start the run on another replica", nil)
}

// sessionFor returns the session of a planned run, before its context is set.
func (s *Manager) sessionFor(mode Mode, entry *Agent, runID, reqID string, plan *startPlan) *session {
	thread := plan.thread
	if thread == "" {
		thread = ids.New("thread")
	}
	ss := s.baseSession(mode, entry, runID, thread, reqID, plan.onDisconnect)
	ss.policy, ss.tools, ss.transcript, ss.history = plan.policy, plan.tools, plan.transcript, plan.history
	ss.preDecisions, ss.preResults, ss.preScopes = plan.preDecisions, plan.preResults, plan.preScopes
	if (mode == ModeRun && ss.detach) || mode == ModeChild || s.gated {
		// What a run that parks, or that a store on disk recovers, starts again from.
		ss.historyMsgs = plan.historyMsgs
	}
	ss.journal = journal.New(s.olderFrames(ss.runID), s.gated)
	ss.setInbox(&s.cfg, plan.steers, plan.req.Resume)
	return ss
}

// baseSession returns what every session of a run starts with, whether the run starts
// here or a stopped process left it (shell): no answer slots yet, no stream attached,
// the input closed for an RPC that takes none.
func (s *Manager) baseSession(mode Mode, entry *Agent, runID, thread, reqID string, onDisconnect agentdv1.OnDisconnect) *session {
	ss := &session{
		srv: s, mode: mode, entry: entry, runID: runID, thread: thread, reqID: reqID,
		detach:      mode != ModeExecute && mode != ModeChild && onDisconnect != agentdv1.OnDisconnect_ON_DISCONNECT_CANCEL,
		done:        make(chan struct{}),
		attachments: attachments{outs: map[*journal.Outbox]struct{}{}},
		inputs: inputs{
			inputDoneCh: make(chan struct{}),
			approvals:   map[string]*answerSlot[runtime.Decision]{},
			clientCalls: map[string]*answerSlot[runtime.Output]{},
			steerLimit:  rate.NewLimiter(rate.Limit(s.cfg.SteerRate), s.cfg.SteerBurst),
			grantOf:     map[string]string{},
			scopeOf:     map[string]agentdv1.ApprovalScope{},
		},
	}
	if mode != ModeRun {
		ss.inputDone = true
		close(ss.inputDoneCh)
	}
	return ss
}

// setInbox gives the session a stretch's inbox (newInbox), and the steers it has yet
// to apply: the resumed run's carried ones first, as the runtime takes them.
func (ss *session) setInbox(cfg *Config, steers []runtime.Steer, resume *runtime.Pending) {
	ss.inbox = newInbox(cfg, steers, resume)
	ss.steers = nil
	if resume != nil {
		ss.steers = append(ss.steers, resume.Steers...)
	}
	ss.steers = append(ss.steers, steers...)
}

// newInbox returns a stretch's inbox: the start's input, then the client's steers, within
// the bounds, which are the client's steers' only. A woken run gets a new one: the
// runtime closes a stretch's inbox as it returns.
func newInbox(cfg *Config, steers []runtime.Steer, resume *runtime.Pending) *runtime.Inbox {
	in := &runtime.Inbox{}
	for _, st := range steers {
		in.Send(st)
	}
	if resume != nil {
		// A resumed run's steers, not applied yet, count against the bounds: else a run
		// that parks and wakes would take the bounds' worth again each time.
		in.Carry(resume.Steers)
	}
	in.MaxSteers, in.MaxBytes = cfg.MaxQueuedSteers, cfg.MaxQueuedSteerBytes
	return in
}

// request returns the run's runtime.Request: the plan's, with the session's callbacks
// and the client's tools, whose Execute waits on the session.
func (ss *session) request(plan *startPlan, caller string) *runtime.Request {
	req := plan.req
	req.RunID, req.ThreadID, req.Caller = ss.runID, ss.thread, caller
	req.Inbox, req.Approve = ss.inbox, ss.approve
	req.ReservedCallIDs = ss.reservedCalls
	for _, ts := range plan.clientTools {
		req.ClientTools = append(req.ClientTools, ss.clientTool(ts, plan.tools.schemas[ts.Name]))
	}
	return &req
}

// unadmit releases a run's place, which admit counted.
func (s *Manager) unadmit(caller string) {
	s.callers.sub(caller, 1)
	s.active.Add(-1)
	s.runs.Done()
}

// sendLocked stamps one event and journals it. It never blocks: the order events are
// journaled in, under mu, is the order every stream sends them in. A delta the journal
// may merge goes through sendDelta instead.
func (ss *session) sendLocked(ev *agentdv1.RunEvent) error {
	if ss.moved {
		return errRunMoved // another replica runs it: this one adds nothing
	}
	ss.stampLocked(ev)
	f, err := journal.MarshalFrame(ev)
	if err != nil {
		// Nothing agentd builds fails to marshal: a fault, which ends the run.
		ss.srv.log.Error("marshaling an event failed", "run_id", ss.runID, "error", err)
		ss.seq--
		return err
	}
	ss.journal.Append(f)
	ss.srv.writer.Mark(ss)
	if ss.forward != nil {
		ss.forward(ev)
	}
	return nil
}

// stampLocked gives ev the next seq, the run's id and the time.
func (ss *session) stampLocked(ev *agentdv1.RunEvent) {
	ss.seq++
	ev.Seq = ss.seq
	ev.RunId = ss.runID
	ev.Time = timestamppb.New(ss.srv.now())
}

// sendEvent journals one of the run's events. Called on the run's goroutine, it waits
// while the stream that started the run is behind, which holds the model back.
func (ss *session) sendEvent(ev *agentdv1.RunEvent) error {
	ss.mu.Lock()
	err := ss.sendLocked(ev)
	primary, ctx := ss.primary, ss.ctx
	ss.mu.Unlock()
	if err == nil && primary != nil {
		err = primary.Wait(ctx)
	}
	return err
}

// runCtx returns the context of the run's current stretch (a parked run's next one is
// another), and its cancel.
func (ss *session) runCtx() (context.Context, context.CancelCauseFunc) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.ctx, ss.cancel
}

// input names a client input for its ack: a message on a stream, by its client_seq and
// the stream's attachment_id, or SendRunInput's, by its client_key.
type input struct {
	seq    int64
	key    string
	stream string
	// replay is the ack of an input that the run acked before it was taken up, and is
	// acted on again: it is not acked again.
	replay *ackedInput
}

// ackedInput is an input_ack a run journaled, and its seq.
type ackedInput struct {
	ack *agentdv1.InputAck
	seq int64
}

// ackLocked answers a client input, and returns the ack's seq.
func (ss *session) ackLocked(in input, refusal *agentdv1.RunError) int64 {
	if r := in.replay; r != nil {
		ss.keyed.answered(in.key, r.ack, r.seq)
		return r.seq
	}
	ack := &agentdv1.InputAck{ClientSeq: in.seq, ClientKey: in.key, AttachmentId: in.stream, Accepted: refusal == nil, Error: refusal}
	if ss.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_InputAck{InputAck: ack}}) != nil {
		return 0
	}
	if in.key != "" {
		ss.keyed.answered(in.key, ack, ss.seq)
	}
	return ss.seq
}

// The run as the journal writer sees it (journal.Run).

func (ss *session) Lock()                     { ss.mu.Lock() }
func (ss *session) Unlock()                   { ss.mu.Unlock() }
func (ss *session) Journal() *journal.Journal { return ss.journal }
func (ss *session) Writing() *journal.Writing { return &ss.writing }
func (ss *session) ID() string                { return ss.runID }

// LeaseLocked returns the run's lease, and whether it is still run here.
func (ss *session) LeaseLocked() (store.Lease, bool) { return ss.lease, !ss.moved }
