package main

import (
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/logtest"
)

// threadIDIn returns the thread a chat's last line says to continue.
func threadIDIn(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`● thread (thread_\w+) · continue it with: agentctl (?:--\S+ \S+ )*--plaintext chat --thread (thread_\w+)\n`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("no thread to continue in:\n%s", out)
	}
	return m[1]
}

// threadMessages returns a thread's messages, read with GetThread.
func threadMessages(t *testing.T, addr, id string) []*agentdv1.Message {
	t.Helper()
	resp, err := agentdClient(t, addr).GetThread(t.Context(), &agentdv1.GetThreadRequest{ThreadId: id})
	if err != nil {
		t.Fatalf("GetThread %s: %v", id, err)
	}
	if int(resp.GetThread().GetMessageCount()) != len(resp.GetMessages()) {
		t.Fatalf("GetThread %s: message_count %d, %d messages", id, resp.GetThread().GetMessageCount(), len(resp.GetMessages()))
	}
	return resp.GetMessages()
}

func TestChatTurnsOnOneThread(t *testing.T) {
	t.Parallel()
	r := ctl{stdin: strings.NewReader("what is 12*7?\n\nwhat is 2+3?\n")}.run(t, args(plain(t), "chat")...)
	wantOutput(t, r, exitOK,
		"● chat on a new thread · one line a turn, Ctrl-D ends it\n",
		"› what is 12*7?\n● run run_",
		"\n12*7 = 84\n",
		"› what is 2+3?\n● run run_",
		"\n2+3 = 5\n",
	)
	id := threadIDIn(t, r.stdout)
	if n := strings.Count(r.stdout, " · thread "+id+"\n"); n != 2 {
		t.Errorf("%d runs on thread %s, want 2:\n%s", n, id, r.stdout)
	}

	// Each turn adds its input, the call, its result and the answer. The demo model names
	// its call after the number of messages it was sent: the second turn's model was sent
	// the first turn's four messages more than the first turn's.
	msgs := threadMessages(t, sharedAgentd(t), id)
	if len(msgs) != 8 {
		t.Fatalf("%d messages in the thread after two turns, want 8", len(msgs))
	}
	sent := func(m *agentdv1.Message) int {
		n, err := strconv.Atoi(strings.TrimPrefix(m.GetParts()[0].GetToolCall().GetId(), "call_demo_"))
		if err != nil {
			t.Fatalf("message %v holds no call of the demo model", m)
		}
		return n
	}
	if first, second := sent(msgs[1]), sent(msgs[5]); second-first != 4 {
		t.Errorf("the model was sent %d messages in the first turn, %d in the second; want 4 more, the first turn's", first, second)
	}

	// --thread continues it, with the thread's agent.
	r = ctl{stdin: strings.NewReader("hello\n")}.run(t, args(plain(t), "chat", "--thread", id)...)
	wantOutput(t, r, exitOK,
		"● chat on thread "+id+" · agent demo · 8 messages · one line a turn, Ctrl-D ends it\n",
		"› hello\n● run run_",
		"Hello! I am agentd's built-in demo model",
		"● thread "+id+" · continue it with: "+cmdLine(t, "chat", "--thread", id)+"\n",
	)
	if n := len(threadMessages(t, sharedAgentd(t), id)); n != 10 {
		t.Errorf("%d messages after the third turn, want 10", n)
	}

	r = ctl{stdin: strings.NewReader("hello\n")}.run(t, args(plain(t), "chat", "--thread", "thread_nosuchthread")...)
	if r.code != exitFailed || !strings.Contains(r.stderr, "agentctl: chat: NotFound (THREAD_NOT_FOUND): ") {
		t.Errorf("chat on a missing thread: %s", r)
	}
}

func TestChatBusyThread(t *testing.T) {
	t.Parallel()
	in, typing := io.Pipe()
	defer typing.Close()
	first := ctl{stdin: in, stdout: &logtest.Buffer{}}
	chatting := first.background(t, args(plain(t), "chat")...)
	io.WriteString(typing, "save a note: buy milk\n")
	waitFor(t, first.stdout, "approve save_note?")
	runID := runIDIn(t, first.stdout.String())
	thread := regexp.MustCompile(` · thread (thread_\w+)\n`).FindStringSubmatch(first.stdout.String())[1]

	// While the turn's run waits, the thread takes no other turn and cannot be deleted.
	hint := "the thread's run " + runID + " is going on: follow it with " + cmdLine(t, "attach", runID)
	r := ctl{stdin: strings.NewReader("hello\n")}.run(t, args(plain(t), "chat", "--thread", thread)...)
	wantOutput(t, r, exitFailed, "  its run "+runID+" is going on: follow it with "+cmdLine(t, "attach", runID)+"\n")
	if !strings.Contains(r.stderr, "agentctl: run: Aborted (THREAD_BUSY): ") || !strings.Contains(r.stderr, hint) {
		t.Errorf("a turn on the busy thread: %s\nwant THREAD_BUSY and %q", r, hint)
	}
	r = ctl{}.run(t, args(plain(t), "threads", "delete", thread)...)
	if r.code != exitFailed || !strings.Contains(r.stderr, "Aborted (THREAD_BUSY)") || !strings.Contains(r.stderr, hint) {
		t.Errorf("threads delete of the busy thread: %s", r)
	}

	io.WriteString(typing, "y\n")
	waitFor(t, first.stdout, "Saved your note \"Buy milk\"")
	io.WriteString(typing, "what is 2+2?\n")
	waitFor(t, first.stdout, "2+2 = 4\n")
	typing.Close()
	wantOutput(t, wait(t, chatting), exitOK, "● thread "+thread+" · continue it with")

	r = ctl{}.run(t, args(plain(t), "threads", "delete", thread)...)
	wantOutput(t, r, exitOK, "deleted thread "+thread+"\n")
}

func TestChatParksAndEnds(t *testing.T) {
	t.Parallel()
	save := t.TempDir() + "/parked.json"
	// The input ends at the approval: the run parks, and so does the chat.
	r := ctl{stdin: strings.NewReader("save a note: buy milk\n")}.run(t, args(plain(t), "chat", "--save", save)...)
	wantOutput(t, r, exitParked,
		"end of input: the run parks with 1 approval waiting\n",
		"saved to "+save+"; resume with: "+cmdLine(t, "run", "--resume", save)+"\n",
	)
	thread := threadIDIn(t, r.stdout)
	p, err := loadParked(save)
	if err != nil {
		t.Fatal(err)
	}
	if p.History != agentdv1.History_HISTORY_THREAD || p.ThreadID != thread {
		t.Errorf("saved history %v, thread %q; want HISTORY_THREAD on %s", p.History, p.ThreadID, thread)
	}

	// Resumed on its thread: the server keeps the history, agentctl sends none.
	r = ctl{stdin: strings.NewReader("y\n")}.run(t, args(plain(t), "run", "--resume", save)...)
	wantOutput(t, r, exitOK, "● resumed run ", " · thread "+thread+"\n", "Saved your note \"Buy milk\"")
	msgs := threadMessages(t, sharedAgentd(t), thread)
	if n := len(msgs); n < 4 || msgs[0].GetParts()[0].GetText() != "save a note: buy milk" || !strings.HasPrefix(msgs[n-1].GetParts()[0].GetText(), "Saved your note") {
		t.Errorf("thread after the resume: %v", msgs)
	}
}

func TestChatCtrlC(t *testing.T) {
	t.Parallel()
	in, typing := io.Pipe()
	defer typing.Close()
	c := ctl{stdin: in, interrupts: make(chan os.Signal, 1), stdout: &logtest.Buffer{}}
	chatting := c.background(t, args(plain(t), "chat")...)
	io.WriteString(typing, "save a note: buy milk\n")
	waitFor(t, c.stdout, "approve save_note?")
	// The first Ctrl-C cancels the turn's run; the chat goes on.
	c.interrupts <- os.Interrupt
	waitFor(t, c.stdout, "⊘ cancelled · ")
	io.WriteString(typing, "what is 2+2?\n")
	waitFor(t, c.stdout, "2+2 = 4\n✓ completed")
	// At the prompt, Ctrl-C quits.
	c.interrupts <- os.Interrupt
	r := wait(t, chatting)
	wantOutput(t, r, exitCancel, "cancelling the run (Ctrl-C again quits)\n", "● thread thread_")
}
