package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// wantLine asks for the next line of input when one is wanted: always on a terminal (a
// line typed while the run goes on steers it), otherwise only while an approval is asked.
// When stdout is that terminal too, agentctl shows what is typed itself, below the
// output, so that it never lands inside the streamed text (see console).
func (s *session) wantLine() {
	if s.lines == nil || s.inputEnded {
		return
	}
	if s.e.stdinTTY && s.e.stdoutTTY {
		s.lines.echo(s.e.stdout, s.status)
	}
	if s.e.stdinTTY || s.stage != stageNone {
		s.lines.request()
	}
}

// onLine acts on a line of input: the answer to the open prompt, or a steer.
func (s *session) onLine(ctx context.Context, l line) {
	if l.eof {
		s.onEOF(l)
		return
	}
	switch {
	case s.stage == stageNone && s.e.stdinTTY && s.att != nil && strings.TrimSpace(l.text) == "/cancel":
		// Ctrl-C detaches an attached agentctl, so the cancel is typed.
		s.status.moved()
		s.scr.answered(l.text, false)
		if s.cancelled || s.sendClosed {
			s.scr.line(s.scr.yellow("the run is ending: cancel not sent"))
		} else {
			s.cancelRun("/cancel in agentctl attach")
		}
	case s.stage == stageNone && s.e.stdinTTY:
		s.status.moved()
		s.scr.answered(l.text, false)
		s.steer(l.text)
	case s.stage == stageNone:
		// Read for a prompt that went away (the approval expired, the run was cancelled).
		// Input that is not a terminal answers approvals only: this is no steer.
		s.scr.line(s.scr.dim(fmt.Sprintf("no approval is waiting: ignored %q", l.text)))
	default:
		s.scr.answered(l.text, !s.e.stdinTTY)
		s.answer(ctx, l.text)
	}
	s.wantLine()
}

// onEOF handles the end of input: the run goes on without the person, and parks at what
// needs them. An attached stream is not half-closed: the run's input is its starter's,
// and the run waits for another client to answer.
func (s *session) onEOF(l line) {
	s.inputEnded = true
	if l.err != nil {
		s.scr.line(s.scr.red("reading input: " + l.err.Error()))
	}
	if s.stage != stageNone {
		s.scr.closePrompt() // after the prompt: nothing was echoed
	}
	n := len(s.queue)
	s.queue, s.stage, s.scr.prompt = nil, stageNone, ""
	if s.att != nil {
		if n > 0 {
			s.scr.line(s.scr.dim(fmt.Sprintf("end of input: %s left for another client to answer; watching the run", plural(int64(n), "approval"))))
		}
		return
	}
	if n > 0 && s.stream != nil {
		s.scr.line(s.scr.dim(fmt.Sprintf("end of input: the run parks with %s waiting", plural(int64(n), "approval"))))
	}
	s.halfClose()
}

// steer sends a line typed while no approval is asked: before the next model call, or,
// when it starts with "!", interrupting the current step.
func (s *session) steer(text string) {
	t := strings.TrimSpace(text)
	if t == "" {
		return
	}
	mode := agentdv1.SteerMode_STEER_MODE_NEXT_STEP
	if rest, ok := strings.CutPrefix(t, "!"); ok {
		mode = agentdv1.SteerMode_STEER_MODE_INTERRUPT
		if t = strings.TrimSpace(rest); t == "" {
			s.scr.line(s.scr.yellow("type the steer after the !"))
			return
		}
	}
	if s.stream == nil || s.cancelled || s.sendClosed {
		s.scr.line(s.scr.yellow("the run is ending: steer not sent"))
		return
	}
	seq := s.send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: t, Mode: mode}}})
	if seq == 0 {
		return
	}
	s.sent[seq] = sent{steer: t}
	if mode == agentdv1.SteerMode_STEER_MODE_INTERRUPT {
		s.scr.line(s.scr.dim("↳ steer sent, interrupting the current step"))
	} else {
		s.scr.line(s.scr.dim("↳ steer sent, for the next step"))
	}
}

// showPrompt asks the first approval of the queue, unless one is being asked.
func (s *session) showPrompt() {
	if s.stage != stageNone || len(s.queue) == 0 {
		return
	}
	s.stage = stageDecide
	s.askDecide()
}

func (s *session) askDecide() {
	a := s.queue[0]
	choices := "[y]es/[n]o"
	if a.GetEditable() {
		choices += "/[e]dit"
	}
	s.ask(fmt.Sprintf("%s %s? %s: ", s.scr.yellow("approve"), s.scr.bold(a.GetToolName()), choices))
}

func (s *session) ask(prompt string) {
	s.status.set("")
	s.scr.ask(prompt)
	s.wantLine()
}

// answer takes the person's answer to the open prompt.
func (s *session) answer(ctx context.Context, text string) {
	a := s.queue[0]
	switch s.stage {
	case stageDecide:
		// "n" may carry its reason on the same line ("n not that file"); piped input,
		// a line an answer, denies at "n" with no reason asked.
		word, reason, _ := strings.Cut(strings.TrimSpace(text), " ")
		switch strings.ToLower(word) {
		case "y", "yes":
			s.decided(&agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED})
		case "n", "no":
			if reason = strings.TrimSpace(reason); reason != "" || !s.e.stdinTTY {
				s.decided(&agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, Reason: reason})
				return
			}
			s.stage = stageReason
			s.ask("reason, told to the model (Enter for none): ")
		case "e", "edit":
			switch {
			case !a.GetEditable():
				s.scr.line(s.scr.yellow("the server does not let this call's arguments be edited"))
				s.askDecide()
			case editorCommand(s.e.getenv) != "":
				s.editInEditor(ctx, a, editorCommand(s.e.getenv))
			default:
				s.stage = stageInline
				s.scr.line(s.scr.dim("the arguments as JSON on one line (Enter keeps them; set $EDITOR to edit in an editor):"))
				s.ask("> ")
			}
		default:
			s.scr.line(s.scr.yellow("answer y to approve, n to deny, or e to edit the arguments"))
			s.askDecide()
		}
	case stageReason:
		s.decided(&agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, Reason: strings.TrimSpace(text)})
	case stageInline:
		t := strings.TrimSpace(text)
		if t == "" {
			s.decided(&agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED})
			return
		}
		if err := s.approveEdited(a, t); err != nil {
			s.scr.line(s.scr.red(err.Error() + "; try again"))
			s.ask("> ")
		}
	}
}

// editInEditor lets the person edit a call's arguments in their editor, then approves
// the call with them.
func (s *session) editInEditor(ctx context.Context, a *agentdv1.ApprovalRequested, editor string) {
	s.status.set("")
	s.scr.newline()
	s.lines.suspend()
	edited, err := editJSON(ctx, editor, a.GetArgumentsJson(), s.e.stdin, s.e.stdout, s.e.stderr)
	s.lines.resume()
	s.scr.redrawn() // the editor had the screen
	for len(s.e.interrupts) > 0 {
		<-s.e.interrupts // a Ctrl-C typed in the editor was the editor's
	}
	if err == nil {
		err = s.approveEdited(a, edited)
	}
	if err != nil {
		s.scr.line(s.scr.red("✗ edit: " + err.Error()))
		s.askDecide()
	}
}

// approveEdited approves a call with the arguments in editedJSON: unchanged ones approve
// it as it is.
func (s *session) approveEdited(a *agentdv1.ApprovalRequested, editedJSON string) error {
	edited, err := compactJSON(editedJSON)
	if err != nil {
		return err
	}
	d := &agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}
	if orig, err := compactJSON(a.GetArgumentsJson()); err != nil || orig != edited {
		if d.EditedArguments, err = jsonValue(edited); err != nil {
			return err
		}
	}
	s.decided(d)
	return nil
}

// decided passes the decision on the approval being asked on, and asks the next.
func (s *session) decided(d *agentdv1.ApprovalDecision) {
	a := s.queue[0]
	s.queue = s.queue[1:]
	s.stage, s.scr.prompt = stageNone, ""
	s.answeredIDs[a.GetApprovalId()] = true
	s.decide(a, d)
	s.showPrompt()
}

// sendDecision is decide during a run: the decision goes out on the stream.
func (s *session) sendDecision(a *agentdv1.ApprovalRequested, d *agentdv1.ApprovalDecision) {
	if seq := s.send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: d}}); seq > 0 {
		s.sent[seq] = sent{approval: a}
	}
}

// resumeSpec reads a parked run from path and returns the RunSpec that resumes it, with a
// decision on each pending approval: from --approve or --deny, else asked at the prompt.
// A nil spec means agentctl stops with the exit code.
func (s *session) resumeSpec(ctx context.Context, path string) (*agentdv1.RunSpec, int) {
	p, err := loadParked(path)
	if err != nil {
		fmt.Fprintf(s.e.stderr, "agentctl: --resume: %v\n", err)
		return nil, exitUsage
	}
	if ids := p.PendingClientToolCallIDs; len(ids) > 0 {
		fmt.Fprintf(s.e.stderr, "agentctl: --resume %s: the run waits for the results of client tool calls (%s), which agentctl does not run\n", path, strings.Join(ids, ", "))
		return nil, exitFailed
	}
	spec := &agentdv1.RunSpec{
		Agent:        cmp.Or(s.cfg.agent, p.Agent),
		ThreadId:     cmp.Or(s.cfg.thread, p.ThreadID),
		Messages:     p.Messages,
		History:      p.History,
		Continuation: p.Continuation,
		Config:       &agentdv1.RunConfig{ApprovalPolicy: s.policy()},
	}
	if p.History == agentdv1.History_HISTORY_THREAD {
		spec.Messages = nil // the server holds the thread's history
	}
	pending := p.PendingApprovals
	for _, a := range pending {
		s.requested[a.GetApprovalId()] = a
	}
	switch {
	case len(pending) == 0:
		return spec, 0
	case s.cfg.approve:
		for _, a := range pending {
			s.answeredIDs[a.GetApprovalId()] = true
			spec.Decisions = append(spec.Decisions, &agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED})
		}
		return spec, 0
	case s.cfg.denySet:
		for _, a := range pending {
			s.answeredIDs[a.GetApprovalId()] = true
			spec.Decisions = append(spec.Decisions, &agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, Reason: s.cfg.deny})
		}
		return spec, 0
	case s.lines == nil:
		fmt.Fprintf(s.e.stderr, "agentctl: --resume %s: the run waits for %s; with --json, decide with --approve or --deny REASON\n", path, plural(int64(len(pending)), "approval"))
		return nil, exitUsage
	}

	s.scr.line(s.scr.dim(fmt.Sprintf("● parked run %s · agent %s · thread %s · waiting for %s", p.RunID, p.Agent, p.ThreadID, plural(int64(len(pending)), "approval"))))
	for _, a := range pending {
		s.printApproval(a, true)
	}
	s.decide = func(_ *agentdv1.ApprovalRequested, d *agentdv1.ApprovalDecision) {
		spec.Decisions = append(spec.Decisions, d)
	}
	defer func() { s.decide = s.sendDecision }()
	s.queue = append([]*agentdv1.ApprovalRequested(nil), pending...)
	s.showPrompt()
	for len(s.queue) > 0 && !s.inputEnded {
		select {
		case l := <-s.lines.recv():
			s.lines.took(l)
			s.onLine(ctx, l)
		case <-s.e.interrupts:
			s.scr.newline()
			fmt.Fprintln(s.e.stderr, "agentctl: quit; nothing was sent")
			return nil, exitCancel
		case <-ctx.Done():
			fmt.Fprintf(s.e.stderr, "agentctl: %v\n", ctx.Err())
			return nil, exitFailed
		}
	}
	if len(spec.Decisions) < len(pending) {
		fmt.Fprintf(s.e.stderr, "agentctl: the input ended before every approval was decided; nothing was sent, and %s still holds the parked run\n", path)
		return nil, exitParked
	}
	return spec, 0
}
