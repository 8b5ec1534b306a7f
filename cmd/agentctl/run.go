package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// statusTick is how often the status line's spinner turns.
const statusTick = 100 * time.Millisecond

// runAgent is `agentctl run`: it starts (or resumes) a run on a Run stream and shows it
// until it finishes.
func runAgent(ctx context.Context, client agentdv1.AgentServiceClient, cfg runConfig, e env) int {
	var lines *lineReader
	if !cfg.json {
		lines = newLineReader(e.stdin)
	}
	defer lines.stop()
	s := newSession(cfg, e, lines)
	spec := &agentdv1.RunSpec{
		Agent:    cfg.agent,
		ThreadId: cfg.thread,
		Input:    cfg.prompt,
		History:  agentdv1.History(cfg.history),
		Config:   &agentdv1.RunConfig{ApprovalPolicy: s.policy()},
	}
	spec.Config.OutputSchema, _ = cfg.schema() // checked with the flags
	if cfg.resume != "" {
		var code int
		if spec, code = s.resumeSpec(ctx, cfg.resume); spec == nil {
			return code
		}
	}
	return s.run(ctx, client, spec)
}

// stage is where a person is in answering an approval.
type stage int

const (
	stageNone   stage = iota // no approval is being asked: a line is a steer
	stageDecide              // approve? [y]es/[n]o/[e]dit
	stageReason              // the reason of a denial
	stageInline              // edited arguments, typed on one line
)

// session is one run on a Run stream, started (`agentctl run`, a turn of `agentctl chat`)
// or attached to (`agentctl attach`): the stream, the terminal, and what the run showed
// so far. Everything but the receiving goroutine runs on the goroutine of serve, so
// nothing in it is locked.
type session struct {
	cfg    runConfig
	e      env
	scr    *screen
	status *statusLine
	lines  *lineReader // nil with --json: nothing is read
	att    *attachment // set when the stream attaches to a run instead of starting one

	stream     agentdv1.AgentService_RunClient
	clientSeq  int64
	sendClosed bool // half-closed (or broken): nothing more goes out
	inputEnded bool // stdin ended
	cancelled  bool // Ctrl-C (or /cancel) sent a cancel
	quit       bool // Ctrl-C ended agentctl's part: it quit, or detached
	lastSeq    int64

	// queue holds the approvals waiting for the person's answer; the first is being asked.
	queue     []*agentdv1.ApprovalRequested
	stage     stage
	decide    func(*agentdv1.ApprovalRequested, *agentdv1.ApprovalDecision)
	requested map[string]*agentdv1.ApprovalRequested // every approval seen, by id
	// askedBy names the sub-agent whose run asked an approval, by id: a child's
	// approvals come up the root's stream, and are decided there.
	askedBy map[string]string
	// held are approvals not shown yet: under --auto-approve the server asks first and
	// then, for the calls its policy approves, answers at once (a step asks all its
	// approvals, then answers each); the requests are held until an event other than
	// their answers comes, or heldFor passes, so that only what the policy leaves to the
	// person is asked. heldC fires at heldFor.
	held  []*agentdv1.ApprovalRequested
	heldC <-chan time.Time
	// answeredIDs holds the approvals the person decided; a resumed run announces its
	// pending approvals again before it applies the decisions it was resumed with.
	answeredIDs map[string]bool
	sent        map[int64]sent // decisions and steers awaiting their input_ack

	calls       map[string]*call  // tool calls by id
	running     map[string]string // tool calls executing, id to name
	history     []*agentdv1.Message
	historyMode agentdv1.History // the start's RunSpec.history, saved with a parked run
	started     *agentdv1.RunStarted
	begin       time.Time
	// startedAt is the time of run_started, on the server: an attached run's duration is
	// measured from it.
	startedAt time.Time
}

// sent is a client message whose input_ack is still to come.
type sent struct {
	approval *agentdv1.ApprovalRequested // a decision on it
	steer    string                      // a steer with this text
}

// call is what the screen knows of a tool call.
type call struct {
	name      string
	argsShown bool
}

// newSession returns a session that reads the person's answers and steers from lines
// (nil: nothing is read).
func newSession(cfg runConfig, e env, lines *lineReader) *session {
	st := &statusLine{w: e.stderr, enabled: e.stderrTTY && !cfg.json, now: time.Now}
	s := &session{
		cfg:         cfg,
		e:           e,
		status:      st,
		scr:         newScreen(e.stdout, useColor(e), st),
		requested:   map[string]*agentdv1.ApprovalRequested{},
		askedBy:     map[string]string{},
		answeredIDs: map[string]bool{},
		sent:        map[int64]sent{},
		calls:       map[string]*call{},
		running:     map[string]string{},
		lines:       lines,
	}
	s.decide = s.sendDecision
	return s
}

// useColor reports whether stdout shows colours: it is a terminal, and neither NO_COLOR
// nor TERM=dumb says otherwise.
func useColor(e env) bool {
	return e.stdoutTTY && e.getenv("NO_COLOR") == "" && e.getenv("TERM") != "dumb"
}

// policy is the approval policy the run asks for: ASK (the Run default) when a person
// answers, INTERRUPT with --json, AUTO_APPROVE with --auto-approve.
func (s *session) policy() agentdv1.ApprovalPolicy {
	switch {
	case s.cfg.autoApprove:
		return agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE
	case s.cfg.json:
		return agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT
	}
	return agentdv1.ApprovalPolicy_APPROVAL_POLICY_UNSPECIFIED
}

// run starts a run of spec on a Run stream and shows it until it finishes.
func (s *session) run(ctx context.Context, client agentdv1.AgentServiceClient, spec *agentdv1.RunSpec) int {
	s.history, s.historyMode = spec.GetMessages(), spec.GetHistory()
	return s.serve(ctx, client, &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
}

// verb names what the session does, in its error messages.
func (s *session) verb() string {
	if s.att != nil {
		return "attach"
	}
	return "run"
}

// runID is the id of the session's run, once known.
func (s *session) runID() string {
	if s.att != nil {
		return s.att.runID
	}
	return s.started.GetRunId()
}

// opened reports whether the stream carries a run: agentd answered its first message with
// run_started, or with attached.
func (s *session) opened() bool {
	return s.started != nil || (s.att != nil && s.att.snap != nil)
}

// serve holds the Run stream whose first message is first: one goroutine receives events,
// this one shows them, reads the terminal, sends decisions, steers and the cancel, and
// turns the spinner.
func (s *session) serve(ctx context.Context, client agentdv1.AgentServiceClient, first *agentdv1.RunRequest) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Run(ctx)
	if err != nil {
		fmt.Fprintf(s.e.stderr, "agentctl: %s: %s\n", s.verb(), s.e.describeErr(err))
		return exitFailed
	}
	s.stream = stream
	s.begin = time.Now()
	s.send(first)

	events := make(chan *agentdv1.RunEvent)
	var recvErr error
	go func() {
		defer close(events)
		for {
			resp, err := stream.Recv()
			if err != nil {
				recvErr = err
				return
			}
			events <- resp.GetEvent() // taken until close: run drains the channel as it returns
		}
	}()
	defer func() {
		cancel()
		for range events { // join the receiving goroutine: the cancel ends its Recv
		}
	}()

	var tick <-chan time.Time
	if s.status.enabled {
		t := time.NewTicker(statusTick)
		defer t.Stop()
		tick = t.C
	}
	s.wantLine()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if s.att != nil && errors.Is(recvErr, io.EOF) && s.att.endedBefore() {
					return s.finishedEarlier(ctx, client)
				}
				return s.broken(recvErr)
			}
			s.lastSeq = max(s.lastSeq, ev.GetSeq())
			s.settleHeld(ev)
			if code, done := s.onEvent(ctx, ev); done {
				return code
			}
		case l := <-s.lines.recv():
			s.lines.took(l)
			s.onLine(ctx, l)
		case <-s.e.interrupts:
			if s.onInterrupt() {
				return exitCancel
			}
		case <-s.heldC:
			s.releaseHeld()
		case <-tick:
			if s.scr.col0 {
				s.status.tick()
			}
		}
	}
}

// send sends a client message numbered with the next client_seq and returns the number,
// or 0 when nothing can be sent any more (the stream's end says why, on the receive side).
func (s *session) send(req *agentdv1.RunRequest) int64 {
	if s.sendClosed {
		return 0
	}
	s.clientSeq++
	req.ClientSeq = s.clientSeq
	if err := s.stream.Send(req); err != nil {
		s.sendClosed = true
		return 0
	}
	return s.clientSeq
}

// halfClose tells agentd that nothing more comes: the run goes on, and parks when it
// needs an answer.
func (s *session) halfClose() {
	if s.stream == nil || s.sendClosed {
		return
	}
	s.sendClosed = true
	_ = s.stream.CloseSend()
}

// onInterrupt handles Ctrl-C: the first cancels the run, the next quits; on an attached
// stream it detaches at once, leaving the run to go on. It reports whether to quit.
func (s *session) onInterrupt() (quit bool) {
	if s.att != nil {
		s.quit = true
		s.status.set("")
		s.scr.newline()
		fmt.Fprintf(s.e.stderr, "agentctl: detached; the run goes on. Attach again with: %s\n", s.e.command("attach", s.runID(), "--after", strconv.FormatInt(s.lastSeq, 10)))
		return true
	}
	if s.cancelled || s.sendClosed {
		s.quit = true
		s.status.set("")
		s.scr.newline()
		fmt.Fprintln(s.e.stderr, "agentctl: quit")
		return true
	}
	s.cancelRun("Ctrl-C in agentctl")
	return false
}

// cancelRun sends a cancel: the run ends CANCELLED, and agentctl shows it end.
func (s *session) cancelRun(reason string) {
	s.cancelled = true
	s.queue, s.stage, s.scr.prompt = nil, stageNone, ""
	s.send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: reason}}})
	note := "cancelling the run (Ctrl-C again quits)"
	if s.att != nil {
		note = "cancelling the run (Ctrl-C detaches)"
	}
	if s.cfg.json {
		fmt.Fprintln(s.e.stderr, "agentctl: "+note)
	} else {
		s.status.set("")
		s.scr.line(s.scr.yellow(note))
	}
}

// broken reports a stream that ended without run_finished. When the stream was lost
// rather than ended by agentd, the run goes on on the server, and agentctl says how to
// follow it again from the last event it showed.
func (s *session) broken(err error) int {
	s.status.set("")
	s.scr.newline()
	switch {
	case !s.opened() && err != nil:
		fmt.Fprintf(s.e.stderr, "agentctl: %s: %s\n", s.verb(), s.e.describeErr(err))
	case err == nil || errors.Is(err, io.EOF):
		fmt.Fprintln(s.e.stderr, "agentctl: the stream ended before the run finished")
	default:
		fmt.Fprintf(s.e.stderr, "agentctl: the stream ended before the run finished: %s\n", s.e.describeErr(err))
		if streamLost(err) && s.runID() != "" {
			fmt.Fprintf(s.e.stderr, "agentctl: the run goes on on the server; follow it with: %s\n", s.e.command("attach", s.runID(), "--after", strconv.FormatInt(s.lastSeq, 10)))
		}
	}
	return exitFailed
}

// onEvent shows one event and reacts to it; done says the run finished, with its exit
// code.
func (s *session) onEvent(ctx context.Context, ev *agentdv1.RunEvent) (code int, done bool) {
	if s.cfg.json {
		return s.onEventJSON(ev)
	}
	sc := s.scr
	switch k := ev.GetKind().(type) {
	case *agentdv1.RunEvent_Attached:
		if s.att != nil {
			s.onAttached(ev.GetRunId(), k.Attached)
		}
	case *agentdv1.RunEvent_RunStarted:
		r := k.RunStarted
		s.started, s.startedAt = r, eventTime(ev)
		what := "run"
		if r.GetResumed() {
			what = "resumed run"
		}
		sc.line(sc.dim(fmt.Sprintf("● %s %s · agent %s · model %s · thread %s", what, r.GetRunId(), r.GetAgent(), r.GetModel(), r.GetThreadId())))
	case *agentdv1.RunEvent_StepStarted:
		s.status.set("waiting for the model")
	case *agentdv1.RunEvent_MessageStarted:
		s.status.set("")
	case *agentdv1.RunEvent_TextDelta:
		s.status.set("")
		sc.continueLine("text:"+k.TextDelta.GetMessageId(), "")
		sc.write(k.TextDelta.GetDelta())
	case *agentdv1.RunEvent_ReasoningDelta:
		s.status.set("")
		sc.continueLine("reasoning:"+k.ReasoningDelta.GetMessageId(), sc.dim("thinking: "))
		sc.write(sc.dim(k.ReasoningDelta.GetDelta()))
	case *agentdv1.RunEvent_MessageFinished:
		m := k.MessageFinished
		if sc.owner == "text:"+m.GetMessageId() || sc.owner == "reasoning:"+m.GetMessageId() {
			if m.GetPartial() {
				sc.write(sc.dim(" (cut short)"))
			}
			sc.newline()
		}
	case *agentdv1.RunEvent_ToolCallStarted:
		c := k.ToolCallStarted
		s.calls[c.GetToolCallId()] = &call{name: c.GetName()}
		s.status.set("")
		sc.continueLine("call:"+c.GetToolCallId(), sc.cyan("⚙ "+c.GetName())+" ")
	case *agentdv1.RunEvent_ToolCallArgsDelta:
		d := k.ToolCallArgsDelta
		c := s.call(d.GetToolCallId())
		sc.continueLine("call:"+d.GetToolCallId(), sc.cyan("⚙ "+c.name)+" "+sc.dim("… "))
		sc.write(d.GetDelta())
		c.argsShown = true
	case *agentdv1.RunEvent_ToolCallArgsDone:
		d := k.ToolCallArgsDone
		if c := s.call(d.GetToolCallId()); !c.argsShown {
			sc.continueLine("call:"+d.GetToolCallId(), sc.cyan("⚙ "+c.name)+" ")
			sc.write(d.GetArgumentsJson())
			c.argsShown = true
		}
		sc.newline()
	case *agentdv1.RunEvent_ApprovalRequested:
		if s.att != nil && !s.att.caughtUp {
			s.replayedApproval(k.ApprovalRequested)
		} else {
			s.onApprovalRequested(k.ApprovalRequested)
		}
	case *agentdv1.RunEvent_ApprovalResolved:
		s.onApprovalResolved(k.ApprovalResolved)
	case *agentdv1.RunEvent_ToolExecutionStarted:
		x := k.ToolExecutionStarted
		s.running[x.GetToolCallId()] = x.GetName()
		s.showRunning()
		if id := x.GetChildRunId(); id != "" {
			// A sub-agent's call: its child is a run of its own, which attach follows.
			sc.line("  " + sc.dim("↳ child run "+id+" (agentctl attach "+id+")"))
		}
	case *agentdv1.RunEvent_ToolCallResult:
		r := k.ToolCallResult
		delete(s.running, r.GetToolCallId())
		s.showRunning()
		out := clip(resultText(r), 200)
		took := ""
		if d := r.GetDuration().AsDuration(); r.GetDuration() != nil && d >= time.Millisecond {
			took = sc.dim(" (" + d.Round(time.Millisecond).String() + ")")
		}
		if r.GetIsError() {
			sc.line("  " + sc.red("✗ "+out) + took)
		} else {
			sc.line("  " + sc.green("→") + " " + out + took)
		}
	case *agentdv1.RunEvent_ToolCallsCancelled:
		c := k.ToolCallsCancelled
		var names []string
		for _, id := range c.GetToolCallIds() {
			names = append(names, s.call(id).name)
			delete(s.running, id)
		}
		s.showRunning()
		sc.line(sc.yellow("⊘ not run: "+strings.Join(names, ", ")) + sc.dim(parens(c.GetReason())))
	case *agentdv1.RunEvent_SteerApplied:
		a := k.SteerApplied
		switch {
		case a.GetClientSeq() == 0: // the prompt itself
		case a.GetDropped():
			sc.line(sc.yellow("↳ steer dropped: " + a.GetDropReason()))
		default:
			sc.line(sc.dim("↳ steer taken"))
		}
	case *agentdv1.RunEvent_StepFinished:
		if len(s.running) == 0 {
			s.status.set("")
		}
	case *agentdv1.RunEvent_InputAck:
		s.onAck(k.InputAck)
	case *agentdv1.RunEvent_GoAway:
		sc.line(sc.yellow(fmt.Sprintf("! the server is shutting down: the run has %s to finish, else it parks (SHUTDOWN)", k.GoAway.GetTimeLeft().AsDuration().Round(time.Second))))
	case *agentdv1.RunEvent_HookEvent:
		h := k.HookEvent
		v := ""
		if h.GetValue() != nil {
			b, _ := json.Marshal(h.GetValue().AsInterface())
			v = " " + clip(string(b), 200)
		}
		sc.line(sc.yellow("⚑ " + h.GetName() + v))
	case *agentdv1.RunEvent_ChildEvent:
		s.onChildEvent(k.ChildEvent)
	case *agentdv1.RunEvent_RunFinished:
		return s.finish(k.RunFinished, eventTime(ev)), true
	}
	if a := s.att; a != nil && a.snap != nil && !a.caughtUp && ev.GetSeq() >= a.snap.GetLastSeq() {
		s.catchUp()
	}
	if s.stage != stageNone {
		sc.reprompt()
	}
	return 0, false
}

// onEventJSON prints an event as one line of JSON.
func (s *session) onEventJSON(ev *agentdv1.RunEvent) (int, bool) {
	b, err := protojson.Marshal(ev)
	if err != nil {
		fmt.Fprintf(s.e.stderr, "agentctl: event %d: %v\n", ev.GetSeq(), err)
	} else {
		_, _ = s.e.stdout.Write(append(b, '\n'))
	}
	switch k := ev.GetKind().(type) {
	case *agentdv1.RunEvent_Attached:
		if s.att != nil {
			s.att.snap = k.Attached
		}
	case *agentdv1.RunEvent_RunStarted:
		s.started, s.startedAt = k.RunStarted, eventTime(ev)
	case *agentdv1.RunEvent_ApprovalRequested:
		if s.att == nil {
			s.halfClose() // nobody answers: the run parks (under --auto-approve, the server asks only what it may not approve)
		}
	case *agentdv1.RunEvent_ChildEvent:
		s.onChildEvent(k.ChildEvent)
	case *agentdv1.RunEvent_RunFinished:
		return s.finish(k.RunFinished, eventTime(ev)), true
	}
	return 0, false
}

func (s *session) call(id string) *call {
	c := s.calls[id]
	if c == nil {
		c = &call{name: id}
		s.calls[id] = c
	}
	return c
}

// showRunning puts the executing tools on the status line.
func (s *session) showRunning() {
	if len(s.running) == 0 {
		s.status.set("")
		return
	}
	var names []string
	for _, n := range s.running {
		names = append(names, n)
	}
	slices.Sort(names)
	s.status.set("running " + strings.Join(names, ", "))
}

func (s *session) onApprovalRequested(a *agentdv1.ApprovalRequested) {
	s.requested[a.GetApprovalId()] = a
	s.status.set("")
	if s.answeredIDs[a.GetApprovalId()] {
		return
	}
	if s.cfg.autoApprove {
		if len(s.held) == 0 {
			s.heldC = time.After(heldFor)
		}
		s.held = append(s.held, a)
		return
	}
	s.printApproval(a, true)
	s.askApproval(a)
}

// heldFor bounds how long an approval requested under --auto-approve waits unshown for
// the policy's answer, which the server sends right behind the request when it has one.
const heldFor = time.Second

// settleHeld decides the held approvals on the next event: the policy's answer to one
// drops it unasked (its approval_resolved then says the policy approved it), another
// request joins them; anything else but a heartbeat means the server waits for the
// person, who is asked what is still held.
func (s *session) settleHeld(ev *agentdv1.RunEvent) {
	if len(s.held) == 0 || ev.GetHeartbeat() != nil || ev.GetApprovalRequested() != nil {
		return
	}
	if r := ev.GetApprovalResolved(); r != nil {
		for i, a := range s.held {
			if a.GetApprovalId() == r.GetApprovalId() {
				s.held = slices.Delete(s.held, i, i+1)
				if len(s.held) == 0 {
					s.heldC = nil
				}
				return
			}
		}
	}
	s.releaseHeld()
}

// releaseHeld asks the held approvals, in the order they came.
func (s *session) releaseHeld() {
	held := s.held
	s.held, s.heldC = nil, nil
	for _, a := range held {
		s.printApproval(a, true)
		s.askApproval(a)
	}
}

// askApproval asks an approval at the prompt, or says why nobody can answer it here.
func (s *session) askApproval(a *agentdv1.ApprovalRequested) {
	switch {
	case s.lines != nil && !s.inputEnded && !s.sendClosed && !s.cancelled:
		s.queue = append(s.queue, a)
		s.showPrompt()
	case s.att != nil:
		// An attached stream's end is no half-close of the run's input: the run waits.
		s.scr.line(s.scr.dim("  nobody can answer here: the run waits for another client's answer"))
	default:
		s.scr.line(s.scr.dim("  nobody can answer here: the run parks"))
	}
}

// printApproval shows what an approval is asked for; live says it may still be answered,
// and shows when it expires.
// onChildEvent shows an event of a child run (a sub-agent's call), indented under the
// call by its depth: its start and end, its text, and its approvals, which are decided
// here like the run's own (the server takes them to the child).
func (s *session) onChildEvent(ce *agentdv1.ChildEvent) {
	sc := s.scr
	path := ce.GetAgentPath()
	if len(path) == 0 {
		return
	}
	who, indent := strings.Join(path, " › "), strings.Repeat("  ", len(path))
	switch k := ce.GetEvent().GetKind().(type) {
	case *agentdv1.RunEvent_RunStarted:
		sc.line(indent + sc.dim("↳ "+who+" · run "+ce.GetRunId()))
	case *agentdv1.RunEvent_TextDelta:
		sc.continueLine("child:"+ce.GetRunId()+":"+k.TextDelta.GetMessageId(), indent+sc.dim(path[len(path)-1]+": "))
		sc.write(k.TextDelta.GetDelta())
	case *agentdv1.RunEvent_MessageFinished:
		if sc.owner == "child:"+ce.GetRunId()+":"+k.MessageFinished.GetMessageId() {
			sc.newline()
		}
	case *agentdv1.RunEvent_ToolCallResult:
		sc.line(indent + sc.dim("⚙ "+k.ToolCallResult.GetName()+" → "+clip(resultText(k.ToolCallResult), 120)))
	case *agentdv1.RunEvent_ApprovalRequested:
		s.askedBy[k.ApprovalRequested.GetApprovalId()] = who
		if s.att != nil && !s.att.caughtUp {
			s.replayedApproval(k.ApprovalRequested)
		} else {
			s.onApprovalRequested(k.ApprovalRequested)
		}
	case *agentdv1.RunEvent_ApprovalResolved:
		s.onApprovalResolved(k.ApprovalResolved)
	case *agentdv1.RunEvent_RunFinished:
		end := strings.ToLower(strings.TrimPrefix(k.RunFinished.GetReason().String(), "RUN_END_REASON_"))
		mark := sc.green("✓ ")
		if k.RunFinished.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			mark = sc.red("✗ ")
		}
		sc.line(indent + mark + sc.dim(who+" "+end))
	}
}

func (s *session) printApproval(a *agentdv1.ApprovalRequested, live bool) {
	sc := s.scr
	why := ""
	if a.GetReason() != "" {
		why = sc.dim(" (" + a.GetReason() + ")")
	}
	of := ""
	if who := s.askedBy[a.GetApprovalId()]; who != "" {
		of = sc.dim(" (" + who + ")")
	}
	sc.line(sc.yellow("? ") + sc.bold(a.GetToolName()) + of + " needs your approval" + why)
	sc.line("  " + a.GetArgumentsJson())
	if t := a.GetExpiresAt(); t != nil && live && time.Until(t.AsTime()) > 0 {
		sc.line(sc.dim(fmt.Sprintf("  expires in %s if not answered", time.Until(t.AsTime()).Round(time.Second))))
	}
}

func (s *session) onApprovalResolved(r *agentdv1.ApprovalResolved) {
	sc := s.scr
	for i, a := range s.queue {
		if a.GetApprovalId() != r.GetApprovalId() {
			continue
		}
		s.queue = append(s.queue[:i:i], s.queue[i+1:]...)
		if i == 0 && s.stage != stageNone {
			s.stage, sc.prompt = stageNone, ""
		}
		break
	}
	name := r.GetApprovalId()
	req := s.requested[r.GetApprovalId()]
	if req != nil {
		name = req.GetToolName()
	}
	by := ""
	switch r.GetDecidedBy() {
	case agentdv1.DecidedBy_DECIDED_BY_POLICY:
		by = " by the approval policy"
	case agentdv1.DecidedBy_DECIDED_BY_HOOK:
		by = " by a hook"
	}
	switch r.GetOutcome() {
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED:
		edited := ""
		if req != nil && r.GetArgumentsJson() != "" && r.GetArgumentsJson() != req.GetArgumentsJson() {
			edited = " with " + r.GetArgumentsJson()
		}
		sc.line(sc.green("✓ "+name+" approved") + by + edited)
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED:
		sc.line(sc.red("✗ "+name+" denied") + by + parens(r.GetReason()))
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED:
		sc.line(sc.red("✗ " + name + ": nobody decided in time, so it was denied"))
	case agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED:
		sc.line(sc.yellow("⊘ " + name + ": approval cancelled" + parens(r.GetReason())))
	}
	s.showPrompt()
}

func (s *session) onAck(ack *agentdv1.InputAck) {
	m, ok := s.sent[ack.GetClientSeq()]
	delete(s.sent, ack.GetClientSeq())
	if !ok || ack.GetAccepted() {
		return
	}
	e := ack.GetError()
	what := "message"
	switch {
	case m.approval != nil:
		what = "decision on " + m.approval.GetToolName()
	case m.steer != "":
		what = "steer"
	}
	s.scr.line(s.scr.red(fmt.Sprintf("✗ %s refused: %s", what, joinNonEmpty(": ", e.GetReason(), e.GetMessage()))))
	if m.approval != nil && !s.cancelled && !s.sendClosed {
		// Ask again; unless the request is gone, in which case approval_resolved said so.
		if e.GetReason() != "UNKNOWN_APPROVAL" && e.GetReason() != "ALREADY_DECIDED" {
			if s.stage != stageNone {
				s.stage, s.scr.prompt = stageNone, ""
			}
			s.queue = append([]*agentdv1.ApprovalRequested{m.approval}, s.queue...)
			s.showPrompt()
		}
	}
}

// finish shows how the run ended, at the server's time at, saves a parked run, and returns
// the exit code.
func (s *session) finish(f *agentdv1.RunFinished, at time.Time) int {
	s.status.set("")
	s.scr.newline()
	sc := s.scr
	reason := f.GetReason()
	parked := reason == agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || reason == agentdv1.RunEndReason_RUN_END_REASON_SHUTDOWN
	code := exitFailed
	switch reason {
	case agentdv1.RunEndReason_RUN_END_REASON_COMPLETED:
		code = exitOK
	case agentdv1.RunEndReason_RUN_END_REASON_CANCELLED:
		if s.cancelled {
			code = exitCancel
		}
	}
	if parked {
		code = exitParked
	}

	if !s.cfg.json {
		head := endWord(reason)
		switch {
		case reason == agentdv1.RunEndReason_RUN_END_REASON_COMPLETED:
			head = sc.green("✓ " + head)
		case parked:
			head = sc.yellow("⏸ " + head)
		case reason == agentdv1.RunEndReason_RUN_END_REASON_CANCELLED:
			head = sc.yellow("⊘ " + head)
		default:
			head = sc.red("✗ " + head)
			if e := f.GetError(); e != nil {
				head += ": " + joinNonEmpty(": ", e.GetReason(), e.GetMessage())
			}
		}
		took := time.Since(s.begin)
		if s.att != nil {
			// Attached: the run did not start when agentctl did. Its events say how long
			// it took, when the replay showed its start.
			took = 0
			if !s.startedAt.IsZero() && !at.IsZero() {
				took = at.Sub(s.startedAt)
			}
		}
		sc.line(head + sc.dim(" · "+usageSummary(f.GetUsage(), took)))
		if out := f.GetOutput(); out != nil {
			// A typed agent's result, pretty-printed.
			if b, err := json.MarshalIndent(out.AsInterface(), "  ", "  "); err == nil {
				sc.line("  " + sc.bold("output:") + " " + string(b))
			}
		}
		if parked {
			if w := waitList(f.GetPendingApprovals(), f.GetPendingClientToolCallIds()); w != "" {
				sc.line("  waiting for: " + w)
			}
		}
	}

	if parked && s.att != nil {
		// The history the run was started with is its starter's: agentctl cannot save a
		// transcript that resumes it.
		note := "the run parked: the client that started it resumes it"
		if s.cfg.json {
			fmt.Fprintln(s.e.stderr, "agentctl: "+note)
		} else {
			sc.line(sc.dim("  " + note))
		}
		return code
	}
	saved := ""
	if parked && len(f.GetContinuation()) > 0 {
		path := s.savePath()
		p := &parkedRun{
			Agent:                    s.started.GetAgent(),
			ThreadID:                 s.started.GetThreadId(),
			RunID:                    s.started.GetRunId(),
			History:                  s.historyMode,
			Reason:                   reason,
			Messages:                 append(append([]*agentdv1.Message(nil), s.history...), f.GetNewMessages()...),
			Continuation:             f.GetContinuation(),
			PendingApprovals:         f.GetPendingApprovals(),
			PendingClientToolCallIDs: f.GetPendingClientToolCallIds(),
			SavedAt:                  time.Now(),
		}
		if err := p.save(path); err != nil {
			fmt.Fprintf(s.e.stderr, "agentctl: saving the parked run: %v\n", err)
			return exitFailed
		}
		saved = path
		hint := fmt.Sprintf("saved to %s; resume with: %s", path, s.e.command("run", "--resume", path))
		if s.cfg.json {
			fmt.Fprintln(s.e.stderr, "agentctl: the run parked; "+hint)
		} else {
			sc.line("  " + hint)
		}
	}
	if r := s.cfg.resume; r != "" && r != saved {
		// The continuation in it has been used: resuming it again would run its approved calls again.
		if err := os.Remove(r); err == nil {
			note := fmt.Sprintf("removed %s: its run was resumed", r)
			if s.cfg.json {
				fmt.Fprintln(s.e.stderr, "agentctl: "+note)
			} else {
				sc.line(sc.dim("  " + note))
			}
		}
	}
	return code
}

// savePath is where a parked run is saved: --save, else the file it was resumed from,
// else defaultSave.
func (s *session) savePath() string {
	switch {
	case s.cfg.save != "":
		return s.cfg.save
	case s.cfg.resume != "":
		return s.cfg.resume
	}
	return defaultSave
}

// endWord names a run end reason for a person: "completed", "awaiting input".
func endWord(r agentdv1.RunEndReason) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(r.String(), "RUN_END_REASON_")), "_", " ")
}

// eventTime is when an event happened on the server; zero when it does not say.
func eventTime(ev *agentdv1.RunEvent) time.Time {
	if ev.GetTime() == nil {
		return time.Time{}
	}
	return ev.GetTime().AsTime()
}

// waitList says what a run waits for: "approval of save_note, client tool result for call_1".
func waitList(approvals []*agentdv1.ApprovalRequested, clientCalls []string) string {
	var waits []string
	for _, a := range approvals {
		waits = append(waits, "approval of "+a.GetToolName())
	}
	for _, id := range clientCalls {
		waits = append(waits, "client tool result for "+id)
	}
	return strings.Join(waits, ", ")
}

// usageSummary renders a run's usage: "2 model calls · 1 tool call · 180 tokens in, 12 out · 0.41s".
// A duration of 0 is left out.
func usageSummary(u *agentdv1.Usage, took time.Duration) string {
	tokens := fmt.Sprintf("%d tokens in, %d out", u.GetInputTokens(), u.GetOutputTokens())
	var extra []string
	if n := u.GetReasoningTokens(); n > 0 {
		extra = append(extra, fmt.Sprintf("%d reasoning", n))
	}
	if n := u.GetCacheReadInputTokens(); n > 0 {
		extra = append(extra, fmt.Sprintf("%d cached", n))
	}
	if len(extra) > 0 {
		tokens += " (" + strings.Join(extra, ", ") + ")"
	}
	parts := []string{
		plural(u.GetModelCalls(), "model call"),
		plural(u.GetToolCalls(), "tool call"),
		tokens,
	}
	if took > 0 {
		parts = append(parts, roundDuration(took).String())
	}
	return strings.Join(parts, " · ")
}

// roundDuration keeps a duration's meaningful digits: 12ms, 1.24s, 2m3s.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Second)
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// resultText is a tool result's output as one line of text.
func resultText(r *agentdv1.ToolCallResult) string {
	switch o := r.GetOutput().(type) {
	case *agentdv1.ToolCallResult_Text:
		return o.Text
	case *agentdv1.ToolCallResult_Json:
		b, err := json.Marshal(o.Json.AsInterface())
		if err == nil {
			return string(b)
		}
	}
	return ""
}

// clip keeps the first line of s, and at most n characters of it.
func clip(s string, n int) string {
	first, rest, more := strings.Cut(strings.TrimSpace(s), "\n")
	r := []rune(first)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	if more && strings.TrimSpace(rest) != "" {
		return first + " …"
	}
	return first
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
