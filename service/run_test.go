package service_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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

func TestRun_FirstMessageMustBeStart(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	s, err := c.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}})
	_, err = s.Recv()
	code, reason, br := errorInfo(err)
	if code != codes.InvalidArgument || reason != "FIRST_MESSAGE_NOT_START" || len(br.GetFieldViolations()) != 1 {
		t.Errorf("status %v %q %v, want INVALID_ARGUMENT FIRST_MESSAGE_NOT_START with a BadRequest", code, reason, br)
	}
}

func TestRun_BadStartIsRefusedWithFieldViolations(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	tests := []struct {
		name  string
		spec  *agentdv1.RunSpec
		code  codes.Code
		field string
	}{
		{"no input", &agentdv1.RunSpec{}, codes.InvalidArgument, "start.messages"},
		{"message without role", &agentdv1.RunSpec{Messages: []*agentdv1.Message{{Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}}}, codes.InvalidArgument, "start.messages[0].role"},
		{"max_steps above the agent's", &agentdv1.RunSpec{Input: "hi", Config: &agentdv1.RunConfig{MaxSteps: 1000}}, codes.InvalidArgument, "start.config.max_steps"},
		{"policy for an unknown tool", &agentdv1.RunSpec{Input: "hi", Config: &agentdv1.RunConfig{ToolPolicies: []*agentdv1.ToolPolicyOverride{{Tool: "rm_rf", Disabled: true}}}}, codes.InvalidArgument, "start.config.tool_policies[0].tool"},
		{"client tool clashing with a server tool", &agentdv1.RunSpec{Input: "hi", ClientTools: []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "calculate"}}}}, codes.InvalidArgument, "start.client_tools[0].spec.name"},
		{"decisions without a continuation", &agentdv1.RunSpec{Input: "hi", Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: "x"}}}, codes.InvalidArgument, "start.continuation"},
		{"unknown agent", &agentdv1.RunSpec{Agent: "nope", Input: "hi"}, codes.NotFound, ""},
		{"model override not allowed", &agentdv1.RunSpec{Input: "hi", Config: &agentdv1.RunConfig{Model: "workload:small"}}, codes.PermissionDenied, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := servicetest.Open(t, c, tt.spec)
			if ev := s.Next(); ev != nil {
				t.Fatalf("got event %v, want the stream refused", ev)
			}
			code, _, br := errorInfo(s.Err())
			if code != tt.code {
				t.Fatalf("status %v, want %v", s.Err(), tt.code)
			}
			if tt.field != "" && (len(br.GetFieldViolations()) == 0 || br.GetFieldViolations()[0].GetField() != tt.field) {
				t.Errorf("violations %v, want field %s", br.GetFieldViolations(), tt.field)
			}
		})
	}
}

func TestRun_EveryClientMessageIsAckedBeforeWhatItCauses(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	s := servicetest.Open(t, c, servicetest.Input("", "save a note: milk"))
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	ping := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}})
	decision := s.Send(servicetest.Approve(req.GetApprovalId()))
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	if a := ack(s.Events(), ping); a == nil || !a.GetAccepted() {
		t.Errorf("ping ack = %v", a)
	}
	var ackAt, resolvedAt int
	for i, ev := range s.Events() {
		if a := ev.GetInputAck(); a != nil && a.GetClientSeq() == decision {
			ackAt = i
		}
		if ev.GetApprovalResolved() != nil {
			resolvedAt = i
		}
	}
	if ackAt == 0 || resolvedAt < ackAt {
		t.Errorf("decision acked at %d, approval_resolved at %d: the ack must come first", ackAt, resolvedAt)
	}
}

func TestRun_RefusalsAreAckedAndNeverEndTheStream(t *testing.T) {
	// The run's last model call waits for the gate, which opens once the last refusal
	// is acked: a message the server has not read when the run ends gets no ack.
	gate := make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "save_note", `{"title":"milk","text":"buy milk"}`), gated(gate, "saved")}}
	c := newTestServer(t, service.Config{}, scripted{name: "noter", model: m, tools: []string{"save_note"}}).Client
	s := servicetest.Open(t, c, servicetest.Input("noter", "save a note: milk"))
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	cases := map[int64]string{}
	cases[s.Send(servicetest.Approve("appr_unknown"))] = "UNKNOWN_APPROVAL"
	cases[s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: "call_x"}}})] = "UNKNOWN_TOOL_CALL"
	cases[s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("", "again")}})] = "ALREADY_STARTED"
	cases[s.Send(&agentdv1.RunRequest{})] = "EMPTY_MESSAGE"
	cases[s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: req.GetApprovalId()}}})] = "INVALID_DECISION"
	bad, _ := structpb.NewValue(map[string]any{"title": 7})
	cases[s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: req.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, EditedArguments: bad}}})] = "INVALID_ARGUMENTS"
	first := s.Send(servicetest.Approve(req.GetApprovalId()))
	dup := s.Send(servicetest.Approve(req.GetApprovalId()))
	cases[dup] = "ALREADY_DECIDED"
	s.Until(isAck(dup))
	close(gate)
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v; refusals must not end the run", fin.GetReason(), err)
	}
	if a := ack(s.Events(), first); !a.GetAccepted() {
		t.Errorf("the valid decision was refused: %v", a)
	}
	for seq, reason := range cases {
		a := ack(s.Events(), seq)
		if a == nil || a.GetAccepted() || a.GetError().GetReason() != reason {
			t.Errorf("client_seq %d: ack %v, want refused with %s", seq, a, reason)
		}
	}
}

func TestRun_ApprovalWithEditedArgumentsRunsThemAndTheTranscriptRecordsThem(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	s := servicetest.Open(t, c, servicetest.Input("", "save a note: milk"))
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	edited, _ := structpb.NewValue(map[string]any{"title": "Oat milk", "text": "buy oat milk"})
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: req.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, EditedArguments: edited}}})
	fin, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"text":"buy oat milk","title":"Oat milk"}`
	var resolved *agentdv1.ApprovalResolved
	var started *agentdv1.ToolExecutionStarted
	for _, ev := range s.Events() {
		if r := ev.GetApprovalResolved(); r != nil {
			resolved = r
		}
		if e := ev.GetToolExecutionStarted(); e != nil {
			started = e
		}
	}
	if resolved.GetArgumentsJson() != want || resolved.GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_CLIENT || started.GetArgumentsJson() != want {
		t.Errorf("resolved %v, execution %v; want both with %s", resolved, started, want)
	}
	var recorded string
	for _, m := range fin.GetNewMessages() {
		for _, p := range m.GetParts() {
			if tc := p.GetToolCall(); tc != nil {
				recorded = tc.GetArgumentsJson()
			}
		}
	}
	if recorded != want {
		t.Errorf("transcript records %s, want %s", recorded, want)
	}
	if !strings.Contains(fin.GetFinalText(), "Oat milk") {
		t.Errorf("final text %q", fin.GetFinalText())
	}
}

func TestRun_ApprovalPolicies(t *testing.T) {
	tests := []struct {
		name       string
		policy     agentdv1.ApprovalPolicy
		wantReason agentdv1.RunEndReason
		wantBy     agentdv1.DecidedBy
		wantText   string
	}{
		{"auto approve where the server allows it", agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE, agentdv1.RunEndReason_RUN_END_REASON_COMPLETED, agentdv1.DecidedBy_DECIDED_BY_POLICY, "Saved your note"},
		{"auto deny", agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_DENY, agentdv1.RunEndReason_RUN_END_REASON_COMPLETED, agentdv1.DecidedBy_DECIDED_BY_POLICY, "failed"},
		{"interrupt parks", agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT, agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT, agentdv1.DecidedBy_DECIDED_BY_UNSPECIFIED, ""},
	}
	c := newTestServer(t, service.Config{}).Client
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := servicetest.Input("", "save a note: milk")
			spec.Config = &agentdv1.RunConfig{ApprovalPolicy: tt.policy}
			s := servicetest.Open(t, c, spec)
			fin, err := s.Finish()
			if err != nil || fin.GetReason() != tt.wantReason {
				t.Fatalf("finished %v %v, want %v", fin.GetReason(), err, tt.wantReason)
			}
			var by agentdv1.DecidedBy
			for _, ev := range s.Events() {
				if r := ev.GetApprovalResolved(); r != nil {
					by = r.GetDecidedBy()
				}
			}
			if by != tt.wantBy || !strings.Contains(fin.GetFinalText(), tt.wantText) {
				t.Errorf("decided by %v, final %q", by, fin.GetFinalText())
			}
			if tt.wantReason == agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT && (len(fin.GetContinuation()) == 0 || len(fin.GetPendingApprovals()) != 1) {
				t.Errorf("parked without continuation or pending approval: %v", fin)
			}
		})
	}
}

func TestRun_AutoApproveNeverLoosensAnAlwaysPolicy(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "calculate", `{"expression":"1+1"}`), rt.Say("ok")}}
	c := newTestServer(t, service.Config{}, scripted{name: "strict", model: m, tools: []string{"calculate"}, policy: agents.PolicyConfig{Tools: map[string]agents.ToolPolicyConfig{"calculate": {Approval: "always"}}}}).Client
	spec := servicetest.Input("strict", "go")
	spec.Config = &agentdv1.RunConfig{ApprovalPolicy: agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE}
	s := servicetest.Open(t, c, spec)
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	s.Send(servicetest.Approve(req.GetApprovalId()))
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v", fin.GetReason(), err)
	}
	for _, ev := range s.Events() {
		if r := ev.GetApprovalResolved(); r != nil && r.GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_CLIENT {
			t.Errorf("decided by %v: a tool whose policy is always must wait for the client", r.GetDecidedBy())
		}
	}
}

func TestRun_ApprovalTimeoutExpiresAndTheModelIsTold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestServer(t, service.Config{}).Client
		spec := servicetest.Input("", "save a note: milk")
		spec.Config = &agentdv1.RunConfig{ApprovalTimeout: durationpb.New(time.Minute)}
		start := time.Now()
		s := servicetest.Open(t, c, spec)
		fin, err := s.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < time.Minute || waited > time.Minute+time.Second {
			t.Errorf("waited %v, want the one-minute timeout", waited)
		}
		var resolved *agentdv1.ApprovalResolved
		for _, ev := range s.Events() {
			if r := ev.GetApprovalResolved(); r != nil {
				resolved = r
			}
		}
		if resolved.GetOutcome() != agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_EXPIRED || resolved.GetDecidedBy() != agentdv1.DecidedBy_DECIDED_BY_TIMEOUT {
			t.Errorf("approval_resolved %v, want expired by timeout", resolved)
		}
		if !strings.Contains(fin.GetFinalText(), "failed") {
			t.Errorf("the model was not told: %q", fin.GetFinalText())
		}
	})
}

func TestRun_HalfCloseIsNotCancel(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	s := servicetest.Open(t, c, servicetest.Input("", "what is 6*7?"))
	s.RunClient().CloseSend()
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() != "6*7 = 42" {
		t.Fatalf("finished %v %q %v, want the run to go on after half-close", fin.GetReason(), fin.GetFinalText(), err)
	}
}

func TestRun_HalfCloseThenApprovalParksTheRun(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	s := servicetest.Open(t, c, servicetest.Input("", "save a note: milk"))
	s.RunClient().CloseSend()
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(fin.GetContinuation()) == 0 {
		t.Fatalf("finished %v %v, want awaiting_input with a continuation", fin.GetReason(), err)
	}
}

func TestRun_CancelEndsCancelledWithStatusOK(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("thinking about it")}, Block: true}}}
	c := newTestServer(t, service.Config{}, scripted{name: "slow", model: m}).Client
	s := servicetest.Open(t, c, servicetest.Input("slow", "go"))
	s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetTextDelta() != nil })
	seq := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: "changed my mind"}}})
	fin, err := s.Finish()
	if err != nil {
		t.Errorf("status %v, want OK", err)
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_CANCELLED || !ack(s.Events(), seq).GetAccepted() {
		t.Errorf("finished %v, ack %v", fin.GetReason(), ack(s.Events(), seq))
	}
	if len(fin.GetNewMessages()) != 2 || !fin.GetNewMessages()[1].GetPartial() {
		t.Errorf("new messages %v, want the input and the partial answer", fin.GetNewMessages())
	}
}

func TestRun_CancelledRPCContextEndsTheRun(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Block: true}}}
	srv := newTestServer(t, service.Config{}, scripted{name: "slow", model: m})
	ctx, cancel := context.WithCancel(t.Context())
	s, err := srv.Client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := servicetest.Input("slow", "go")
	spec.Config = &agentdv1.RunConfig{OnDisconnect: agentdv1.OnDisconnect_ON_DISCONNECT_CANCEL}
	s.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: spec}})
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Service.ActiveRuns() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run did not end after the RPC was cancelled")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRun_SteerNextStepAndInterrupt(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		{Events: []runtime.ModelEvent{rt.Text("a long answer ")}, Block: true},
		rt.Say("ok, the short version"),
	}}
	c := newTestServer(t, service.Config{}, scripted{name: "chatty", model: m}).Client
	s := servicetest.Open(t, c, servicetest.Input("chatty", "tell me everything"))
	s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetTextDelta() != nil })
	seq := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "short please", Mode: agentdv1.SteerMode_STEER_MODE_INTERRUPT}}})
	fin, err := s.Finish()
	if err != nil || fin.GetFinalText() != "ok, the short version" {
		t.Fatalf("finished %q %v", fin.GetFinalText(), err)
	}
	var applied *agentdv1.SteerApplied
	var steps []string
	for _, ev := range s.Events() {
		if a := ev.GetSteerApplied(); a != nil && a.GetClientSeq() == seq {
			applied = a
		}
		if st := ev.GetStepStarted(); st != nil {
			steps = append(steps, st.GetStepId())
		}
	}
	if applied == nil || applied.GetDropped() || applied.GetStepId() != steps[1] {
		t.Errorf("steer_applied %v, want it in the second step %v", applied, steps)
	}
}

func TestRun_SteerRateIsLimited(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Block: true}}}
	c := newTestServer(t, service.Config{Config: runs.Config{SteerRate: 1, SteerBurst: 2}}, scripted{name: "slow", model: m}).Client
	s := servicetest.Open(t, c, servicetest.Input("slow", "go"))
	var seqs []int64
	for range 3 {
		seqs = append(seqs, s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "more"}}}))
	}
	s.Until(isAck(seqs[2]))
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{}}})
	s.Finish()
	if !ack(s.Events(), seqs[0]).GetAccepted() || !ack(s.Events(), seqs[1]).GetAccepted() {
		t.Error("steers within the burst were refused")
	}
	if a := ack(s.Events(), seqs[2]); a.GetAccepted() || a.GetError().GetReason() != "STEER_RATE_LIMITED" {
		t.Errorf("third steer ack %v, want STEER_RATE_LIMITED", a)
	}
}

func TestRun_ClientToolRunsOnTheClient(t *testing.T) {
	gate := make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_color", `{"hint":"warm"}`), gated(gate, "red it is")}}
	c := newTestServer(t, service.Config{}, scripted{name: "painter", model: m}).Client
	params, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"hint": map[string]any{"type": "string"}}})
	spec := servicetest.Input("painter", "paint")
	spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "pick_color", Parameters: params}}}
	s := servicetest.Open(t, c, spec)
	exec := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetToolExecutionStarted() != nil }).GetToolExecutionStarted()
	if exec.GetExecutor() != agentdv1.Executor_EXECUTOR_CLIENT || exec.GetArgumentsJson() != `{"hint":"warm"}` || exec.GetDeadline() == nil {
		t.Fatalf("tool_execution_started %v", exec)
	}
	seq := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: exec.GetToolCallId(), Output: &agentdv1.ToolResult_Text{Text: "red"}}}})
	late := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: exec.GetToolCallId(), Output: &agentdv1.ToolResult_Text{Text: "blue"}}}})
	s.Until(isAck(late))
	close(gate)
	fin, err := s.Finish()
	if err != nil || fin.GetFinalText() != "red it is" {
		t.Fatalf("finished %q %v", fin.GetFinalText(), err)
	}
	if !ack(s.Events(), seq).GetAccepted() || ack(s.Events(), late).GetAccepted() || ack(s.Events(), late).GetError().GetReason() != "UNKNOWN_TOOL_CALL" {
		t.Errorf("acks: result %v, second result %v", ack(s.Events(), seq), ack(s.Events(), late))
	}
	if got := m.Requests()[1].Messages; got[len(got)-1].Parts[0].ToolResult.Output.Text != "red" {
		t.Errorf("the model did not get the client's result: %v", got[len(got)-1])
	}
}

func TestRun_ClientToolTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &rt.Model{Steps: []rt.Step{rt.Call(0, "slow_tool", `{}`), rt.Say("gave up")}}
		c := newTestServer(t, service.Config{}, scripted{name: "impatient", model: m}).Client
		spec := servicetest.Input("impatient", "go")
		spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "slow_tool"}, Timeout: durationpb.New(10 * time.Second)}}
		s := servicetest.Open(t, c, spec)
		fin, err := s.Finish()
		if err != nil || fin.GetFinalText() != "gave up" {
			t.Fatalf("finished %q %v", fin.GetFinalText(), err)
		}
		var res *agentdv1.ToolCallResult
		for _, ev := range s.Events() {
			if r := ev.GetToolCallResult(); r != nil {
				res = r
			}
		}
		if !res.GetIsError() || !strings.Contains(res.GetText(), "timed out after 10s") {
			t.Errorf("result %v, want a timeout error", res)
		}
	})
}

func TestStartRunAndExecuteRun_ParkAndResumeThroughASecondCall(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	ss, err := c.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: servicetest.Input("", "save a note: milk")})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*agentdv1.RunEvent
	for {
		resp, err := ss.Recv()
		if err != nil {
			break
		}
		evs = append(evs, resp.GetEvent())
	}
	servicetest.CheckEvents(t, evs)
	fin := evs[len(evs)-1].GetRunFinished()
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(fin.GetPendingApprovals()) != 1 {
		t.Fatalf("StartRun finished %v", fin)
	}
	resume := &agentdv1.RunSpec{
		Messages:     fin.GetNewMessages(),
		Continuation: fin.GetContinuation(),
		Decisions:    []*agentdv1.ApprovalDecision{{ApprovalId: fin.GetPendingApprovals()[0].GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}},
	}
	resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: resume})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResult(); r.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || !strings.Contains(r.GetFinalText(), "Saved your note") {
		t.Errorf("resumed run finished %v %q", r.GetReason(), r.GetFinalText())
	}
	// The history is the plain concatenation of both runs' new messages.
	var roles []string
	for _, m := range append(fin.GetNewMessages(), resp.GetResult().GetNewMessages()...) {
		roles = append(roles, m.GetRole().String())
	}
	if got := strings.Join(roles, ","); got != "ROLE_USER,ROLE_ASSISTANT,ROLE_TOOL,ROLE_ASSISTANT" {
		t.Errorf("history roles %s", got)
	}
}

// A continuation resumes once: resuming it again, by any RPC, attaches to the run that
// resumed it (its events from the first, its outcome) instead of running it again, so
// an approved call does not run twice.
func TestContinuation_ResumesOnce(t *testing.T) {
	var ran atomic.Int32
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{}`), rt.Say("done")}}
	side := rt.Tool("side", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		ran.Add(1)
		return runtime.Output{Text: "ok"}, nil
	})
	srv := newTestServer(t, service.Config{}, scripted{name: "once", model: m, goTools: []runtime.Tool{side},
		goPolicy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}})
	c := srv.Client
	spec := servicetest.Input("once", "go")
	first, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: spec})
	if err != nil {
		t.Fatal(err)
	}
	fin := first.GetResult()
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT {
		t.Fatalf("first run finished %v", fin)
	}
	resume := &agentdv1.RunSpec{
		Agent: "once", Messages: fin.GetNewMessages(), Continuation: fin.GetContinuation(),
		Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: fin.GetPendingApprovals()[0].GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}},
	}
	a, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: resume})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: resume})
	if err != nil {
		t.Fatal(err)
	}
	if a.GetRunId() != b.GetRunId() || !proto.Equal(a.GetResult(), b.GetResult()) || a.GetResult().GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Errorf("second resume = %v, want the first's %v", b, a)
	}
	s := servicetest.Open(t, c, resume)
	evs := s.Events()
	for s.Err() == nil && (len(evs) == 0 || evs[len(evs)-1].GetRunFinished() == nil) {
		s.Next()
		evs = s.Events()
	}
	if evs[0].GetAttached() == nil || evs[len(evs)-1].GetRunFinished().GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || evs[len(evs)-1].GetRunId() != a.GetRunId() {
		t.Errorf("a third resume, on a Run stream, read:\n%s", servicetest.Render(evs))
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
}

// A continuation is bound to the caller that started its run: another caller's resume is
// refused and changes nothing, so the run's owner still resumes it; a continuation of a
// run started anonymously stays anyone's.
func TestContinuation_BoundToTheCallerThatStartedTheRun(t *testing.T) {
	var ran atomic.Int32
	side := rt.Tool("side", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		ran.Add(1)
		return runtime.Output{Text: "ok"}, nil
	})
	ask := runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAsk}}
	srv := newTestServer(t, service.Config{Config: runs.Config{Identity: threadIdentity}},
		scripted{name: "owned", model: &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{}`), rt.Say("done")}}, goTools: []runtime.Tool{side}, goPolicy: ask},
		scripted{name: "anon", model: &rt.Model{Steps: []rt.Step{rt.Call(0, "side", `{}`), rt.Say("done")}}, goTools: []runtime.Tool{side}, goPolicy: ask})
	c := srv.Client
	as := func(who string) context.Context { return metadata.AppendToOutgoingContext(t.Context(), "x-who", who) }
	park := func(ctx context.Context, agent string) *agentdv1.RunSpec {
		t.Helper()
		resp, err := c.ExecuteRun(ctx, &agentdv1.ExecuteRunRequest{Start: servicetest.Input(agent, "go")})
		if err != nil {
			t.Fatal(err)
		}
		fin := resp.GetResult()
		if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT {
			t.Fatalf("%s run finished %v", agent, fin)
		}
		return &agentdv1.RunSpec{
			Agent: agent, Messages: fin.GetNewMessages(), Continuation: fin.GetContinuation(),
			Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: fin.GetPendingApprovals()[0].GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}},
		}
	}

	resume := park(as("alice"), "owned")
	for i := range 2 {
		_, err := c.ExecuteRun(as("bob"), &agentdv1.ExecuteRunRequest{Start: resume})
		code, reason, _ := errorInfo(err)
		if code != codes.FailedPrecondition || reason != "CONTINUATION_MISMATCH" || !strings.Contains(status.Convert(err).Message(), "another caller") {
			t.Fatalf("bob's resume %d of alice's continuation: %v, want FAILED_PRECONDITION CONTINUATION_MISMATCH saying it belongs to another caller", i+1, err)
		}
	}
	if _, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: resume}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("an anonymous resume of alice's continuation: %v, want FAILED_PRECONDITION", err)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the call ran %d times before its owner resumed it", n)
	}
	mine, err := c.ExecuteRun(as("alice"), &agentdv1.ExecuteRunRequest{Start: resume})
	if err != nil {
		t.Fatalf("alice's resume of her own continuation, after bob's: %v", err)
	}
	if r := mine.GetResult(); r.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Errorf("alice's resumed run finished %v", r)
	}
	again, err := c.ExecuteRun(as("alice"), &agentdv1.ExecuteRunRequest{Start: resume})
	if err != nil || again.GetRunId() != mine.GetRunId() {
		t.Errorf("alice's second resume = %v %v, want it attached to her run %s", again.GetRunId(), err, mine.GetRunId())
	}

	anon := park(t.Context(), "anon")
	theirs, err := c.ExecuteRun(as("bob"), &agentdv1.ExecuteRunRequest{Start: anon})
	if err != nil || theirs.GetResult().GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Errorf("bob's resume of an anonymous run's continuation: %v %v, want it completed", theirs.GetResult(), err)
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("the approved calls ran %d times, want twice", n)
	}
}

func TestContinuation_ForgedExpiredOrMismatchedIsRefused(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	srv := newTestServer(t, service.Config{Config: runs.Config{Now: func() time.Time { return clock() }, ContinuationTTL: time.Hour}})
	c := srv.Client
	resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("", "save a note: milk")})
	if err != nil {
		t.Fatal(err)
	}
	fin := resp.GetResult()
	good := func() *agentdv1.RunSpec {
		return &agentdv1.RunSpec{Messages: fin.GetNewMessages(), Continuation: append([]byte(nil), fin.GetContinuation()...)}
	}
	forged := good()
	forged.Continuation[len(forged.Continuation)/2] ^= 1
	tampered := good()
	tampered.Messages = append(tampered.Messages, tampered.Messages[0])
	otherThread := good()
	otherThread.ThreadId = "thread_someone_else"
	tests := []struct {
		name   string
		spec   *agentdv1.RunSpec
		reason string
		later  bool
	}{
		{"forged", forged, "CONTINUATION_INVALID", false},
		{"transcript changed", tampered, "CONTINUATION_MISMATCH", false},
		{"another thread", otherThread, "CONTINUATION_MISMATCH", false},
		{"expired", good(), "CONTINUATION_EXPIRED", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.later {
				clock = func() time.Time { return now.Add(2 * time.Hour) }
				defer func() { clock = func() time.Time { return now } }()
			}
			_, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: tt.spec})
			code, reason, _ := errorInfo(err)
			if code != codes.FailedPrecondition || reason != tt.reason {
				t.Errorf("status %v, want FAILED_PRECONDITION %s", err, tt.reason)
			}
		})
	}
}

func TestExecuteRun_FailureCarriesTheOutcomeInTheStatus(t *testing.T) {
	steps := []rt.Step{rt.Call(0, "calculate", `{"expression":"1+1"}`), rt.Call(1, "calculate", `{"expression":"1+1"}`)}
	c := newTestServer(t, service.Config{}, scripted{name: "loop", model: &rt.Model{Steps: steps}, tools: []string{"calculate"}, steps: 1}).Client
	_, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("loop", "go")})
	code, reason, _ := errorInfo(err)
	if code != codes.ResourceExhausted || reason != "MAX_STEPS" {
		t.Fatalf("status %v, want RESOURCE_EXHAUSTED MAX_STEPS", err)
	}
	var outcome *agentdv1.ExecuteRunResponse
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*agentdv1.ExecuteRunResponse); ok {
			outcome = r
		}
	}
	if outcome.GetResult().GetReason() != agentdv1.RunEndReason_RUN_END_REASON_MAX_STEPS || len(outcome.GetResult().GetNewMessages()) != 3 {
		t.Errorf("outcome in the status: %v", outcome)
	}
}

func TestListAgents(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	resp, err := c.ListAgents(t.Context(), &agentdv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetAgents()) != 1 || resp.GetAgents()[0].GetName() != "demo" {
		t.Fatalf("agents %v", resp.GetAgents())
	}
	approval := map[string]bool{}
	for _, tool := range resp.GetAgents()[0].GetTools() {
		approval[tool.GetSpec().GetName()] = tool.GetRequiresApproval()
		if tool.GetSpec().GetParameters() == nil {
			t.Errorf("%s has no schema", tool.GetSpec().GetName())
		}
	}
	if len(approval) != 3 || !approval["save_note"] || approval["calculate"] || approval["current_time"] {
		t.Errorf("approval by tool %v, want save_note alone", approval)
	}
}

func TestLimits_ConcurrentRunsAndClientTools(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{{Block: true}}}
	c := newTestServer(t, service.Config{Config: runs.Config{MaxConcurrentRuns: 1, MaxClientTools: 1}}, scripted{name: "slow", model: m}).Client
	first := servicetest.Open(t, c, servicetest.Input("slow", "go"))
	first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetStepStarted() != nil })
	second := servicetest.Open(t, c, servicetest.Input("slow", "go"))
	second.Next()
	if code, reason, _ := errorInfo(second.Err()); code != codes.ResourceExhausted || reason != "TOO_MANY_RUNS" {
		t.Errorf("second run: %v, want RESOURCE_EXHAUSTED TOO_MANY_RUNS", second.Err())
	}
	first.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{}}})
	first.Finish()

	spec := servicetest.Input("", "hi")
	spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "a"}}, {Spec: &agentdv1.ToolSpec{Name: "b"}}}
	third := servicetest.Open(t, c, spec)
	third.Next()
	if code, _, br := errorInfo(third.Err()); code != codes.InvalidArgument || !strings.Contains(br.GetFieldViolations()[0].GetDescription(), "the limit is 1") {
		t.Errorf("two client tools: %v", third.Err())
	}
}

func TestHeartbeatAfterSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestServer(t, service.Config{}).Client
		s := servicetest.Open(t, c, servicetest.Input("", "save a note: milk"))
		s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })
		start := time.Now()
		hb := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetHeartbeat() != nil })
		if waited := time.Since(start); waited != 15*time.Second {
			t.Errorf("heartbeat after %v of silence, want 15s", waited)
		}
		if hb.GetSeq() != 0 || hb.GetHeartbeat().GetLastSeq() != s.Events()[len(s.Events())-2].GetSeq() {
			t.Errorf("heartbeat %v", hb)
		}
		s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{}}})
		s.Finish()
	})
}

func TestShutdown_GoAwayThenShutdownWithAContinuationAnotherReplicaResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newTestServer(t, service.Config{})
		second := newTestServer(t, service.Config{}) // shares the continuation key
		s := servicetest.Open(t, first.Client, servicetest.Input("", "save a note: milk"))
		s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil })

		done := make(chan error, 1)
		go func() { done <- first.Service.Shutdown(t.Context(), 20*time.Second) }()
		goAway := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetGoAway() != nil }).GetGoAway()
		if goAway.GetTimeLeft().AsDuration() != 20*time.Second {
			t.Errorf("go_away time_left %v, want 20s", goAway.GetTimeLeft().AsDuration())
		}
		late := servicetest.Open(t, first.Client, servicetest.Input("", "hi"))
		late.Next()
		if code, reason, _ := errorInfo(late.Err()); code != codes.Unavailable || reason != "SERVER_DRAINING" {
			t.Errorf("a run started while draining: %v, want UNAVAILABLE SERVER_DRAINING", late.Err())
		}

		fin, err := s.Finish()
		if code, reason, _ := errorInfo(err); code != codes.Unavailable || reason != "SERVER_SHUTDOWN" {
			t.Errorf("status %v, want UNAVAILABLE SERVER_SHUTDOWN", err)
		}
		if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_SHUTDOWN || len(fin.GetContinuation()) == 0 {
			t.Fatalf("finished %v without a continuation", fin.GetReason())
		}
		if err := <-done; err != nil {
			t.Errorf("Shutdown: %v", err)
		}

		resume := &agentdv1.RunSpec{Messages: fin.GetNewMessages(), Continuation: fin.GetContinuation()}
		r := servicetest.Open(t, second.Client, resume)
		req := r.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
		r.Send(servicetest.Approve(req.GetApprovalId()))
		rfin, err := r.Finish()
		if err != nil || rfin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || !strings.Contains(rfin.GetFinalText(), "Saved your note") {
			t.Errorf("resumed on the second replica: %v %q %v", rfin.GetReason(), rfin.GetFinalText(), err)
		}
	})
}

func TestRun_RunStartedComesBeforeAnyAck(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	for range 30 {
		s, err := c.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// Start and ping go out back to back, before anything is read.
		s.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("", "what is 1+1?")}})
		s.Send(&agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}})
		s.CloseSend()
		st := servicetest.NewStream(t, s)
		if _, err := st.Finish(); err != nil {
			t.Fatal(err)
		}
	}
}
