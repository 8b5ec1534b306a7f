package servicetest

import (
	"errors"
	"io"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// Stream is a client's side of a Run stream that keeps every event it reads, so that a
// test can drive a run step by step ([Stream.Until]) and then look at all of it
// ([Stream.Events]). It numbers what it sends with client_seq from 1, as a client must.
//
// A Stream is not safe for concurrent use: the test's goroutine drives it, and its
// methods end the test with t.Fatal when the stream breaks the contract or a Send fails.
type Stream struct {
	t      testing.TB
	rc     agentdv1.AgentService_RunClient
	seq    int64
	events []*agentdv1.RunEvent
	err    error // the status the stream ended with, once it has
	done   bool
}

// Open opens a Run stream on c with t's context and sends spec as its start message
// (client_seq 1).
func Open(t testing.TB, c agentdv1.AgentServiceClient, spec *agentdv1.RunSpec) *Stream {
	t.Helper()
	rc, err := c.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
	return s
}

// Attach opens a Run stream on c with t's context whose first message attaches it to run
// id after seq after (client_seq 1).
func Attach(t testing.TB, c agentdv1.AgentServiceClient, id string, after int64) *Stream {
	t.Helper()
	rc, err := c.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Attach{Attach: &agentdv1.Attach{RunId: id, AfterSeq: after}}})
	return s
}

// NewStream wraps a Run stream that the test opened itself (with call options or a
// context of its own) and sends nothing: the first [Stream.Send] is client_seq 1 unless
// messages went out on rc before.
func NewStream(t testing.TB, rc agentdv1.AgentService_RunClient) *Stream {
	return &Stream{t: t, rc: rc}
}

// Send sends req with the next client_seq, which it sets and returns. A stream the server
// has already ended is no failure (io.EOF): what it ended with is for [Stream.Finish].
func (s *Stream) Send(req *agentdv1.RunRequest) int64 {
	s.t.Helper()
	req.ClientSeq = s.NextSeq()
	if err := s.rc.Send(req); err != nil && !errors.Is(err, io.EOF) {
		s.t.Fatalf("Send: %v", err)
	}
	return req.ClientSeq
}

// NextSeq takes the next client_seq for a message sent on [Stream.RunClient] directly,
// such as one a typed Send could not encode.
func (s *Stream) NextSeq() int64 {
	s.seq++
	return s.seq
}

// RunClient returns the stream underneath.
func (s *Stream) RunClient() agentdv1.AgentService_RunClient { return s.rc }

// Next reads the next event, or returns nil once the stream has ended; [Stream.Err] then
// holds the status it ended with.
func (s *Stream) Next() *agentdv1.RunEvent {
	s.t.Helper()
	if s.done {
		return nil
	}
	resp, err := s.rc.Recv()
	if err != nil {
		s.done = true
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
		return nil
	}
	s.events = append(s.events, resp.GetEvent())
	return resp.GetEvent()
}

// Until reads events until one matches and returns it; the stream ending first fails the
// test, showing the events read.
func (s *Stream) Until(match func(*agentdv1.RunEvent) bool) *agentdv1.RunEvent {
	s.t.Helper()
	for {
		ev := s.Next()
		if ev == nil {
			s.t.Fatalf("the stream ended (%v) before the event awaited; events:\n%s", s.err, Render(s.events))
		}
		if match(ev) {
			return ev
		}
	}
}

// Finish reads to the end of the stream, checks that its events keep the contract's
// ordering rules ([CheckEvents]), and returns its run_finished and the status it ended
// with.
func (s *Stream) Finish() (*agentdv1.RunFinished, error) {
	s.t.Helper()
	for s.Next() != nil {
	}
	if len(s.events) == 0 {
		s.t.Fatalf("no events; the stream ended with %v", s.err)
	}
	CheckEvents(s.t, s.events)
	return s.events[len(s.events)-1].GetRunFinished(), s.err
}

// Events returns the events read so far, in order, heartbeats included. The slice is the
// Stream's own: it grows as the stream is read.
func (s *Stream) Events() []*agentdv1.RunEvent { return s.events }

// Err returns the status the stream ended with: nil while it is open and when it ended
// cleanly.
func (s *Stream) Err() error { return s.err }

// Render shows events one a line, for a failure message.
func Render(evs []*agentdv1.RunEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Numbered returns the journaled events of evs: all but heartbeats and attached.
func Numbered(evs []*agentdv1.RunEvent) []*agentdv1.RunEvent {
	var out []*agentdv1.RunEvent
	for _, ev := range evs {
		if ev.GetHeartbeat() == nil && ev.GetAttached() == nil {
			out = append(out, ev)
		}
	}
	return out
}

// CheckEvents fails t unless evs keep the ordering rules of the contract: seq from 1
// without gaps (heartbeats and attached take none), run_started first, run_finished
// last, one of each, every event with its run_id and time.
func CheckEvents(t testing.TB, evs []*agentdv1.RunEvent) {
	t.Helper()
	for _, ev := range evs {
		switch {
		case ev.GetHeartbeat() != nil && ev.GetSeq() != 0:
			t.Errorf("heartbeat with seq %d", ev.GetSeq())
		case ev.GetAttached() != nil && ev.GetSeq() != 0:
			t.Errorf("attached with seq %d", ev.GetSeq())
		}
	}
	numbered := Numbered(evs)
	for i, ev := range numbered {
		if ev.GetSeq() != int64(i+1) {
			t.Fatalf("event %d has seq %d; events:\n%s", i, ev.GetSeq(), Render(evs))
		}
		if ev.GetRunId() == "" || ev.GetTime() == nil {
			t.Errorf("event %d lacks run_id or time", i)
		}
	}
	if len(numbered) == 0 || numbered[0].GetRunStarted() == nil {
		t.Fatalf("first event is not run_started:\n%s", Render(evs))
	}
	if numbered[len(numbered)-1].GetRunFinished() == nil {
		t.Fatalf("last event is not run_finished:\n%s", Render(evs))
	}
	starts, ends := 0, 0
	for _, ev := range numbered {
		if ev.GetRunStarted() != nil {
			starts++
		}
		if ev.GetRunFinished() != nil {
			ends++
		}
	}
	if starts != 1 || ends != 1 {
		t.Errorf("%d run_started and %d run_finished, want one each", starts, ends)
	}
}

// Input returns the start of a run of agent ("" for the default) on text.
func Input(agent, text string) *agentdv1.RunSpec {
	return &agentdv1.RunSpec{Agent: agent, Input: text}
}

// Approve returns the decision that approves the approval id as asked.
func Approve(id string) *agentdv1.RunRequest {
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		ApprovalId: id, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
	}}}
}
