package service_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// refusal runs spec on a Run stream and returns the status it is refused with, failing
// when the run starts.
func refusal(t *testing.T, c agentdv1.AgentServiceClient, spec *agentdv1.RunSpec) error {
	t.Helper()
	s := servicetest.Open(t, c, spec)
	if ev := s.Next(); ev != nil {
		t.Fatalf("got event %v, want the stream refused", ev)
	}
	return s.Err()
}

// wantViolation checks that err is INVALID_ARGUMENT with a violation of field whose
// description holds every one of want.
func wantViolation(t *testing.T, err error, field string, want ...string) {
	t.Helper()
	code, reason, br := errorInfo(err)
	if code != codes.InvalidArgument || reason == "" {
		t.Fatalf("status %v, want INVALID_ARGUMENT with an ErrorInfo", err)
	}
	for _, v := range br.GetFieldViolations() {
		if v.GetField() != field {
			continue
		}
		for _, w := range want {
			if !strings.Contains(v.GetDescription(), w) {
				t.Errorf("violation of %s: %q, want it to name %q", field, v.GetDescription(), w)
			}
		}
		return
	}
	t.Fatalf("violations %v, want one of %s", br.GetFieldViolations(), field)
}

func TestBadInput_OversizedMessageNamesTheLimit(t *testing.T) {
	const limit = 64 << 10
	cfg := service.Config{Logger: slog.New(slog.DiscardHandler), Config: runs.Config{ContinuationKey: testKey}}
	srv := servicetest.NewServer(t, cfg, servicetest.WithServerOptions(grpc.MaxRecvMsgSize(limit)))
	s := servicetest.Open(t, srv.Client, servicetest.Input("", strings.Repeat("x", 2*limit)))
	if ev := s.Next(); ev != nil {
		t.Fatalf("got event %v, want the stream refused", ev)
	}
	st := status.Convert(s.Err())
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), fmt.Sprint(limit)) {
		t.Errorf("status %v, want RESOURCE_EXHAUSTED naming the limit %d", s.Err(), limit)
	}
}

func TestBadInput_DeepNestingIsRefusedNamingTheLimit(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	deep := deepValue(100)
	t.Run("metadata", func(t *testing.T) {
		spec := servicetest.Input("", "hello")
		spec.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"k": deep}}
		wantViolation(t, refusal(t, c, spec), "start.metadata", "the limit is 64")
	})
	t.Run("client tool parameters", func(t *testing.T) {
		spec := servicetest.Input("", "hello")
		spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "ask", Parameters: &structpb.Struct{Fields: map[string]*structpb.Value{"properties": deep}}}}}
		wantViolation(t, refusal(t, c, spec), "start.client_tools[0].spec.parameters", "the limit is 64")
	})
	t.Run("tool result in messages", func(t *testing.T) {
		spec := &agentdv1.RunSpec{Messages: []*agentdv1.Message{
			{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "what is 1+1"}}}},
			{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "c1", Name: "calculate", ArgumentsJson: `{"expression":"1+1"}`}}}}},
			{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "c1", Output: &agentdv1.ToolResultPart_Json{Json: deep}}}}}},
		}}
		wantViolation(t, refusal(t, c, spec), "start.messages[2].parts[0].tool_result.json", "the limit is 64")
	})
	t.Run("edited arguments", func(t *testing.T) {
		s := servicetest.Open(t, c, servicetest.Input("", "save a note: milk"))
		req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
		seq := s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: req.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, EditedArguments: deep}}})
		a := s.Until(isAck(seq)).GetInputAck()
		if a.GetAccepted() || a.GetError().GetReason() != "INVALID_ARGUMENTS" || !strings.Contains(a.GetError().GetMessage(), "the limit is 64") {
			t.Errorf("ack %v, want INVALID_ARGUMENTS naming the limit", a)
		}
		s.Send(servicetest.Approve(req.GetApprovalId()))
		if fin, err := s.Finish(); err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Errorf("finished %v %v", fin.GetReason(), err)
		}
	})
	t.Run("at the limit", func(t *testing.T) {
		spec := servicetest.Input("", "hello")
		spec.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"k": deepValue(63)}} // 64 with the struct
		s := servicetest.Open(t, c, spec)
		if fin, err := s.Finish(); err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Errorf("finished %v %v, want the run to complete", fin.GetReason(), err)
		}
	})
}

func TestBadInput_TooManyClientToolsNamesTheLimit(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	spec := servicetest.Input("", "hello")
	for i := range 5000 {
		spec.ClientTools = append(spec.ClientTools, &agentdv1.ClientTool{Spec: &agentdv1.ToolSpec{Name: fmt.Sprintf("tool_%d", i)}})
	}
	wantViolation(t, refusal(t, c, spec), "start.client_tools", "5000 client tools", "the limit is 64")
}

func TestBadInput_HugeTranscriptNamesTheLimit(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	system := strings.Repeat("Be brief. ", 300<<10) // 3 MiB: under gRPC's 4 MiB, over the 2 MiB transcript
	spec := &agentdv1.RunSpec{Input: "hello", Messages: []*agentdv1.Message{
		{Role: agentdv1.Role_ROLE_SYSTEM, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: system}}}},
	}}
	wantViolation(t, refusal(t, c, spec), "start.messages", "the limit is 2097152", "MaxTranscriptBytes")

	small := newTestServer(t, service.Config{Config: runs.Config{MaxTranscriptBytes: 1 << 10}}).Client
	wantViolation(t, refusal(t, small, servicetest.Input("", strings.Repeat("x", 2<<10))), "start.messages", "the limit is 1024")
}

// Ids are checked at the door, before any store sees them: a NUL, which PostgreSQL's
// text columns cannot hold (its store read the failed statement as an outage, and the
// client retried an UNAVAILABLE forever), or an id of a MiB, which every error and log
// line quoted whole, is INVALID_ARGUMENT naming the field, whatever the store.
func TestBadInput_IDsAreCheckedAtTheDoor(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	long := strings.Repeat("x", 1<<20)
	for _, id := range []string{"a\x00b", long} {
		name := "NUL"
		if id == long {
			name = "1 MiB"
		}
		t.Run(name, func(t *testing.T) {
			spec := servicetest.Input("", "hello")
			spec.ThreadId = id
			wantViolation(t, refusal(t, c, spec), "start.thread_id")
			spec = servicetest.Input("", "hello")
			spec.RequestId = id
			wantViolation(t, refusal(t, c, spec), "start.request_id")
			_, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "hello", RequestId: id}})
			wantViolation(t, err, "start.request_id")
			_, err = c.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: "r", ClientKey: id,
				Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{}}})
			wantViolation(t, err, "client_key")
			_, err = c.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: id, ClientKey: "k",
				Input: &agentdv1.SendRunInputRequest_Cancel{Cancel: &agentdv1.Cancel{}}})
			wantViolation(t, err, "run_id")
			_, err = c.GetThread(t.Context(), &agentdv1.GetThreadRequest{ThreadId: id})
			wantViolation(t, err, "thread_id")
			_, err = c.DeleteThread(t.Context(), &agentdv1.DeleteThreadRequest{ThreadId: id})
			wantViolation(t, err, "thread_id")
			if st := status.Convert(err); len(st.Message()) > 4<<10 {
				t.Errorf("the refusal's message is %d bytes: it quotes the id whole", len(st.Message()))
			}
		})
	}
	t.Run("metadata", func(t *testing.T) {
		spec := servicetest.Input("", "hello")
		spec.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue(strings.Repeat("x", 64<<10))}}
		wantViolation(t, refusal(t, c, spec), "start.metadata", "16384")
	})
}
