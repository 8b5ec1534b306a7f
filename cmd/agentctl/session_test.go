package main

import (
	"context"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/logtest"
)

// fakeClient serves Run with a fakeStream the test scripts; the other RPCs are not used.
type fakeClient struct {
	agentdv1.AgentServiceClient
	stream *fakeStream
}

func (c *fakeClient) Run(ctx context.Context, _ ...grpc.CallOption) (agentdv1.AgentService_RunClient, error) {
	c.stream.ctx = ctx
	close(c.stream.opened)
	return c.stream, nil
}

// fakeStream is the client side of a Run stream: the test sends events on events and
// reads what agentctl sent from sent.
type fakeStream struct {
	grpc.ClientStream
	ctx    context.Context
	opened chan struct{}
	events chan *agentdv1.RunEvent
	fail   chan error // ends Recv with the error
	sent   chan *agentdv1.RunRequest
}

func newFakeStream() *fakeStream {
	return &fakeStream{opened: make(chan struct{}), events: make(chan *agentdv1.RunEvent), fail: make(chan error, 1), sent: make(chan *agentdv1.RunRequest, 16)}
}

func (f *fakeStream) Send(r *agentdv1.RunRequest) error {
	f.sent <- r
	return nil
}

func (f *fakeStream) Recv() (*agentdv1.RunResponse, error) {
	select {
	case ev := <-f.events:
		return &agentdv1.RunResponse{Event: ev}, nil
	case err := <-f.fail:
		return nil, err
	case <-f.ctx.Done():
		return nil, status.FromContextError(f.ctx.Err()).Err()
	}
}

func (f *fakeStream) CloseSend() error {
	f.sent <- nil // nil marks the half-close
	return nil
}

// event sends an event, as agentd would.
func (f *fakeStream) event(t *testing.T, ev *agentdv1.RunEvent) {
	t.Helper()
	select {
	case f.events <- ev:
	case <-time.After(5 * time.Second):
		t.Fatalf("agentctl did not take event %v", ev)
	}
}

// next returns what agentctl sent next.
func (f *fakeStream) next(t *testing.T) *agentdv1.RunRequest {
	t.Helper()
	select {
	case r := <-f.sent:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("agentctl sent nothing")
		return nil
	}
}

// fakeRun runs `agentctl run` against a fake stream in the background.
func fakeRun(t *testing.T, cfg runConfig, e env) (*fakeStream, <-chan int) {
	t.Helper()
	fs := newFakeStream()
	code := make(chan int, 1)
	go func() { code <- runAgent(t.Context(), &fakeClient{stream: fs}, cfg, e) }()
	select {
	case <-fs.opened:
	case <-time.After(5 * time.Second):
		t.Fatal("agentctl opened no stream")
	}
	if fs.next(t).GetStart() == nil {
		t.Fatal("the first message is not start")
	}
	return fs, code
}

func exitCode(t *testing.T, code <-chan int) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("agentctl did not return")
		return -1
	}
}

func started() *agentdv1.RunEvent {
	return &agentdv1.RunEvent{Seq: 1, Kind: &agentdv1.RunEvent_RunStarted{RunStarted: &agentdv1.RunStarted{RunId: "run_1", ThreadId: "thread_1", Agent: "demo"}}}
}

func finished(reason agentdv1.RunEndReason) *agentdv1.RunEvent {
	return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_RunFinished{RunFinished: &agentdv1.RunFinished{Reason: reason, Usage: &agentdv1.Usage{ModelCalls: 1}}}}
}

func TestTypedLinesSteer(t *testing.T) {
	in, typing := io.Pipe()
	defer typing.Close()
	out := &logtest.Buffer{}
	fs, code := fakeRun(t, runConfig{prompt: "go"}, env{stdin: in, stdout: out, stderr: io.Discard, getenv: func(string) string { return "" }, stdinTTY: true})
	fs.event(t, started())
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepStarted{StepStarted: &agentdv1.StepStarted{StepId: "step_1"}}})

	io.WriteString(typing, "  and then left\n")
	io.WriteString(typing, "\n") // ignored
	io.WriteString(typing, "!stop, go right\n")
	want := []*agentdv1.RunRequest{
		{ClientSeq: 2, Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "and then left", Mode: agentdv1.SteerMode_STEER_MODE_NEXT_STEP}}},
		{ClientSeq: 3, Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "stop, go right", Mode: agentdv1.SteerMode_STEER_MODE_INTERRUPT}}},
	}
	for _, w := range want {
		if diff := cmp.Diff(w, fs.next(t), protocmp.Transform()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
	}
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_InputAck{InputAck: &agentdv1.InputAck{ClientSeq: 2, Accepted: true}}})
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_InputAck{InputAck: &agentdv1.InputAck{ClientSeq: 3, Error: &agentdv1.RunError{Reason: "STEER_RATE_LIMITED", Message: "too many steers"}}}})
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_SteerApplied{SteerApplied: &agentdv1.SteerApplied{ClientSeq: 2, StepId: "step_2"}}})
	fs.event(t, finished(agentdv1.RunEndReason_RUN_END_REASON_COMPLETED))
	if c := exitCode(t, code); c != exitOK {
		t.Errorf("exit code %d, want 0", c)
	}
	for _, w := range []string{
		"↳ steer sent, for the next step\n",
		"↳ steer sent, interrupting the current step\n",
		"✗ steer refused: STEER_RATE_LIMITED: too many steers\n",
		"↳ steer taken\n",
		"✓ completed · 1 model call · 0 tool calls",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestSecondCtrlCQuits(t *testing.T) {
	interrupts := make(chan os.Signal, 1)
	out := &logtest.Buffer{}
	stderr := &logtest.Buffer{}
	fs, code := fakeRun(t, runConfig{prompt: "go"}, env{stdin: strings.NewReader(""), stdout: out, stderr: stderr, getenv: func(string) string { return "" }, interrupts: interrupts})
	fs.event(t, started())
	interrupts <- os.Interrupt
	if c := fs.next(t).GetCancel(); c == nil {
		t.Fatal("the first Ctrl-C sent no cancel")
	}
	// The server is slow to end the run: the second Ctrl-C does not wait for it.
	interrupts <- os.Interrupt
	if c := exitCode(t, code); c != exitCancel {
		t.Errorf("exit code %d, want %d", c, exitCancel)
	}
	if !strings.Contains(stderr.String(), "agentctl: quit") {
		t.Errorf("stderr = %q", stderr)
	}
}

func TestExpiredApprovalClosesThePrompt(t *testing.T) {
	in, answering := io.Pipe()
	defer answering.Close()
	out := &logtest.Buffer{}
	fs, code := fakeRun(t, runConfig{prompt: "go"}, env{stdin: in, stdout: out, stderr: io.Discard, getenv: func(string) string { return "" }})
	fs.event(t, started())
	for _, id := range []string{"appr_1", "appr_2"} {
		fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalRequested{ApprovalRequested: &agentdv1.ApprovalRequested{
			ApprovalId: id, ToolCallId: "call_" + id, ToolName: "rm_" + id, ArgumentsJson: `{"path":"/"}`,
		}}})
	}
	waitFor(t, out, "approve rm_appr_1? [y]es/[n]o: ")
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
		ApprovalId: "appr_1", Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED, DecidedBy: agentdv1.DecidedBy_DECIDED_BY_TIMEOUT,
	}}})
	waitFor(t, out, "approve rm_appr_2? [y]es/[n]o: ")
	// The line read for the first prompt answers the second, which is the one on screen.
	io.WriteString(answering, "e\n")
	waitFor(t, out, "the server does not let this call's arguments be edited\n")
	io.WriteString(answering, "n too risky\n")
	want := &agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		ApprovalId: "appr_2", Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, Reason: "too risky",
	}}}
	if diff := cmp.Diff(want, fs.next(t), protocmp.Transform()); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	fs.event(t, finished(agentdv1.RunEndReason_RUN_END_REASON_FAILED))
	if c := exitCode(t, code); c != exitFailed {
		t.Errorf("exit code %d, want %d", c, exitFailed)
	}
	if !strings.Contains(out.String(), "✗ rm_appr_1: nobody decided in time, so it was denied\n") {
		t.Errorf("output:\n%s", out)
	}
}

func TestRefusedRun(t *testing.T) {
	stderr := &logtest.Buffer{}
	fs, code := fakeRun(t, runConfig{prompt: "go"}, env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, getenv: func(string) string { return "" }})
	fs.fail <- status.Error(codes.ResourceExhausted, "too many runs")
	if c := exitCode(t, code); c != exitFailed {
		t.Errorf("exit code %d, want %d", c, exitFailed)
	}
	if want := "agentctl: run: ResourceExhausted: too many runs\n"; stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}

func TestLostStreamSaysHowToAttach(t *testing.T) {
	stalled := status.New(codes.ResourceExhausted, "read nothing")
	stalled, _ = stalled.WithDetails(&errdetails.ErrorInfo{Reason: "CLIENT_STALLED", Domain: "agentd"})
	failed := status.New(codes.Unavailable, "the model call failed")
	failed, _ = failed.WithDetails(&errdetails.ErrorInfo{Reason: "MODEL_ERROR", Domain: "agentd"})
	for _, tc := range []struct {
		name string
		err  error
		hint bool
	}{
		{"connection lost", status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{"client stalled", stalled.Err(), true},
		{"--max-time", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"a run's failure", failed.Err(), false},
		{"internal", status.Error(codes.Internal, "boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stderr := &logtest.Buffer{}
			fs, code := fakeRun(t, runConfig{prompt: "go"}, env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, getenv: func(string) string { return "" }})
			fs.event(t, started())
			fs.event(t, &agentdv1.RunEvent{Seq: 2, Kind: &agentdv1.RunEvent_StepStarted{StepStarted: &agentdv1.StepStarted{StepId: "step_1"}}})
			fs.fail <- tc.err
			if c := exitCode(t, code); c != exitFailed {
				t.Errorf("exit code %d, want %d", c, exitFailed)
			}
			const hint = "agentctl: the run goes on on the server; follow it with: agentctl attach run_1 --after 2\n"
			if got := strings.Contains(stderr.String(), hint); got != tc.hint {
				t.Errorf("stderr = %q; hint shown %v, want %v", stderr, got, tc.hint)
			}
		})
	}
}

// fakeAttach runs `agentctl attach` against a fake stream in the background.
func fakeAttach(t *testing.T, cfg attachConfig, e env) (*fakeStream, <-chan int) {
	t.Helper()
	fs := newFakeStream()
	code := make(chan int, 1)
	go func() { code <- runAttach(t.Context(), &fakeClient{stream: fs}, cfg, e) }()
	select {
	case <-fs.opened:
	case <-time.After(5 * time.Second):
		t.Fatal("agentctl opened no stream")
	}
	if a := fs.next(t).GetAttach(); a.GetRunId() != cfg.runID || a.GetAfterSeq() != cfg.after {
		t.Fatalf("the first message attaches to %v, want %s after %d", a, cfg.runID, cfg.after)
	}
	return fs, code
}

func approvalRequested(seq int64, id, tool string) *agentdv1.RunEvent {
	return &agentdv1.RunEvent{Seq: seq, Kind: &agentdv1.RunEvent_ApprovalRequested{ApprovalRequested: &agentdv1.ApprovalRequested{
		ApprovalId: id, ToolCallId: "call_" + id, ToolName: tool, ArgumentsJson: `{}`,
	}}}
}

func TestAttachAsksOnlyWhatTheRunWaitsFor(t *testing.T) {
	in, answering := io.Pipe()
	defer answering.Close()
	out := &logtest.Buffer{}
	fs, code := fakeAttach(t, attachConfig{runID: "run_1"}, env{stdin: in, stdout: out, stderr: io.Discard, getenv: func(string) string { return "" }})
	pending := approvalRequested(4, "appr_2", "rm").GetApprovalRequested()
	fs.event(t, &agentdv1.RunEvent{RunId: "run_1", Kind: &agentdv1.RunEvent_Attached{Attached: &agentdv1.Attached{
		ThreadId: "thread_1", Agent: "demo", State: agentdv1.RunState_RUN_STATE_WAITING, LastSeq: 5,
		PendingApprovals: []*agentdv1.ApprovalRequested{pending},
	}}})
	// The replay: an approval the starter answered, then the one the run waits for, and
	// the ack of the starter's decision, whose client_seq this stream's numbering skips.
	fs.event(t, started())
	fs.event(t, approvalRequested(2, "appr_1", "ls"))
	fs.event(t, &agentdv1.RunEvent{Seq: 3, Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
		ApprovalId: "appr_1", Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, DecidedBy: agentdv1.DecidedBy_DECIDED_BY_CLIENT,
	}}})
	fs.event(t, approvalRequested(4, "appr_2", "rm"))
	fs.event(t, &agentdv1.RunEvent{Seq: 5, Kind: &agentdv1.RunEvent_InputAck{InputAck: &agentdv1.InputAck{ClientSeq: 2, Accepted: true}}})
	waitFor(t, out, "approve rm? [y]es/[n]o: ")
	io.WriteString(answering, "y\n")
	d := fs.next(t)
	if d.GetApprovalDecision().GetApprovalId() != "appr_2" || d.GetClientSeq() <= 2 {
		t.Errorf("sent %v, want the decision on appr_2", d)
	}
	fs.event(t, &agentdv1.RunEvent{Seq: 6, Kind: &agentdv1.RunEvent_InputAck{InputAck: &agentdv1.InputAck{ClientSeq: d.GetClientSeq(), Accepted: true}}})
	fs.event(t, finished(agentdv1.RunEndReason_RUN_END_REASON_COMPLETED))
	if c := exitCode(t, code); c != exitOK {
		t.Errorf("exit code %d, want 0", c)
	}
	for _, w := range []string{
		"● attached to run run_1 · agent demo · thread thread_1 · waiting for approval of rm · last seq 5\n",
		"? ls needs your approval\n",
		"✓ ls approved\n",
		"? rm needs your approval\n",
		"✓ completed · 1 model call · 0 tool calls · 0 tokens in, 0 out\n",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out.String(), "approve ls?") || strings.Count(out.String(), "approve rm?") != 1 {
		t.Errorf("asked other than rm once:\n%s", out)
	}
}

func TestAttachTypedCancel(t *testing.T) {
	in, typing := io.Pipe()
	defer typing.Close()
	out := &logtest.Buffer{}
	fs, code := fakeAttach(t, attachConfig{runID: "run_1", after: 1}, env{stdin: in, stdout: out, stderr: io.Discard, getenv: func(string) string { return "" }, stdinTTY: true})
	fs.event(t, &agentdv1.RunEvent{RunId: "run_1", Kind: &agentdv1.RunEvent_Attached{Attached: &agentdv1.Attached{State: agentdv1.RunState_RUN_STATE_RUNNING, LastSeq: 1}}})
	io.WriteString(typing, "go left\n")
	if s := fs.next(t).GetSteer(); s.GetText() != "go left" {
		t.Errorf("sent %v, want the steer", s)
	}
	io.WriteString(typing, "/cancel\n")
	if c := fs.next(t).GetCancel(); c == nil {
		t.Fatal("/cancel sent no cancel")
	}
	fs.event(t, finished(agentdv1.RunEndReason_RUN_END_REASON_CANCELLED))
	if c := exitCode(t, code); c != exitCancel {
		t.Errorf("exit code %d, want %d", c, exitCancel)
	}
	if !strings.Contains(out.String(), "cancelling the run (Ctrl-C detaches)\n") {
		t.Errorf("output:\n%s", out)
	}
}

// typeKeys types s on a terminal whose output is v and whose keys agentctl reads from
// keys: a terminal echoes the keys itself, where its cursor is, unless agentctl turned
// its echo off to show them on a console of its own.
func typeKeys(t *testing.T, v *vt, keys io.Writer, s string) {
	t.Helper()
	if consoleFor(v) == nil {
		v.Write([]byte(s))
	}
	if _, err := io.WriteString(keys, s); err != nil {
		t.Fatal(err)
	}
}

// On a terminal, what the person types while the answer streams stays on a line of its
// own below the answer, which goes on unbroken; the line sent stays above the steer's
// notice, as in a transcript.
func TestTypingWhileTextStreams(t *testing.T) {
	in, keys := io.Pipe()
	defer keys.Close()
	term := newVT(80)
	fs, code := fakeRun(t, runConfig{prompt: "go"}, env{
		stdin: in, stdout: term, stderr: io.Discard, stdinTTY: true, stdoutTTY: true,
		getenv: func(k string) string { return map[string]string{"NO_COLOR": "1"}[k] },
	})
	fs.event(t, started())
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepStarted{StepStarted: &agentdv1.StepStarted{StepId: "step_1"}}})
	delta := func(s string) {
		fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: "msg_1", Delta: s}}})
	}
	delta("Hello, ")
	term.waitRows(t, "Hello,")
	typeKeys(t, term, keys, "and th")
	term.waitRows(t, "Hello,", "› and th")
	delta("world, ")
	delta("this streams on.")
	typeKeys(t, term, keys, "en lefx\x7ft")
	term.waitRows(t, "Hello, world, this streams on.", "› and then left")
	typeKeys(t, term, keys, "\n")
	if diff := cmp.Diff(&agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "and then left", Mode: agentdv1.SteerMode_STEER_MODE_NEXT_STEP}}}, fs.next(t), protocmp.Transform()); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	delta(" And more.")
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageFinished{MessageFinished: &agentdv1.MessageFinished{MessageId: "msg_1"}}})
	fs.event(t, finished(agentdv1.RunEndReason_RUN_END_REASON_COMPLETED))
	if c := exitCode(t, code); c != exitOK {
		t.Errorf("exit code %d, want 0", c)
	}
	rows, _, _ := term.screen()
	want := []string{
		"● run run_1 · agent demo · model  · thread thread_1",
		"Hello, world, this streams on.",
		"› and then left",
		"↳ steer sent, for the next step",
		" And more.",
	}
	if len(rows) < len(want) || !slices.Equal(rows[:len(want)], want) {
		t.Errorf("terminal:\n%s\nwant it to start\n%s", term, strings.Join(want, "\n"))
	}
}

// In a chat on a terminal, what is typed while a turn's answer streams waits on the input
// line below it, and becomes the next turn's when the prompt comes.
func TestChatTypingAhead(t *testing.T) {
	in, keys := io.Pipe()
	defer keys.Close()
	term := newVT(80)
	fs := newFakeStream()
	code := make(chan int, 1)
	go func() {
		code <- runChat(t.Context(), &fakeClient{stream: fs}, runConfig{}, env{
			stdin: in, stdout: term, stderr: io.Discard, stdinTTY: true, stdoutTTY: true,
			getenv: func(k string) string { return map[string]string{"NO_COLOR": "1"}[k] },
		})
	}()
	term.waitRows(t, "● chat on a new thread · one line a turn, Ctrl-D ends it", "›")
	typeKeys(t, term, keys, "hello\n")
	<-fs.opened
	if fs.next(t).GetStart().GetInput() != "hello" {
		t.Fatal("the turn does not start with the line typed")
	}
	fs.event(t, started())
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: "msg_1", Delta: "Hi"}}})
	term.waitRows(t, "Hi")
	typeKeys(t, term, keys, "ne")
	term.waitRows(t, "Hi", "› ne")
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: "msg_1", Delta: " there."}}})
	typeKeys(t, term, keys, "xt")
	fs.event(t, &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_MessageFinished{MessageFinished: &agentdv1.MessageFinished{MessageId: "msg_1"}}})
	fs.event(t, finished(agentdv1.RunEndReason_RUN_END_REASON_COMPLETED))
	term.waitRows(t, "› next")
	typeKeys(t, term, keys, "\x15\x04") // Ctrl-U, Ctrl-D: the chat ends
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit code %d, want 0", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("agentctl did not return")
	}
	rows, _, _ := term.screen()
	rows = slices.DeleteFunc(rows, func(r string) bool { return r == "" })
	for i, r := range rows {
		rows[i] = regexp.MustCompile(` · [0-9.]+[µm]?s$`).ReplaceAllString(r, "") // the time taken
	}
	want := []string{
		"● chat on a new thread · one line a turn, Ctrl-D ends it",
		"› hello",
		"● run run_1 · agent demo · model  · thread thread_1",
		"Hi there.",
		"✓ completed · 1 model call · 0 tool calls · 0 tokens in, 0 out",
		"● thread thread_1 · continue it with: agentctl chat --thread thread_1",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("terminal:\n%s\nwant\n%s", term, strings.Join(want, "\n"))
	}
}

// A typed agent's result is printed, pretty, under the end's line.
func TestTypedResultPrinted(t *testing.T) {
	out := &logtest.Buffer{}
	fs, code := fakeRun(t, runConfig{prompt: "go"}, env{stdin: strings.NewReader(""), stdout: out, stderr: io.Discard, getenv: func(string) string { return "" }})
	fs.event(t, started())
	fin := finished(agentdv1.RunEndReason_RUN_END_REASON_COMPLETED)
	fin.GetRunFinished().Output = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"city": structpb.NewStringValue("Oslo"), "celsius": structpb.NewNumberValue(-3),
	}})
	fs.event(t, fin)
	if c := exitCode(t, code); c != exitOK {
		t.Errorf("exit code %d, want %d", c, exitOK)
	}
	if want := "  output: {\n    \"celsius\": -3,\n    \"city\": \"Oslo\"\n  }\n"; !strings.Contains(out.String(), want) {
		t.Errorf("output:\n%s\nwant it to hold\n%s", out, want)
	}
}
