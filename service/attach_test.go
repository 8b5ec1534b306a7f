package service_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
	"github.com/agentd/agentd/service/store/memory"
)

// streamGated streams before, waits for gate, then streams after: a model stopped in
// the middle of its answer.
func streamGated(gate <-chan struct{}, before, after []string) rt.Step {
	return rt.Step{Func: func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			for _, p := range before {
				if !yield(rt.Text(p), nil) {
					return
				}
			}
			select {
			case <-gate:
			case <-ctx.Done():
				yield(runtime.ModelEvent{}, ctx.Err())
				return
			}
			for _, ev := range rt.Say(after...).Events {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}}
}

// gatedTool is a tool that runs until gate closes, and says so.
func gatedTool(gate <-chan struct{}, started chan<- struct{}) runtime.Tool {
	return rt.Tool("slow", func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
		close(started)
		select {
		case <-gate:
			return runtime.Output{Text: "done slowly"}, nil
		case <-ctx.Done():
			return runtime.Output{}, ctx.Err()
		}
	})
}

// watch attaches to run id from its first event with AttachRun, and returns the events
// it reads until the stream ends, and how it ended.
func watch(t *testing.T, c agentdv1.AgentServiceClient, id string, after int64) (<-chan []*agentdv1.RunEvent, <-chan error) {
	t.Helper()
	stream, err := c.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: id, AfterSeq: after})
	if err != nil {
		t.Fatal(err)
	}
	evs, errs := make(chan []*agentdv1.RunEvent, 1), make(chan error, 1)
	go func() {
		var got []*agentdv1.RunEvent
		for {
			resp, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				evs <- got
				errs <- err
				return
			}
			got = append(got, resp.GetEvent())
		}
	}()
	return evs, errs
}

// sameEvents fails t unless a and b are the same events, field for field.
func sameEvents(t *testing.T, what string, a, b []*agentdv1.RunEvent) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d events and %d:\n%s\n---\n%s", what, len(a), len(b), servicetest.Render(a), servicetest.Render(b))
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("%s: event %d differs:\n%v\n%v", what, i, a[i], b[i])
		}
	}
}

// A client killed at each phase of a run (streaming the model's answer, awaiting an
// approval, running a tool) does not end the run: a client that attaches with the last
// seq the first one read gets the rest, with nothing missing or repeated, the pending
// approval re-sent in attached, and the run completes; a watcher attached from the
// start saw the same events.
func TestAttach_ClientKilledThenReattached(t *testing.T) {
	type phase struct {
		name string
		// parks says the run waits for the client: with none attached it parks.
		parks bool
		// serve returns the server, the start, the event at which the client is
		// killed, and what lets the run go on once the new client is attached.
		serve func(t *testing.T) (srv *servicetest.Server, spec *agentdv1.RunSpec, at func(*agentdv1.RunEvent) bool, resume func(s *servicetest.Stream, attached *agentdv1.Attached))
	}
	phases := []phase{
		{
			name: "model streaming",
			serve: func(t *testing.T) (*servicetest.Server, *agentdv1.RunSpec, func(*agentdv1.RunEvent) bool, func(*servicetest.Stream, *agentdv1.Attached)) {
				gate := make(chan struct{})
				m := &rt.Model{Steps: []rt.Step{streamGated(gate, []string{"Once ", "upon "}, []string{"a ", "time."})}}
				// The client is killed at its second delta: none may merge.
				srv := newTestServer(t, service.Config{Config: runs.Config{ExactDeltas: true}}, scripted{name: "teller", model: m})
				seen := 0
				return srv, servicetest.Input("teller", "a story"), func(ev *agentdv1.RunEvent) bool {
						if ev.GetTextDelta() != nil {
							seen++
						}
						return seen == 2
					}, func(_ *servicetest.Stream, a *agentdv1.Attached) {
						if a.GetState() != agentdv1.RunState_RUN_STATE_RUNNING {
							t.Errorf("attached says %s, want RUNNING", a.GetState())
						}
						close(gate)
					}
			},
		},
		{
			name: "approval open", parks: true,
			serve: func(t *testing.T) (*servicetest.Server, *agentdv1.RunSpec, func(*agentdv1.RunEvent) bool, func(*servicetest.Stream, *agentdv1.Attached)) {
				m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), rt.Say("echoed")}}
				srv := newTestServer(t, service.Config{}, scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}})
				var id string
				return srv, servicetest.Input("asker", "echo hi"), func(ev *agentdv1.RunEvent) bool {
						id = ev.GetApprovalRequested().GetApprovalId()
						return id != ""
					}, func(s *servicetest.Stream, a *agentdv1.Attached) {
						if a.GetState() != agentdv1.RunState_RUN_STATE_PARKED || len(a.GetPendingApprovals()) != 1 || a.GetPendingApprovals()[0].GetApprovalId() != id || a.GetPendingApprovals()[0].GetToolName() != "echo" {
							t.Errorf("attached %v, want PARKED on approval %s of echo", a, id)
						}
						seq := s.Send(servicetest.Approve(id))
						if ack := s.Until(isAck(seq)).GetInputAck(); !ack.GetAccepted() || ack.GetAttachmentId() == "" || ack.GetAttachmentId() != a.GetAttachmentId() {
							t.Errorf("the decision on the attached stream: %v, want accepted under the stream's attachment_id %q", ack, a.GetAttachmentId())
						}
					}
			},
		},
		{
			name: "tool running",
			serve: func(t *testing.T) (*servicetest.Server, *agentdv1.RunSpec, func(*agentdv1.RunEvent) bool, func(*servicetest.Stream, *agentdv1.Attached)) {
				gate, started := make(chan struct{}), make(chan struct{})
				m := &rt.Model{Steps: []rt.Step{rt.Call(0, "slow", `{}`), rt.Say("it ran")}}
				srv := newTestServer(t, service.Config{}, scripted{name: "worker", model: m, goTools: []runtime.Tool{gatedTool(gate, started)}})
				return srv, servicetest.Input("worker", "work"), func(ev *agentdv1.RunEvent) bool {
						if ev.GetToolExecutionStarted() == nil {
							return false
						}
						<-started
						return true
					}, func(*servicetest.Stream, *agentdv1.Attached) {
						close(gate)
					}
			},
		},
	}
	for _, p := range phases {
		t.Run(p.name, func(t *testing.T) {
			srv, spec, at, resume := p.serve(t)
			conn, c := srv.Connect(t)
			ctx, kill := context.WithCancel(t.Context())
			defer kill()
			rc, err := c.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			first := servicetest.NewStream(t, rc)
			first.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
			runID := first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunId()
			watched, watchEnd := watch(t, srv.Client, runID, 0)
			last := first.Until(at).GetSeq()

			kill() // the client is gone, its connection too
			conn.Close()
			time.Sleep(50 * time.Millisecond)
			// A run that waits for the client parks, and holds no place among the runs
			// going on; the others go on.
			if n, want := srv.Service.ActiveRuns(), map[bool]int{false: 1, true: 0}[p.parks]; n != want {
				t.Fatalf("ActiveRuns() = %d once the client was gone, want %d", n, want)
			}

			_, c2 := srv.Connect(t)
			second := servicetest.Attach(t, c2, runID, last)
			attached := second.Next().GetAttached()
			if attached == nil || attached.GetLastSeq() < last {
				t.Fatalf("first event of the attachment: %v, want attached at seq %d or later", second.Events(), last)
			}
			resume(second, attached)
			for second.Next() != nil {
			}
			if err := second.Err(); err != nil {
				t.Fatalf("the attached stream ended %v, want OK", err)
			}

			var whole []*agentdv1.RunEvent
			for _, ev := range servicetest.Numbered(first.Events()) {
				if ev.GetSeq() <= last {
					whole = append(whole, ev)
				}
			}
			whole = append(whole, servicetest.Numbered(second.Events())...)
			servicetest.CheckEvents(t, whole)
			if r := whole[len(whole)-1].GetRunFinished(); r.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Fatalf("the run ended %v, want COMPLETED", r)
			}
			if err := <-watchEnd; err != nil {
				t.Fatalf("the watcher's stream ended %v, want OK", err)
			}
			sameEvents(t, "the watcher and the two clients together", servicetest.Numbered(<-watched), whole)
		})
	}
}

// An approval is decided with SendRunInput from another connection: the decision is
// acked in the journal, under its client_key, before the tool runs; a retry with the
// same key returns the same ack and does nothing more; the same key for another input
// is refused; a finished run takes no input.
func TestSendRunInput_ApprovesFromAnotherClient(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), rt.Say("echoed")}}
	srv := newTestServer(t, service.Config{}, scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}})
	s := servicetest.Open(t, srv.Client, servicetest.Input("asker", "echo hi"))
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
	_, other := srv.Connect(t)
	in := &agentdv1.SendRunInputRequest{RunId: req.GetRunId(), ClientKey: "slack-1", Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		ApprovalId: req.GetApprovalRequested().GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
	}}}
	resp, err := other.SendRunInput(t.Context(), in)
	if err != nil || !resp.GetAck().GetAccepted() || resp.GetAck().GetClientKey() != "slack-1" || resp.GetSeq() <= req.GetSeq() {
		t.Fatalf("SendRunInput: %v, %v; want an accepted ack under slack-1 after seq %d", resp, err, req.GetSeq())
	}
	again, err := other.SendRunInput(t.Context(), in)
	if err != nil || !proto.Equal(again, resp) {
		t.Errorf("the retry: %v, %v; want the first answer, %v", again, err, resp)
	}
	reused := proto.CloneOf(in)
	reused.Input = &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{}}
	if _, err := other.SendRunInput(t.Context(), reused); status.Code(err) != codes.InvalidArgument {
		t.Errorf("the key reused for a cancel: %v, want INVALID_ARGUMENT", err)
	}
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("the run ended %v, %v", fin, err)
	}
	acks := 0
	for _, ev := range s.Events() {
		if a := ev.GetInputAck(); a.GetClientKey() == "slack-1" {
			acks++
			if ev.GetSeq() != resp.GetSeq() {
				t.Errorf("the ack is seq %d on the stream, %d in SendRunInput's answer", ev.GetSeq(), resp.GetSeq())
			}
		}
		if ev.GetToolExecutionStarted() != nil && acks == 0 {
			t.Error("the tool started before the decision's ack")
		}
	}
	if acks != 1 {
		t.Errorf("%d acks of slack-1 on the stream, want 1", acks)
	}
	late := proto.CloneOf(in)
	late.ClientKey = "slack-2"
	if _, err := other.SendRunInput(t.Context(), late); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("input for a finished run: %v, want FAILED_PRECONDITION", err)
	}
}

// Attaching is refused with a typed status: an unknown run, a cursor past the run's end,
// below what its journal keeps, another caller's run; a finished run replays to its
// run_finished and the stream ends OK.
func TestAttach_Refusals(t *testing.T) {
	identity := func(ctx context.Context) string {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-who"); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	pieces := make([]string, 300)
	for i := range pieces {
		pieces[i] = "word "
	}
	srv := newTestServer(t, service.Config{Config: runs.Config{Identity: identity, Store: memory.New(memory.Options{MaxRunBytes: 4096})}}, scripted{name: "talker", model: &rt.Model{Steps: []rt.Step{rt.Say(pieces...)}}})
	as := func(who string) context.Context { return metadata.AppendToOutgoingContext(t.Context(), "x-who", who) }
	rc, err := srv.Client.Run(as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rc)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("talker", "talk")}})
	fin, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	evs := servicetest.Numbered(s.Events())
	runID, last := evs[0].GetRunId(), evs[len(evs)-1].GetSeq()
	attach := func(ctx context.Context, id string, after int64) ([]*agentdv1.RunEvent, error) {
		stream, err := srv.Client.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: id, AfterSeq: after})
		if err != nil {
			return nil, err
		}
		var got []*agentdv1.RunEvent
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			got = append(got, resp.GetEvent())
		}
	}
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		id     string
		after  int64
		code   codes.Code
		reason string
		meta   string
	}{
		{"unknown run", as("alice"), "run_nope", 0, codes.NotFound, "RUN_NOT_FOUND", "run_id"},
		{"another caller's run", as("bob"), runID, 0, codes.NotFound, "RUN_NOT_FOUND", "run_id"},
		{"anonymous, for another's run", t.Context(), runID, 0, codes.NotFound, "RUN_NOT_FOUND", "run_id"},
		{"cursor ahead", as("alice"), runID, last + 1, codes.OutOfRange, "CURSOR_AHEAD", "last_seq"},
		{"cursor below the journal", as("alice"), runID, 0, codes.OutOfRange, "EVENTS_EXPIRED", "oldest_seq"},
		{"negative cursor", as("alice"), runID, -1, codes.InvalidArgument, "INVALID_ARGUMENT", ""},
	} {
		_, err := attach(tt.ctx, tt.id, tt.after)
		code, reason, _ := errorInfo(err)
		if code != tt.code || reason != tt.reason {
			t.Errorf("%s: %v, want %s (%s)", tt.name, err, tt.code, tt.reason)
		}
		if tt.meta != "" && metaOf(err)[tt.meta] == "" {
			t.Errorf("%s: ErrorInfo lacks %s: %v", tt.name, tt.meta, err)
		}
	}
	_, err = attach(as("alice"), runID, 0)
	oldest, _ := strconv.ParseInt(metaOf(err)["oldest_seq"], 10, 64)
	if oldest <= 1 || oldest > last {
		t.Fatalf("oldest_seq %d of a journal of %d events bounded to 4 KiB", oldest, last)
	}
	got, err := attach(as("alice"), runID, oldest-1)
	if err != nil {
		t.Fatalf("attaching to the finished run from its oldest event: %v", err)
	}
	if a := got[0].GetAttached(); a.GetState() != agentdv1.RunState_RUN_STATE_FINISHED || a.GetLastSeq() != last || a.GetOldestSeq() != oldest {
		t.Errorf("attached %v, want FINISHED at %d, oldest %d", a, last, oldest)
	}
	sameEvents(t, "the finished run's replay", got[1:], evs[oldest-1:])
	if !proto.Equal(got[len(got)-1].GetRunFinished(), fin) {
		t.Error("the replay does not end with the run's run_finished")
	}
}

// metaOf returns the ErrorInfo metadata of a status error.
func metaOf(err error) map[string]string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(interface{ GetMetadata() map[string]string }); ok {
			return ei.GetMetadata()
		}
	}
	return nil
}

// Streams attached to a run are bounded per run and per caller: five thousand of them,
// each a goroutine and a cursor, once cost 131 MiB and ten thousand goroutines. One
// past a limit is refused RESOURCE_EXHAUSTED naming it, and a stream let go frees its
// place.
func TestAttach_AttachmentsAreBounded(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), rt.Call(0, "echo", `{"step":0,"text":"hi"}`)}}
	srv := newTestServer(t, service.Config{Config: runs.Config{Identity: threadIdentity, MaxAttachmentsPerRun: 3, MaxAttachmentsPerCaller: 4}},
		scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}})
	as := func(who string) context.Context { return metadata.AppendToOutgoingContext(t.Context(), "x-who", who) }
	waiting := func(who string) string {
		rc, err := srv.Client.Run(as(who))
		if err != nil {
			t.Fatal(err)
		}
		s := servicetest.NewStream(t, rc)
		s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("asker", "echo hi")}})
		return s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetRunId()
	}
	attach := func(ctx context.Context, id string) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(ctx)
		stream, err := srv.Client.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: id})
		if err == nil {
			_, err = stream.Recv() // attached, or the refusal
		}
		if err != nil {
			cancel()
		}
		return cancel, err
	}
	wantRefused := func(what string, err error) {
		t.Helper()
		if code, reason, _ := errorInfo(err); code != codes.ResourceExhausted || reason != "TOO_MANY_ATTACHMENTS" {
			t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED TOO_MANY_ATTACHMENTS", what, err)
		}
	}
	run := waiting("alice")
	// The stream that started the run is one of its three.
	var held []context.CancelFunc
	for i := range 2 {
		cancel, err := attach(as("alice"), run)
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		held = append(held, cancel)
	}
	_, err := attach(as("alice"), run)
	wantRefused("a fourth stream on the run", err)
	held[0]()
	var cancel context.CancelFunc
	for range 100 { // the freed place is given back once the stream's RPC has returned
		if cancel, err = attach(as("alice"), run); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("attach after one let go: %v", err)
	}
	held[0] = cancel
	other := waiting("alice")
	for i := range 3 {
		cancel, err := attach(as("alice"), other)
		if i < 2 && err != nil {
			t.Fatalf("alice's attachment %d: %v", 3+i, err)
		}
		if i == 2 {
			wantRefused("alice's fifth attachment", err)
			break
		}
		held = append(held, cancel)
	}
	if cancel, err := attach(as("bob"), run); err == nil || status.Code(err) != codes.NotFound {
		t.Errorf("bob attaching to alice's run: %v, want NOT_FOUND", err)
		if cancel != nil {
			cancel()
		}
	}
	for _, c := range held {
		c()
	}
}
