package service_test

import (
	"context"
	"fmt"
	"net"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// awaitApproval opens a Run of the demo agent saving a note, and reads up to its approval.
func awaitApproval(t *testing.T, c agentdv1.AgentServiceClient) (*servicetest.Stream, *agentdv1.ApprovalRequested) {
	t.Helper()
	s := servicetest.Open(t, c, servicetest.Input("", "save a note: buy milk"))
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	return s, req
}

func steerText(text string) *agentdv1.RunRequest {
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: text}}}
}

func ping() *agentdv1.RunRequest {
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}}
}

func cancelMsg() *agentdv1.RunRequest {
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{}}}
}

// While a run waits on an approval, the steers it holds are bounded in number and in
// bytes; past either bound a steer is refused in its ack, naming the limit.
func TestBounds_QueuedSteersAreBounded(t *testing.T) {
	cfg := service.Config{Config: runs.Config{SteerRate: 1000, SteerBurst: 1000, MaxQueuedSteers: 3, MaxQueuedSteerBytes: 64 << 10}}
	s, _ := awaitApproval(t, newTestServer(t, cfg).Client)
	var seqs []int64
	for i := range 4 {
		seqs = append(seqs, s.Send(steerText("steer "+string(rune('a'+i)))))
	}
	s.Until(isAck(seqs[3]))
	for _, seq := range seqs[:3] {
		if a := ack(s.Events(), seq); !a.GetAccepted() {
			t.Errorf("steer %d refused: %v", seq, a.GetError())
		}
	}
	if a := ack(s.Events(), seqs[3]); a.GetAccepted() || a.GetError().GetReason() != "STEER_QUEUE_FULL" || !strings.Contains(a.GetError().GetMessage(), "3 steers already wait") {
		t.Errorf("fourth steer: %v, want STEER_QUEUE_FULL saying 3 steers wait", a)
	}

	s2, _ := awaitApproval(t, newTestServer(t, service.Config{Config: runs.Config{SteerRate: 1000, SteerBurst: 1000, MaxQueuedSteerBytes: 1 << 20}}).Client)
	big := strings.Repeat("x", 600<<10)
	first, second := s2.Send(steerText(big)), s2.Send(steerText(big))
	s2.Until(isAck(second))
	if !ack(s2.Events(), first).GetAccepted() {
		t.Errorf("first 600 KiB steer refused: %v", ack(s2.Events(), first).GetError())
	}
	if a := ack(s2.Events(), second); a.GetAccepted() || a.GetError().GetReason() != "STEER_QUEUE_FULL" || !strings.Contains(a.GetError().GetMessage(), "more than the 1048576 this server holds") {
		t.Errorf("second 600 KiB steer: %v, want STEER_QUEUE_FULL naming the byte limit", a)
	}
}

// Timeouts a client chooses are capped by the server's maximum.
func TestBounds_ClientChosenTimeoutsAreCapped(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	long := durationpb.New(1000 * time.Hour)
	tests := []struct {
		name  string
		spec  *agentdv1.RunSpec
		field string
	}{
		{"approval_timeout", &agentdv1.RunSpec{Input: "hi", Config: &agentdv1.RunConfig{ApprovalTimeout: long}}, "start.config.approval_timeout"},
		{"client tool timeout", &agentdv1.RunSpec{Input: "hi", ClientTools: []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "pick"}, Timeout: long}}}, "start.client_tools[0].timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: tt.spec}}); err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			code, _, br := errorInfo(err)
			if code != codes.InvalidArgument || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != tt.field || !strings.Contains(br.GetFieldViolations()[0].GetDescription(), "longer than the server allows") {
				t.Errorf("got %v %v, want INVALID_ARGUMENT naming %s", err, br, tt.field)
			}
		})
	}
}

// A steer acked while the run waits on an approval takes effect even when the run then
// parks: the continuation carries it, and the run applies it where it resumes.
func TestInput_SteerAckedBeforeAParkIsAppliedOnResume(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	s, req := awaitApproval(t, c)
	seq := s.Send(steerText("and buy eggs"))
	s.Until(isAck(seq))
	if !ack(s.Events(), seq).GetAccepted() {
		t.Fatalf("steer refused: %v", ack(s.Events(), seq).GetError())
	}
	s.RunClient().CloseSend() // nobody is left to decide: the run parks
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT {
		t.Fatalf("finished %v %v, want awaiting input", fin.GetReason(), err)
	}
	for _, ev := range s.Events() {
		if ev.GetSteerApplied().GetClientSeq() == seq {
			t.Fatalf("steer_applied before the resume: %v", ev)
		}
	}

	// Resume on another replica sharing the key, with the decision.
	c2 := newTestServer(t, service.Config{}).Client
	r := servicetest.Open(t, c2, &agentdv1.RunSpec{
		Messages: fin.GetNewMessages(), Continuation: fin.GetContinuation(),
		Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: req.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}},
	})
	fin2, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var got *agentdv1.SteerApplied
	for _, ev := range r.Events() {
		if a := ev.GetSteerApplied(); a != nil && a.GetClientSeq() != 0 {
			got = a
		}
	}
	if got == nil || got.GetClientSeq() != seq || got.GetDropped() {
		t.Fatalf("steer_applied on resume = %v, want client_seq %d applied", got, seq)
	}
	found := false
	for _, m := range fin2.GetNewMessages() {
		if m.GetRole() == agentdv1.Role_ROLE_USER && len(m.GetParts()) == 1 && m.GetParts()[0].GetText() == "and buy eggs" {
			found = true
		}
	}
	if !found {
		t.Errorf("the resumed run's new messages lack the steer:\n%v", fin2.GetNewMessages())
	}
}

// A decision for an approval that expired is refused: an accepted ack means the decision
// takes effect.
func TestInput_DecisionAfterTheApprovalExpiredIsRefused(t *testing.T) {
	gate := make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), gated(gate, "moving on")}}
	c := newTestServer(t, service.Config{}, scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}}).Client
	spec := servicetest.Input("asker", "go")
	spec.Config = &agentdv1.RunConfig{ApprovalTimeout: durationpb.New(10 * time.Millisecond)}
	s := servicetest.Open(t, c, spec)
	res := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalResolved() != nil }).GetApprovalResolved()
	if res.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED {
		t.Fatalf("approval_resolved %v, want expired", res)
	}
	late := s.Send(servicetest.Approve(res.GetApprovalId()))
	a := s.Until(isAck(late)).GetInputAck()
	close(gate)
	if _, err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	if a.GetAccepted() || a.GetError().GetReason() != "APPROVAL_CLOSED" || !strings.Contains(a.GetError().GetMessage(), "expired") {
		t.Errorf("late decision ack %v, want APPROVAL_CLOSED saying it expired", a)
	}
}

// holdAfterRun holds every run in AfterRun until release is closed, so that a test can
// see the acks of messages sent as a run ends.
type holdAfterRun struct {
	runtime.NoHooks
	release chan struct{}
}

func (h holdAfterRun) AfterRun(context.Context, *runtime.RunInfo, *runtime.RunFinished) { <-h.release }

// After a cancel, a decision or a steer can no longer take effect: each is refused.
func TestInput_InputAfterACancelIsRefused(t *testing.T) {
	hold := holdAfterRun{release: make(chan struct{})}
	c := newTestServerWith(t, service.Config{}, hold).Client
	s, req := awaitApproval(t, c)
	cancelled := s.Send(cancelMsg())
	decided := s.Send(servicetest.Approve(req.GetApprovalId()))
	steered := s.Send(steerText("wait"))
	s.Until(isAck(steered))
	close(hold.release)
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	if !ack(s.Events(), cancelled).GetAccepted() {
		t.Errorf("cancel refused")
	}
	for _, seq := range []int64{decided, steered} {
		if a := ack(s.Events(), seq); a.GetAccepted() || a.GetError().GetReason() != "RUN_ENDING" || !strings.Contains(a.GetError().GetMessage(), "cancelled") {
			t.Errorf("ack of %d: %v, want RUN_ENDING saying the run was cancelled", seq, a)
		}
	}
	for _, ev := range s.Events() {
		if r := ev.GetApprovalResolved(); r != nil && r.GetOutcome() == agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
			t.Errorf("the approval was approved after the cancel: %v", r)
		}
	}
}

// A steer is new user input: the same checks as a start's input apply to it.
func TestInput_SteerMessagesAreChecked(t *testing.T) {
	part := func(p *agentdv1.Part) *agentdv1.RunRequest {
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Message: &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{p}}}}}
	}
	tests := []struct {
		name string
		msg  *agentdv1.RunRequest
		says string
	}{
		{"tool call", part(&agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "c1", Name: "save_note", ArgumentsJson: `{}`}}}), "tool_call parts"},
		{"tool result", part(&agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "c1", Output: &agentdv1.ToolResultPart_Text{Text: "ok"}}}}), "steer.message"},
		{"reasoning", part(&agentdv1.Part{Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: "I decided"}}}), "reasoning parts"},
		{"assistant role", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Message: &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "sure"}}}}}}}, "a steer is a user message"},
	}
	s, req := awaitApproval(t, newTestServer(t, service.Config{}).Client)
	for _, tt := range tests {
		seq := s.Send(tt.msg)
		a := s.Until(isAck(seq)).GetInputAck()
		if a.GetAccepted() || a.GetError().GetReason() != "INVALID_STEER" || !strings.Contains(a.GetError().GetMessage(), tt.says) {
			t.Errorf("%s: ack %v, want INVALID_STEER saying %q", tt.name, a, tt.says)
		}
	}
	s.Send(servicetest.Approve(req.GetApprovalId()))
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	for _, m := range fin.GetNewMessages() {
		for _, p := range m.GetParts() {
			if m.GetRole() == agentdv1.Role_ROLE_USER && p.GetText() == "" {
				t.Errorf("a refused steer reached the transcript: %v", m)
			}
		}
	}
}

// Every kind of client message is bounded per stream: a flood of pings is refused past
// the stream's rate, and the run goes on.
func TestBounds_EveryMessageKindIsRateLimited(t *testing.T) {
	s, _ := awaitApproval(t, newTestServer(t, service.Config{Config: runs.Config{MessageRate: 50, MessageBurst: 10}}).Client)
	var seqs []int64
	for range 40 {
		seqs = append(seqs, s.Send(ping()))
	}
	s.Until(isAck(seqs[len(seqs)-1]))
	refused := 0
	for _, seq := range seqs {
		a := ack(s.Events(), seq)
		if a == nil {
			t.Fatalf("ping %d got no ack", seq)
		}
		if !a.GetAccepted() {
			refused++
			if a.GetError().GetReason() != "RATE_LIMITED" {
				t.Errorf("ping %d refused %v, want RATE_LIMITED", seq, a.GetError())
			}
		}
	}
	if refused == 0 {
		t.Error("40 pings at once, past a burst of 10, and none was refused")
	}
	// A cancel is never refused, however the stream stands: the flood has spent the
	// stream's tokens.
	cancelled := s.Send(cancelMsg())
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED {
		t.Fatalf("finished %v %v, want cancelled", fin.GetReason(), err)
	}
	if a := ack(s.Events(), cancelled); !a.GetAccepted() {
		t.Errorf("the cancel was refused: %v", a.GetError())
	}
}

// One caller cannot take every run slot: past its own limit its runs are refused, while
// another caller still gets in.
func TestBounds_RunsPerCaller(t *testing.T) {
	cfg := service.Config{
		Config: runs.Config{
			MaxRunsPerCaller: 2,
			Caller: func(ctx context.Context) string {
				md, _ := metadata.FromIncomingContext(ctx)
				if v := md.Get("x-caller"); len(v) > 0 {
					return v[0]
				}
				return ""
			},
		},
	}
	c := newTestServer(t, cfg).Client
	as := func(caller string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "x-caller", caller)
	}
	start := func(ctx context.Context) (agentdv1.AgentService_RunClient, error) {
		s, err := c.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("", "save a note: milk")}})
		_, err = s.Recv() // run_started, or the refusal
		return s, err
	}
	var open []agentdv1.AgentService_RunClient
	for range 2 {
		s, err := start(as("alice"))
		if err != nil {
			t.Fatalf("alice's run: %v", err)
		}
		open = append(open, s)
	}
	if _, err := start(as("alice")); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("alice's third run: %v, want RESOURCE_EXHAUSTED", err)
	} else if _, reason, _ := errorInfo(err); reason != "TOO_MANY_RUNS_FOR_CALLER" {
		t.Errorf("reason %s, want TOO_MANY_RUNS_FOR_CALLER", reason)
	}
	if _, err := start(as("bob")); err != nil {
		t.Errorf("bob's run: %v", err)
	}
	if _, err := start(t.Context()); err != nil {
		t.Errorf("an anonymous run: %v", err)
	}
	// One of alice's runs ends: she may start another.
	open[0].CloseSend()
	for {
		if _, err := open[0].Recv(); err != nil {
			break
		}
	}
	if _, err := start(as("alice")); err != nil {
		t.Errorf("alice's run after one ended: %v", err)
	}
}

// A client that reads nothing does not hold its run for ever: past the stall timeout the
// run ends FAILED (CLIENT_STALLED), the slot is free, and the status carries the outcome
// with its transcript.
func TestBounds_StalledClientIsLetGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pieces := make([]string, 20000)
		for i := range pieces {
			pieces[i] = "0123456789 "
		}
		m := &rt.Model{Steps: []rt.Step{rt.Say(pieces...)}}
		srv := newTestServer(t, service.Config{Config: runs.Config{StallTimeout: 2 * time.Minute}}, scripted{name: "chatty", model: m})
		// A client with fixed, small flow-control windows: it takes in 64 KiB and no more
		// until it reads.
		conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return srv.Dial(ctx)
		}), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		s, err := agentdv1.NewAgentServiceClient(conn).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		spec := servicetest.Input("chatty", "talk")
		spec.Config = &agentdv1.RunConfig{OnDisconnect: agentdv1.OnDisconnect_ON_DISCONNECT_CANCEL}
		s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
		// Read nothing: the stall timeout passes (in the bubble's time) and agentd lets
		// the run go.
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if n := srv.Service.ActiveRuns(); n != 0 || m.Calls() != 1 {
			t.Fatalf("%d runs still going (model called %d times) after the client read nothing for longer than the stall timeout", n, m.Calls())
		}
		for {
			if _, err = s.Recv(); err != nil {
				break
			}
		}
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("status %v, want RESOURCE_EXHAUSTED", err)
		}
		var fin *agentdv1.RunFinished
		for _, d := range st.Details() {
			if f, ok := d.(*agentdv1.RunFinished); ok {
				fin = f
			}
		}
		if _, reason, _ := errorInfo(err); reason != "CLIENT_STALLED" {
			t.Errorf("reason %q, want CLIENT_STALLED", reason)
		}
		if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_FAILED || fin.GetError().GetReason() != "CLIENT_STALLED" {
			t.Fatalf("run_finished in the status: %v", fin)
		}
		if msgs := fin.GetNewMessages(); len(msgs) == 0 || !msgs[len(msgs)-1].GetPartial() {
			t.Errorf("the transcript lacks the partial answer: %v", msgs)
		}
	})
}

// A Run stream that never sends its start message is closed after the start timeout.
func TestBounds_StartMessageHasADeadline(t *testing.T) {
	c := newTestServer(t, service.Config{StartTimeout: 20 * time.Millisecond}).Client
	s, err := c.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	if code, reason, _ := errorInfo(err); code != codes.DeadlineExceeded || reason != "START_TIMEOUT" {
		t.Errorf("got %v, want DEADLINE_EXCEEDED START_TIMEOUT", err)
	}
}

// A client tool whose result is awaited when the server shuts down parks as pending: the
// continuation lists it, and the replica that resumes the run takes the client's result.
func TestShutdown_AwaitedClientToolParksAndItsResultIsTakenElsewhere(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_color", `{}`), rt.Say("red it is")}}
	first := newTestServer(t, service.Config{}, scripted{name: "painter", model: m})
	spec := servicetest.Input("painter", "paint")
	spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "pick_color"}}}
	s := servicetest.Open(t, first.Client, spec)
	exec := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetToolExecutionStarted() != nil }).GetToolExecutionStarted()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { first.Service.Shutdown(ctx, 0) })
	fin, err := s.Finish()
	wg.Wait()
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_SHUTDOWN || status.Code(err) != codes.Unavailable {
		t.Fatalf("finished %v %v, want SHUTDOWN", fin.GetReason(), err)
	}
	if ids := fin.GetPendingClientToolCallIds(); len(ids) != 1 || ids[0] != exec.GetToolCallId() {
		t.Fatalf("pending client tool calls %v, want [%s]", ids, exec.GetToolCallId())
	}
	for _, ev := range s.Events() {
		if ev.GetToolCallResult() != nil {
			t.Errorf("the awaited call got a result at shutdown: %v", ev)
		}
	}

	second := newTestServer(t, service.Config{}, scripted{name: "painter", model: m})
	resume := servicetest.Input("painter", "")
	resume.Messages, resume.Continuation, resume.ClientTools = fin.GetNewMessages(), fin.GetContinuation(), spec.ClientTools
	resume.ToolResults = []*agentdv1.ToolResult{{ToolCallId: exec.GetToolCallId(), Output: &agentdv1.ToolResult_Text{Text: "red"}}}
	resp, err := second.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: resume})
	if err != nil {
		t.Fatalf("resume with the client's result: %v", err)
	}
	if got := resp.GetResult().GetFinalText(); got != "red it is" {
		t.Errorf("resumed run answered %q", got)
	}
}

// The defect this guards against: a continuation parked while save_note was allowed,
// resumed on a replica where the agent disables it, still saved the note.
func TestResume_TheAgentsCurrentPolicyApplies(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"hi"}`), rt.Say("ok")}}
	asker := scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}}
	first := newTestServer(t, service.Config{}, asker)
	ss, err := first.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("asker", "go")})
	if err != nil {
		t.Fatal(err)
	}
	fin := ss.GetResult()
	if len(fin.GetPendingApprovals()) != 1 {
		t.Fatalf("parked with %v, want one approval", fin.GetPendingApprovals())
	}
	disabled := asker
	disabled.policy = agents.PolicyConfig{Approval: "ask", Tools: map[string]agents.ToolPolicyConfig{"echo": {Disabled: true}}}
	second := newTestServer(t, service.Config{}, disabled)
	resume := &agentdv1.RunSpec{
		Agent: "asker", ThreadId: ss.GetThreadId(), Continuation: fin.GetContinuation(),
		Messages:  fin.GetNewMessages(),
		Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: fin.GetPendingApprovals()[0].GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}},
	}
	s := servicetest.Open(t, second.Client, resume)
	if _, err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	for _, ev := range s.Events() {
		if ev.GetToolExecutionStarted() != nil {
			t.Fatalf("the disabled tool ran on resume: %v", ev)
		}
		if r := ev.GetToolCallResult(); r != nil && (!r.GetIsError() || !strings.Contains(r.GetText(), "disabled")) {
			t.Errorf("result %v, want an error saying the tool is disabled", r)
		}
	}
}

// bombSchema is a client tool schema whose $refs double at each of its levels: about
// 2^levels subschema applications to validate one value.
func bombSchema(t *testing.T, levels int) *structpb.Struct {
	t.Helper()
	defs := map[string]any{fmt.Sprintf("a%d", levels): map[string]any{"type": "string"}}
	for i := range levels {
		next := map[string]any{"$ref": fmt.Sprintf("#/$defs/a%d", i+1)}
		defs[fmt.Sprintf("a%d", i)] = map[string]any{"anyOf": []any{next, next}}
	}
	s, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/a0"}}, "$defs": defs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A client tool schema that would take exponential time and memory to validate is
// refused when the run starts, naming the field.
func TestBounds_ClientToolSchemaBombIsRefused(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	spec := servicetest.Input("", "hi")
	spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "bomb", Parameters: bombSchema(t, 24)}}}
	_, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: spec})
	code, _, br := errorInfo(err)
	if code != codes.InvalidArgument || len(br.GetFieldViolations()) != 1 {
		t.Fatalf("got %v, want INVALID_ARGUMENT with one field violation", err)
	}
	if v := br.GetFieldViolations()[0]; v.GetField() != "start.client_tools[0].spec.parameters" || !strings.Contains(v.GetDescription(), "too complex") {
		t.Errorf("violation %v, want start.client_tools[0].spec.parameters refused as too complex", v)
	}
}

// Refused requests leave nothing behind: schemas compiled to check a request are not kept
// once it is refused (a cache of compiled schemas kept 2 GB after 20 requests of 64 large
// schemas; these are smaller, within the bytes a run's client tools may hold).
func TestBounds_RefusedRequestsKeepNoSchemas(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	tools := func(round int) []*agentdv1.ClientTool {
		var out []*agentdv1.ClientTool
		for i := range 64 {
			props := map[string]any{}
			for j := range 60 {
				props[fmt.Sprintf("p%d_%d_%d", round, i, j)] = map[string]any{"type": "string", "description": "a property of a large schema"}
			}
			s, err := structpb.NewStruct(map[string]any{"type": "object", "properties": props})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, &agentdv1.ClientTool{Spec: &agentdv1.ToolSpec{Name: fmt.Sprintf("tool_%d", i), Parameters: s}})
		}
		return out
	}
	heap := func() uint64 {
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for round := range 10 {
		// No input: refused, after every schema was compiled to check it.
		_, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{ClientTools: tools(round)}})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("round %d: %v, want INVALID_ARGUMENT", round, err)
		}
	}
	if grew := int64(heap()) - int64(before); grew > 16<<20 {
		t.Errorf("the heap grew by %d MiB over 10 refused requests; nothing they brought should stay", grew>>20)
	}
}

// The schemas of a run's client tools are bounded together, in bytes: compiling costs
// time in proportion to their size.
func TestBounds_ClientToolSchemasAreBoundedTogether(t *testing.T) {
	c := newTestServer(t, service.Config{Config: runs.Config{MaxClientSchemaBytes: 8 << 10}}).Client
	spec := servicetest.Input("", "hi")
	for i := range 3 {
		props := map[string]any{}
		for j := range 60 {
			props[fmt.Sprintf("p%d", j)] = map[string]any{"type": "string"}
		}
		s, err := structpb.NewStruct(map[string]any{"type": "object", "properties": props, "description": strings.Repeat("d", 2000)})
		if err != nil {
			t.Fatal(err)
		}
		spec.ClientTools = append(spec.ClientTools, &agentdv1.ClientTool{Spec: &agentdv1.ToolSpec{Name: fmt.Sprintf("t%d", i), Parameters: s}})
	}
	_, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: spec})
	code, _, br := errorInfo(err)
	if code != codes.InvalidArgument || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "start.client_tools" || !strings.Contains(br.GetFieldViolations()[0].GetDescription(), "8192 bytes together") {
		t.Errorf("got %v %v, want INVALID_ARGUMENT naming start.client_tools and the byte limit", err, br)
	}
}

// Approvals an interrupting steer cancelled take no decision: the one the run was waiting
// on and the ones it had not asked about yet are refused alike.
func TestInput_DecisionForAnApprovalAnInterruptCancelledIsRefused(t *testing.T) {
	gate := make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "echo", `{"step":0,"text":"a"}`, "echo", `{"step":0,"text":"b"}`), gated(gate, "as you say")}}
	c := newTestServer(t, service.Config{}, scripted{name: "asker", model: m, tools: []string{"echo"}, policy: agents.PolicyConfig{Approval: "ask"}}).Client
	s := servicetest.Open(t, c, servicetest.Input("asker", "go"))
	var ids []string
	for len(ids) < 2 {
		ids = append(ids, s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested().GetApprovalId())
	}
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "stop, do something else", Mode: agentdv1.SteerMode_STEER_MODE_INTERRUPT}}})
	for range 2 {
		if r := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalResolved() != nil }).GetApprovalResolved(); r.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED {
			t.Fatalf("approval_resolved %v, want cancelled", r)
		}
	}
	var seqs []int64
	for _, id := range ids {
		seqs = append(seqs, s.Send(servicetest.Approve(id)))
	}
	s.Until(isAck(seqs[1]))
	close(gate)
	if _, err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	for i, seq := range seqs {
		if a := ack(s.Events(), seq); a.GetAccepted() || a.GetError().GetReason() != "APPROVAL_CLOSED" {
			t.Errorf("decision for approval %d: ack %v, want APPROVAL_CLOSED", i, a)
		}
	}
}

// Acks queue like events: a client that sends and never reads is held back by flow
// control once agentd has as many acks queued as it holds for a stream, instead of
// having every message acked into agentd's memory.
func TestBounds_AClientThatNeverReadsCannotQueueAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestServer(t, service.Config{Config: runs.Config{MessageRate: 1e6, MessageBurst: 1e6}}).Client
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s, err := c.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		spec := servicetest.Input("", "save a note: milk")
		spec.Config = &agentdv1.RunConfig{OnDisconnect: agentdv1.OnDisconnect_ON_DISCONNECT_CANCEL}
		s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
		sent := 0
		go func() {
			for ; sent < 200000; sent++ {
				if s.Send(ping()) != nil {
					return
				}
			}
		}()
		synctest.Wait() // everyone blocked: the client on flow control, agentd on its queue
		if sent >= 200000 {
			t.Fatalf("the client sent all %d pings without reading an ack", sent)
		}
		cancel()
		synctest.Wait()
	})
}
