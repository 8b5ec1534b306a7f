package servicetest_test

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

func newClient(t *testing.T) agentdv1.AgentServiceClient {
	return servicetest.NewClient(t, service.Config{Logger: slog.New(slog.DiscardHandler)})
}

// A run driven through a Stream: the start is client_seq 1, a decision the next one, its
// ack comes back under that seq, and Finish returns the completed run with every event
// kept in order.
func TestStream_DrivesARun(t *testing.T) {
	s := servicetest.Open(t, newClient(t), servicetest.Input("", "save a note: milk"))
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	seq := s.Send(servicetest.Approve(req.GetApprovalId()))
	if seq != 2 {
		t.Errorf("the decision went out as client_seq %d, want 2 (the start was 1)", seq)
	}
	if a := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetInputAck() != nil }).GetInputAck(); a.GetClientSeq() != seq || !a.GetAccepted() {
		t.Errorf("ack %v, want client_seq %d accepted", a, seq)
	}
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v, %v; want completed\n%s", fin.GetReason(), err, servicetest.Render(s.Events()))
	}
	evs := s.Events()
	if evs[0].GetRunStarted() == nil || evs[len(evs)-1].GetRunFinished() != fin {
		t.Errorf("Events() does not run from run_started to the run_finished Finish returned:\n%s", servicetest.Render(evs))
	}
	if s.Next() != nil || s.Err() != nil {
		t.Errorf("after the end: Next() is not nil or Err() = %v", s.Err())
	}
	if got, want := strings.Count(servicetest.Render(evs), "\n"), len(evs); got != want {
		t.Errorf("Render wrote %d lines for %d events", got, want)
	}
}

// A stream the server refuses has no events and keeps the refusal in Err; Until and
// Finish fail the test rather than hand back nothing.
func TestStream_RefusedStream(t *testing.T) {
	c := newClient(t)
	s := servicetest.Open(t, c, servicetest.Input("no such agent", "hi"))
	if ev := s.Next(); ev != nil {
		t.Fatalf("event %v from a stream with an unknown agent", ev)
	}
	if code := status.Code(s.Err()); code != codes.NotFound {
		t.Errorf("Err() = %v, want NOT_FOUND", s.Err())
	}
	if len(s.Events()) != 0 {
		t.Errorf("events %v, want none", s.Events())
	}

	until := failure(t, func(tb testing.TB) {
		servicetest.NewStream(tb, s.RunClient()).Until(func(*agentdv1.RunEvent) bool { return true })
	})
	if !strings.Contains(until, "the stream ended") {
		t.Errorf("Until on an ended stream failed with %q, want it to say the stream ended", until)
	}
	finish := failure(t, func(tb testing.TB) {
		servicetest.Open(tb, c, servicetest.Input("no such agent", "hi")).Finish()
	})
	if !strings.Contains(finish, "no events") || !strings.Contains(finish, "NotFound") {
		t.Errorf("Finish on a refused stream failed with %q, want no events and the status", finish)
	}
}

// Finish checks the order of the events it read: a stream that skips a seq fails the
// test even though it ends with run_finished and no error.
func TestStream_FinishChecksTheOrder(t *testing.T) {
	rc := &fakeRun{evs: []*agentdv1.RunEvent{event(1, "started"), event(3, "finished")}}
	got := failure(t, func(tb testing.TB) { servicetest.NewStream(tb, rc).Finish() })
	if !strings.Contains(got, "event 1 has seq 3") {
		t.Errorf("Finish failed with %q, want the gap named", got)
	}
}

// CheckEvents accepts a stream that keeps the contract's order and names each way of
// breaking it.
func TestCheckEvents(t *testing.T) {
	now := timestamppb.Now()
	tests := []struct {
		name string
		evs  []*agentdv1.RunEvent
		want string // "" when the events keep the rules
	}{
		{"in order", []*agentdv1.RunEvent{event(1, "started"), event(0, "heartbeat"), event(2, "text"), event(3, "finished")}, ""},
		{"gap", []*agentdv1.RunEvent{event(1, "started"), event(3, "finished")}, "event 1 has seq 3"},
		{"numbered heartbeat", []*agentdv1.RunEvent{event(1, "started"), event(2, "heartbeat"), event(2, "finished")}, "heartbeat with seq 2"},
		{"no start", []*agentdv1.RunEvent{event(1, "text"), event(2, "finished")}, "first event is not run_started"},
		{"no finish", []*agentdv1.RunEvent{event(1, "started"), event(2, "text")}, "last event is not run_finished"},
		{"two starts", []*agentdv1.RunEvent{event(1, "started"), event(2, "started"), event(3, "finished")}, "2 run_started and 1 run_finished"},
		{"no run id", []*agentdv1.RunEvent{event(1, "started"), {Seq: 2, Time: now, Kind: &agentdv1.RunEvent_RunFinished{RunFinished: &agentdv1.RunFinished{}}}}, "event 1 lacks run_id or time"},
		{"none", nil, "first event is not run_started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := failure(t, func(tb testing.TB) { servicetest.CheckEvents(tb, tt.evs) })
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("CheckEvents failed with %q, want %q", got, tt.want)
			}
		})
	}
}

// event returns an event of run_1 with seq and a kind: started, text, heartbeat or
// finished.
func event(seq int64, kind string) *agentdv1.RunEvent {
	e := &agentdv1.RunEvent{Seq: seq, RunId: "run_1", Time: timestamppb.Now()}
	switch kind {
	case "started":
		e.Kind = &agentdv1.RunEvent_RunStarted{RunStarted: &agentdv1.RunStarted{}}
	case "text":
		e.Kind = &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{Delta: "hi"}}
	case "heartbeat":
		e.Kind = &agentdv1.RunEvent_Heartbeat{Heartbeat: &agentdv1.Heartbeat{}}
	case "finished":
		e.Kind = &agentdv1.RunEvent_RunFinished{RunFinished: &agentdv1.RunFinished{}}
	}
	return e
}

// fakeRun is a Run stream that accepts every message and answers with evs, then io.EOF.
type fakeRun struct {
	agentdv1.AgentService_RunClient
	evs []*agentdv1.RunEvent
}

func (f *fakeRun) Send(*agentdv1.RunRequest) error { return nil }

func (f *fakeRun) Recv() (*agentdv1.RunResponse, error) {
	if len(f.evs) == 0 {
		return nil, io.EOF
	}
	ev := f.evs[0]
	f.evs = f.evs[1:]
	return &agentdv1.RunResponse{Event: ev}, nil
}

// failure runs f with a testing.TB that records failures instead of failing t, and
// returns what f reported, "" if nothing. A Fatal ends f's goroutine, as it ends a test.
func failure(t *testing.T, f func(testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return strings.Join(r.msgs, "\n")
}

// recorder is the test it embeds, except that failures are kept rather than reported.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	runtime.Goexit()
}
