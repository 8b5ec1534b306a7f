package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/logtest"
)

// runIDIn returns the run id of the first "● run" line of out.
func runIDIn(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`● run (run_\w+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	return m[1]
}

// background runs agentctl in a goroutine; its result comes on the channel.
func (c ctl) background(t *testing.T, args ...string) <-chan result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- c.run(t, args...) }()
	return done
}

// wait returns the result of an agentctl run in the background.
func wait(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("agentctl did not return")
		return result{}
	}
}

func TestAttachFollowsARunToItsEnd(t *testing.T) {
	t.Parallel()
	// The run waits for its starter's answer to an approval; a second agentctl, whose
	// input ends at once, attaches and watches.
	in, answer := io.Pipe()
	defer answer.Close()
	starter := ctl{stdin: in, stdout: &logtest.Buffer{}}
	started := starter.background(t, args(plain(t), "run", "save a note: buy milk")...)
	waitFor(t, starter.stdout, "approve save_note?")
	id := runIDIn(t, starter.stdout.String())

	watcher := ctl{stdout: &logtest.Buffer{}}
	watching := watcher.background(t, args(plain(t), "attach", id)...)
	// The watcher's end of input leaves the approval to the starter: the run neither parks
	// nor ends.
	waitFor(t, watcher.stdout, "end of input: 1 approval left for another client to answer; watching the run\n")
	io.WriteString(answer, "y\n")

	r := wait(t, watching)
	wantOutput(t, r, exitOK,
		"● attached to run "+id+" · agent demo · thread thread_",
		" · waiting for approval of save_note · last seq ",
		"● run "+id+" · agent demo",
		"? save_note needs your approval",
		"✓ save_note approved\n",
		"Saved your note \"Buy milk\"",
		"✓ completed · 2 model calls · 1 tool call",
	)
	if strings.Contains(r.stdout, "parks") {
		t.Errorf("the watcher says the run parks:\n%s", r.stdout)
	}
	wantOutput(t, wait(t, started), exitOK, "✓ save_note approved\n", "✓ completed")
}

// agentdClient returns a client of the agentd at addr, closed when the test ends.
func agentdClient(t *testing.T, addr string) agentdv1.AgentServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return agentdv1.NewAgentServiceClient(conn)
}

// startWaiting starts a run that asks to approve save_note on a Run stream of its own,
// reads its events up to the approval_requested, and goes away: the run goes on without
// it and waits for the approval. It returns the run's id and the seq of its last event.
func startWaiting(t *testing.T, addr string) (runID string, lastSeq int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := agentdClient(t, addr).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: "save a note: buy milk"}}}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("before approval_requested: %v", err)
		}
		ev := resp.GetEvent()
		if ev.GetApprovalRequested() != nil {
			return ev.GetRunId(), ev.GetSeq()
		}
	}
}

func TestAttachAnswersTheApprovalAtThePrompt(t *testing.T) {
	t.Parallel()
	id, approvalSeq := startWaiting(t, sharedAgentd(t))
	var last int64

	// Ctrl-C detaches, and says how to attach again.
	in, answer := io.Pipe()
	defer answer.Close()
	c := ctl{stdin: in, interrupts: make(chan os.Signal, 1), stdout: &logtest.Buffer{}}
	detached := c.background(t, args(plain(t), "attach", id)...)
	waitFor(t, c.stdout, "approve save_note? [y]es/[n]o/[e]dit: ")
	c.interrupts <- os.Interrupt
	r := wait(t, detached)
	// The run waits with nothing running on the server (parked), or still holding its
	// step (waiting): agentd chooses.
	m := regexp.MustCompile(` · (?:parked, )?waiting for approval of save_note · last seq (\d+)\n`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no attached line: %s", r)
	}
	if last, _ = strconv.ParseInt(m[1], 10, 64); last < approvalSeq {
		t.Fatalf("attached says last seq %d, before the approval_requested (seq %d)", last, approvalSeq)
	}
	again := cmdLine(t, "attach", id, "--after", strconv.FormatInt(last, 10))
	if r.code != exitCancel || !strings.Contains(r.stderr, "detached; the run goes on. Attach again with: "+again+"\n") {
		t.Fatalf("Ctrl-C: %s\nwant exit %d and %q", r, exitCancel, again)
	}

	// From after the approval_requested: the attached event's pending approval is asked.
	r = ctl{stdin: strings.NewReader("y\n")}.run(t, args(plain(t), "attach", id, "--after", strconv.FormatInt(last, 10))...)
	wantOutput(t, r, exitOK,
		fmt.Sprintf("● attached to run %s · agent demo · thread thread_", id),
		fmt.Sprintf("waiting for approval of save_note · last seq %d\n", last),
		"? save_note needs your approval",
		"approve save_note? [y]es/[n]o/[e]dit: y\n",
		"✓ save_note approved\n",
		"Saved your note \"Buy milk\"",
		"✓ completed · 2 model calls · 1 tool call",
	)
	if n := strings.Count(r.stdout, "approve save_note?"); n != 1 {
		t.Errorf("asked %d times, want once:\n%s", n, r.stdout)
	}
	if strings.Contains(r.stdout, "● run "+id) {
		t.Errorf("events before --after were shown:\n%s", r.stdout)
	}

	// The whole run, as JSON: attached first (seq 0), then every event from seq 1 on.
	r = ctl{}.run(t, args(plain(t), "attach", "--json", id)...)
	if r.code != exitOK {
		t.Fatalf("%s", r)
	}
	evs := parseNDJSON(t, r.stdout)
	if a := evs[0].GetAttached(); a == nil || a.GetState() != agentdv1.RunState_RUN_STATE_FINISHED || evs[0].GetSeq() != 0 {
		t.Errorf("first event %v, want attached with state FINISHED and seq 0", evs[0])
	}
	for i, ev := range evs[1:] {
		if ev.GetSeq() != int64(i+1) {
			t.Errorf("event %d has seq %d, want %d", i+1, ev.GetSeq(), i+1)
		}
	}
	if f := evs[len(evs)-1].GetRunFinished(); f.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Errorf("last event %v, want run_finished COMPLETED", evs[len(evs)-1])
	}
}

func TestAttachToAFinishedRun(t *testing.T) {
	t.Parallel()
	r := ctl{}.run(t, args(plain(t), "run", "--json", "what is 12*7?")...)
	evs := parseNDJSON(t, r.stdout)
	id, last := evs[0].GetRunId(), evs[len(evs)-1].GetSeq()

	r = ctl{}.run(t, args(plain(t), "attach", id)...)
	wantOutput(t, r, exitOK,
		fmt.Sprintf("● attached to run %s · agent demo · thread thread_", id),
		fmt.Sprintf(" · finished · last seq %d\n", last),
		"⚙ calculate {\"expression\":\"12*7\"}\n",
		"\n12*7 = 84\n",
		"✓ completed · 2 model calls · 1 tool call · ",
	)

	// Nothing after the cursor: agentctl still says how the run ended, and exits with it.
	r = ctl{}.run(t, args(plain(t), "attach", id, "--after", strconv.FormatInt(last, 10))...)
	wantOutput(t, r, exitOK, " · finished · last seq ", "✓ completed · 2 model calls")
	if strings.Contains(r.stdout, "12*7 = 84") {
		t.Errorf("events before --after were shown:\n%s", r.stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"attach", "run_nosuchrun"}, "agentctl: attach: NotFound (RUN_NOT_FOUND): "},
		{[]string{"attach", id, "--after", strconv.FormatInt(last+5, 10)}, "agentctl: attach: OutOfRange (CURSOR_AHEAD): "},
	} {
		r := ctl{}.run(t, args(plain(t), tc.args...)...)
		if r.code != exitFailed || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("agentctl %q: %s\nwant exit %d and %q", tc.args, r, exitFailed, tc.want)
		}
	}
}

// proxy forwards TCP connections to an agentd until cut closes them all, as a network
// that fails would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(up, c); up.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, up); c.Close() }()
	}
}

// cut closes every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func TestRunLostConnectionSaysHowToAttach(t *testing.T) {
	t.Parallel()
	px := newProxy(t, sharedAgentd(t))
	in, answer := io.Pipe()
	defer answer.Close()
	c := ctl{stdin: in, stdout: &logtest.Buffer{}}
	running := c.background(t, "--addr", px.addr(), "--plaintext", "run", "save a note: buy milk")
	waitFor(t, c.stdout, "approve save_note?")
	id := runIDIn(t, c.stdout.String())
	px.cut()
	r := wait(t, running)
	m := regexp.MustCompile(`agentctl: the run goes on on the server; follow it with: (agentctl --addr \S+ --plaintext attach (run_\w+) --after (\d+))\n`).FindStringSubmatch(r.stderr)
	if r.code != exitFailed || m == nil || m[2] != id {
		t.Fatalf("%s\nwant exit %d and the attach command of %s", r, exitFailed, id)
	}
	if !strings.Contains(r.stderr, "agentctl: the stream ended before the run finished: Unavailable") {
		t.Errorf("stderr does not say the stream broke: %s", r.stderr)
	}

	// The command it printed, as printed (through the proxy, which takes new
	// connections), follows the run, which still waits for the approval.
	r = ctl{stdin: strings.NewReader("y\n")}.run(t, strings.Fields(m[1])[1:]...)
	wantOutput(t, r, exitOK, "approve save_note? [y]es/[n]o/[e]dit: y\n", "✓ save_note approved\n", "Saved your note \"Buy milk\"")
	if strings.Contains(r.stdout, "⚙ save_note") {
		t.Errorf("events the first agentctl showed were shown again:\n%s", r.stdout)
	}
}
