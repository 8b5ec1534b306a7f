package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// chatPrompt asks for the next turn of a chat.
const chatPrompt = "› "

// runChat is `agentctl chat`: a conversation on a thread the server keeps. Each line read
// is a turn: a run with history THREAD whose input is the line alone, shown as `agentctl
// run` shows its run, approvals asked and typed lines steering it. The first turn makes
// the thread unless --thread names one; the end of input ends the chat.
//
// One line reader serves the chat and each turn's session, so that a line typed while a
// run finishes is the next turn, not lost with a reader of its own.
func runChat(ctx context.Context, client agentdv1.AgentServiceClient, cfg runConfig, e env) int {
	lines := newLineReader(e.stdin)
	defer lines.stop()
	c := &chat{e: e, json: cfg.json, scr: newScreen(e.stdout, useColor(e), nil)}
	cfg.history = historyFlag(agentdv1.History_HISTORY_THREAD)

	thread := cfg.thread
	if thread != "" {
		resp, err := client.GetThread(ctx, &agentdv1.GetThreadRequest{ThreadId: thread, PageSize: 1})
		if err != nil {
			fmt.Fprintf(e.stderr, "agentctl: chat: %s\n", e.describeErr(err))
			return exitFailed
		}
		th := resp.GetThread()
		// A turn without --agent goes to the thread's agent, not to the server's default.
		cfg.agent = cmp.Or(cfg.agent, th.GetAgent())
		c.note(fmt.Sprintf("● chat on thread %s · agent %s · %s · one line a turn, Ctrl-D ends it", thread, cmp.Or(cfg.agent, "(the server's default)"), plural(th.GetMessageCount(), "message")))
		if r := th.GetActiveRunId(); r != "" {
			c.note(fmt.Sprintf("  its run %s is going on: follow it with %s", r, c.e.command("attach", r)))
		}
	} else {
		c.note("● chat on a new thread · one line a turn, Ctrl-D ends it")
	}

	var turnLines *lineReader // nil with --json: a turn's run asks nothing
	if !cfg.json {
		turnLines = lines
	}
	code := exitOK
	for {
		if e.stdinTTY && !cfg.json {
			c.scr.ask(chatPrompt)
		}
		lines.request()
		select {
		case l := <-lines.recv():
			lines.took(l)
			if l.eof {
				if l.err != nil {
					fmt.Fprintf(e.stderr, "agentctl: reading input: %v\n", l.err)
				}
				c.bye(thread)
				return code
			}
			c.typed(l.text)
			text := strings.TrimSpace(l.text)
			if text == "" {
				continue
			}
			s := newSession(cfg, e, turnLines)
			code = s.run(ctx, client, &agentdv1.RunSpec{
				Agent:    cfg.agent,
				ThreadId: thread,
				Input:    text,
				History:  agentdv1.History_HISTORY_THREAD,
				Config:   &agentdv1.RunConfig{ApprovalPolicy: s.policy()},
			})
			if thread == "" && s.started != nil {
				thread = s.started.GetThreadId()
			}
			switch {
			case s.quit:
				c.bye(thread)
				return exitCancel
			case code == exitParked:
				// The thread's conversation waits on the parked run's answer: a next turn
				// would leave it behind.
				c.bye(thread)
				return code
			case s.inputEnded:
				c.bye(thread)
				return code
			}
		case <-e.interrupts:
			c.scr.newline()
			fmt.Fprintln(e.stderr, "agentctl: quit")
			c.bye(thread)
			return exitCancel
		case <-ctx.Done():
			c.scr.newline()
			fmt.Fprintf(e.stderr, "agentctl: chat: %v\n", context.Cause(ctx))
			c.bye(thread)
			return exitFailed
		}
	}
}

// chat is what `agentctl chat` writes between its turns' runs.
type chat struct {
	e    env
	json bool
	scr  *screen
}

// note tells the person something: on stdout, or on stderr where stdout is for the events
// (--json).
func (c *chat) note(s string) {
	if c.json {
		fmt.Fprintln(c.e.stderr, "agentctl: "+s)
		return
	}
	c.scr.line(c.scr.dim(s))
}

// typed records a line read: a terminal echoed it after the prompt; other input is shown
// after the prompt here, so that the output reads as a transcript.
func (c *chat) typed(text string) {
	switch {
	case c.json:
	case c.e.stdinTTY:
		c.scr.answered(text, false)
	default:
		c.scr.line(chatPrompt + text)
	}
}

// bye ends the chat, saying how to continue its thread.
func (c *chat) bye(thread string) {
	if !c.json {
		c.scr.prompt = ""
		c.scr.newline()
	}
	if thread != "" {
		c.note(fmt.Sprintf("● thread %s · continue it with: %s", thread, c.e.command("chat", "--thread", thread)))
	}
}
