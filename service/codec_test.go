package service_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

// wireCodec is a client codec that sends wireBytes as they are, so that a test can put
// on the wire what no proto encoder writes; everything else is protobuf.
type wireCodec struct{}

type wireBytes []byte

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(wireBytes); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (wireCodec) Name() string { return "proto" }

// invalidUTF8 is what every "ZZ" in a test's strings becomes on the wire: a run of
// bytes that is not UTF-8, of the same length, so that the lengths stay right.
var invalidUTF8 = []byte{0xff, 0xfe}

// withInvalidUTF8 encodes m with every "ZZ" of its strings made invalid UTF-8.
func withInvalidUTF8(t testing.TB, m proto.Message) wireBytes {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("ZZ")) {
		t.Fatalf("%v has no ZZ to make invalid", m)
	}
	return bytes.ReplaceAll(b, []byte("ZZ"), invalidUTF8)
}

// wantUTF8Violations checks that err is INVALID_ARGUMENT, reason INVALID_UTF8, with a
// violation for each of fields and no other.
func wantUTF8Violations(t *testing.T, err error, fields ...string) {
	t.Helper()
	code, reason, br := errorInfo(err)
	if code != codes.InvalidArgument || reason != "INVALID_UTF8" {
		t.Fatalf("status %v (reason %q), want INVALID_ARGUMENT with reason INVALID_UTF8", err, reason)
	}
	var got []string
	for _, v := range br.GetFieldViolations() {
		got = append(got, v.GetField())
		if !strings.Contains(v.GetDescription(), "UTF-8") {
			t.Errorf("violation of %s: %q, want it to say UTF-8", v.GetField(), v.GetDescription())
		}
	}
	slices.Sort(got)
	fields = slices.Sorted(slices.Values(fields))
	if diff := cmp.Diff(fields, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if first := br.GetFieldViolations()[0].GetField(); !strings.Contains(status.Convert(err).Message(), first) {
		t.Errorf("message %q does not name %s", status.Convert(err).Message(), first)
	}
}

func TestInvalidUTF8_StartIsRefusedNamingTheField(t *testing.T) {
	srv := newTestServer(t, service.Config{})
	text := func(s string) *agentdv1.Part { return &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: s}} }
	str := structpb.NewStringValue
	cases := []struct {
		name   string
		spec   *agentdv1.RunSpec
		fields []string
	}{
		{"input", servicetest.Input("", "hello ZZ"), []string{"start.input"}},
		{"thread and input", &agentdv1.RunSpec{ThreadId: "tZZ", Input: "ZZ"}, []string{"start.thread_id", "start.input"}},
		{"message part", &agentdv1.RunSpec{Messages: []*agentdv1.Message{
			{Role: agentdv1.Role_ROLE_SYSTEM, Parts: []*agentdv1.Part{text("be brief")}},
			{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{text("hello"), text("world ZZ")}},
		}}, []string{"start.messages[1].parts[1].text"}},
		{"every element named", &agentdv1.RunSpec{Messages: []*agentdv1.Message{
			{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{text("ZZ"), text("ok"), text("ZZ")}},
		}}, []string{"start.messages[0].parts[0].text", "start.messages[0].parts[2].text"}},
		{"metadata value", &agentdv1.RunSpec{Input: "hello", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"ok": str("fine"), "user": str("ZZ"),
		}}}, []string{`start.metadata["user"]`}},
		{"metadata key", &agentdv1.RunSpec{Input: "hello", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"kZZ": str("fine"),
		}}}, []string{`start.metadata["k` + "\uFFFD" + `"]`}},
		{"client tool schema", &agentdv1.RunSpec{Input: "hello", ClientTools: []*agentdv1.ClientTool{
			{Spec: &agentdv1.ToolSpec{Name: "ok"}},
			{Spec: &agentdv1.ToolSpec{Name: "pick", Parameters: &structpb.Struct{Fields: map[string]*structpb.Value{
				"type": str("object"),
				"properties": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
					"color": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
						"enum": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{str("red"), str("ZZ")}}),
					}}),
				}}),
			}}}},
		}}, []string{`start.client_tools[1].spec.parameters["properties"]["color"]["enum"][1]`}},
		{"tool result in history", &agentdv1.RunSpec{Messages: []*agentdv1.Message{
			{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{text("what is 1+1")}},
			{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "c1", Name: "calculate", ArgumentsJson: `{"expression":"1+1ZZ"}`}}}}},
			{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "c1", Output: &agentdv1.ToolResultPart_Json{Json: str("ZZ")}}}}}},
		}}, []string{"start.messages[1].parts[0].tool_call.arguments_json", "start.messages[2].parts[0].tool_result.json"}},
		{"config", &agentdv1.RunSpec{Input: "hello", Config: &agentdv1.RunConfig{ApprovalTimeout: durationpb.New(1), ToolPolicies: []*agentdv1.ToolPolicyOverride{{Tool: "save_ZZ"}}}},
			[]string{"start.config.tool_policies[0].tool"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("ExecuteRun", func(t *testing.T) {
				var resp agentdv1.ExecuteRunResponse
				err := srv.Conn.Invoke(t.Context(), agentdv1.AgentService_ExecuteRun_FullMethodName,
					withInvalidUTF8(t, &agentdv1.ExecuteRunRequest{Start: tc.spec}), &resp, grpc.ForceCodecV2(wireCodec{}))
				wantUTF8Violations(t, err, tc.fields...)
			})
			t.Run("StartRun", func(t *testing.T) {
				s, err := srv.Conn.NewStream(t.Context(), &agentdv1.AgentService_ServiceDesc.Streams[1], agentdv1.AgentService_StartRun_FullMethodName, grpc.ForceCodecV2(wireCodec{}))
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SendMsg(withInvalidUTF8(t, &agentdv1.StartRunRequest{Start: tc.spec})); err != nil {
					t.Fatal(err)
				}
				s.CloseSend()
				wantUTF8Violations(t, s.RecvMsg(new(agentdv1.StartRunResponse)), tc.fields...)
			})
			t.Run("Run", func(t *testing.T) {
				s, err := srv.Client.Run(t.Context(), grpc.ForceCodecV2(wireCodec{}))
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SendMsg(withInvalidUTF8(t, &agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: tc.spec}})); err != nil {
					t.Fatal(err)
				}
				s.CloseSend()
				_, err = s.Recv()
				wantUTF8Violations(t, err, tc.fields...)
			})
		})
	}
}

// A message with invalid UTF-8 on a running stream is refused in its ack, naming the
// field, and changes nothing: the approval it came during is still open, no steer enters
// the transcript, no cancel ends the run.
func TestInvalidUTF8_LaterMessageIsRefusedInItsAck(t *testing.T) {
	c := newTestServer(t, service.Config{}).Client
	rs, err := c.Run(t.Context(), grpc.ForceCodecV2(wireCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	s := servicetest.NewStream(t, rs)
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("", "save a note: milk")}})
	appr := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	id := appr.GetApprovalId()

	str := structpb.NewStringValue
	cases := []struct {
		name  string
		msg   *agentdv1.RunRequest
		field string
	}{
		{"steer text", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "also eggs ZZ"}}}, "steer.text"},
		{"steer message", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Message: &agentdv1.Message{
			Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "ZZ"}}}}}}}, "steer.message.parts[0].text"},
		{"edited arguments", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: id, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
			EditedArguments: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"title": str("milk ZZ")}}),
		}}}, `approval_decision.edited_arguments["title"]`},
		{"decision reason", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: id, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, Reason: "ZZ",
		}}}, "approval_decision.reason"},
		{"tool result", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ToolResult{ToolResult: &agentdv1.ToolResult{
			ToolCallId: "call_1", Output: &agentdv1.ToolResult_Text{Text: "ZZ"}}}}, "tool_result.text"},
		{"tool result json", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ToolResult{ToolResult: &agentdv1.ToolResult{
			ToolCallId: "call_1", Output: &agentdv1.ToolResult_Json{Json: structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{str("ok"), str("ZZ")}})}}}}, "tool_result.json[1]"},
		{"cancel reason", &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: "ZZ"}}}, "cancel.reason"},
	}
	for _, tc := range cases {
		tc.msg.ClientSeq = s.NextSeq()
		if err := s.RunClient().SendMsg(withInvalidUTF8(t, tc.msg)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		a := s.Until(isAck(tc.msg.ClientSeq)).GetInputAck()
		if a.GetAccepted() || a.GetError().GetReason() != "INVALID_UTF8" || !strings.HasPrefix(a.GetError().GetMessage(), tc.field+": ") {
			t.Errorf("%s: ack %v, want refused with INVALID_UTF8 naming %s", tc.name, a, tc.field)
		}
	}

	seq := s.Send(servicetest.Approve(id))
	if a := s.Until(isAck(seq)).GetInputAck(); !a.GetAccepted() {
		t.Fatalf("approval after the refusals: ack %v, want accepted", a)
	}
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("finished %v %v, want COMPLETED", fin.GetReason(), err)
	}
	for _, ev := range s.Events() {
		if ev.GetSteerApplied().GetClientSeq() != 0 || strings.Contains(ev.String(), "also eggs") { // 0: the start's input
			t.Errorf("a refused steer got into the run: %v", ev)
		}
		if args := ev.GetApprovalResolved().GetArgumentsJson(); strings.Contains(args, "\uFFFD") || strings.Contains(args, `\ufffd`) {
			t.Errorf("refused edited arguments were used: %s", args)
		}
	}
}

// The codec leaves the messages of other services to gRPC: health keeps gRPC's INTERNAL.
func TestInvalidUTF8_OtherPackagesKeepGRPCBehaviour(t *testing.T) {
	srv := newTestServer(t, service.Config{})
	var resp healthpb.HealthCheckResponse
	err := srv.Conn.Invoke(t.Context(), healthpb.Health_Check_FullMethodName,
		withInvalidUTF8(t, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentServiceZZ"}), &resp, grpc.ForceCodecV2(wireCodec{}))
	if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "invalid UTF-8") {
		t.Errorf("status %v, want gRPC's INTERNAL naming invalid UTF-8", err)
	}

	if err := service.Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(withInvalidUTF8(t, &healthpb.HealthCheckRequest{Service: "ZZ"}))}, new(healthpb.HealthCheckRequest)); err == nil {
		t.Error("Codec decoded a health request with invalid UTF-8, want proto.Unmarshal's error")
	}
}

// A client cannot forge the codec's record of invalid UTF-8: the field it uses is dropped
// from what a client sends.
func TestInvalidUTF8_ClientCannotForgeTheRecord(t *testing.T) {
	srv := newTestServer(t, service.Config{})
	b, err := proto.Marshal(&agentdv1.ExecuteRunRequest{Start: servicetest.Input("", "what is 2+2?")})
	if err != nil {
		t.Fatal(err)
	}
	for num := protowire.Number(19000); num <= 19999; num += 999 { // the codec's field is in protobuf's reserved range
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, "start.input")
	}
	var resp agentdv1.ExecuteRunResponse
	if err := srv.Conn.Invoke(t.Context(), agentdv1.AgentService_ExecuteRun_FullMethodName, wireBytes(b), &resp, grpc.ForceCodecV2(wireCodec{})); err != nil {
		t.Fatalf("ExecuteRun with the record forged: %v, want the run to go", err)
	}
	if got := resp.GetResult().GetFinalText(); got != "2+2 = 4" {
		t.Errorf("final text %q, want 2+2 = 4", got)
	}
}

// A message that proto.Unmarshal decodes, the codec decodes the same.
func TestCodec_ValidMessagesDecodeAsProtoUnmarshal(t *testing.T) {
	str := structpb.NewStringValue
	unknown := &agentdv1.RunRequest{ClientSeq: 3, Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}}
	unknown.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "from a newer client"))
	msgs := []proto.Message{
		&agentdv1.RunRequest{},
		&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{
			Agent: "default", ThreadId: "thread_1", RequestId: "req_ü", Input: "héllo, 世界 🌍",
			Messages:     []*agentdv1.Message{{Id: "m1", Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "ça va"}}}}},
			ClientTools:  []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "ask", Parameters: &structpb.Struct{Fields: map[string]*structpb.Value{"type": str("object")}}}, Timeout: durationpb.New(5e9)}},
			Config:       &agentdv1.RunConfig{MaxSteps: 3, ApprovalPolicy: agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK},
			Continuation: []byte{0xff, 0xfe, 0},
			Metadata:     &structpb.Struct{Fields: map[string]*structpb.Value{"a": str("b"), "n": structpb.NewNumberValue(1), "l": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewBoolValue(true), structpb.NewNullValue()}})}},
		}}},
		&agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "stop", Mode: agentdv1.SteerMode_STEER_MODE_INTERRUPT}}},
		&agentdv1.RunRequest{ClientSeq: 4, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: "appr_1", Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, EditedArguments: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"title": str("milk")}})}}},
		unknown,
		&agentdv1.ExecuteRunRequest{Start: servicetest.Input("", "what is 2+2?")},
		&agentdv1.StartRunRequest{Start: servicetest.Input("", "hello")},
		&agentdv1.ListAgentsRequest{},
		&healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"},
	}
	c := service.Codec()
	for _, want := range msgs {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		std := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, std); err != nil {
			t.Fatal(err)
		}
		got := want.ProtoReflect().New().Interface()
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
			t.Errorf("%T: Unmarshal: %v", want, err)
			continue
		}
		if diff := cmp.Diff(std, got, protocmp.Transform()); diff != "" {
			t.Errorf("%T decoded differently from proto.Unmarshal (-proto +codec):\n%s", want, diff)
		}
	}

	// Marshal is gRPC's: the bytes proto.Marshal writes.
	out, err := c.Marshal(msgs[2])
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	if want, _ := proto.Marshal(msgs[2]); !bytes.Equal(out.Materialize(), want) {
		t.Error("Marshal wrote other bytes than proto.Marshal")
	}
}

// The codec decodes what has invalid UTF-8 with each run of invalid bytes made U+FFFD,
// and the result is a message proto.Marshal accepts.
func TestCodec_InvalidUTF8BecomesReplacementCharacters(t *testing.T) {
	cases := []struct{ bad, want string }{
		{"\xff\xfe", "a\uFFFDb"},
		{"\xc3", "a\uFFFDb"},         // a sequence cut short
		{"\xed\xa0\x80", "a\uFFFDb"}, // a surrogate
		{"\xc0\xaf", "a\uFFFDb"},     // overlong
	}
	for _, tc := range cases {
		b, err := proto.Marshal(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "aXb"}}})
		if err != nil {
			t.Fatal(err)
		}
		// Splice the bad bytes in, fixing the two length prefixes (steer, then text).
		b = bytes.Replace(b, []byte("aXb"), []byte("a"+tc.bad+"b"), 1)
		b[1] += byte(len(tc.bad) - 1)
		b[3] += byte(len(tc.bad) - 1)
		if proto.Unmarshal(b, new(agentdv1.RunRequest)) == nil {
			t.Fatalf("%q: proto.Unmarshal accepted it", tc.bad)
		}
		got := new(agentdv1.RunRequest)
		if err := service.Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
			t.Errorf("%q: %v", tc.bad, err)
			continue
		}
		if got.GetSteer().GetText() != tc.want {
			t.Errorf("%q: text %q, want %q", tc.bad, got.GetSteer().GetText(), tc.want)
		}
		if _, err := proto.Marshal(got); err != nil {
			t.Errorf("%q: the decoded message does not marshal: %v", tc.bad, err)
		}
	}

	// Broken for another reason too: the error stands.
	b := append(withInvalidUTF8(t, &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "ZZ"}}}), 0x0a, 0x05)
	if err := service.Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, new(agentdv1.RunRequest)); err == nil {
		t.Error("a truncated message with invalid UTF-8 decoded")
	}
}

// FuzzCodecUnmarshal decodes random bytes as a RunRequest: the codec never panics,
// decodes whatever proto.Unmarshal decodes the same, and what it decodes has only valid
// strings (proto.Marshal checks them).
func FuzzCodecUnmarshal(f *testing.F) {
	f.Add([]byte(withInvalidUTF8(f, &agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: servicetest.Input("", "ZZ")}})))
	c := service.Codec()
	f.Fuzz(func(t *testing.T, b []byte) {
		got := new(agentdv1.RunRequest)
		err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
		std := new(agentdv1.RunRequest)
		if proto.Unmarshal(b, std) == nil {
			if err != nil {
				t.Fatalf("proto.Unmarshal decodes it, Codec fails: %v", err)
			}
			if diff := cmp.Diff(std, got, protocmp.Transform(), protocmp.IgnoreUnknown()); diff != "" {
				t.Fatalf("decoded differently from proto.Unmarshal (-proto +codec):\n%s", diff)
			}
		}
		if err != nil {
			return
		}
		if _, err := proto.Marshal(got); err != nil {
			t.Fatalf("decoded, but does not marshal: %v", err)
		}
		if !utf8.ValidString(got.GetSteer().GetText()) || !utf8.ValidString(got.GetStart().GetInput()) {
			t.Fatal("a string is not valid UTF-8")
		}
	})
}

// BenchmarkCodecUnmarshal compares the codec with gRPC's on a valid message (the fast
// path), and shows the cost of one with invalid UTF-8.
func BenchmarkCodecUnmarshal(b *testing.B) {
	spec := &agentdv1.RunSpec{Input: strings.Repeat("hello ", 50), Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"user": structpb.NewStringValue("u1")}}}
	for range 20 {
		spec.Messages = append(spec.Messages, &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: strings.Repeat("text ", 40)}}}})
	}
	valid, err := proto.Marshal(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
	if err != nil {
		b.Fatal(err)
	}
	spec.Input += "ZZ"
	invalid := withInvalidUTF8(b, &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
	for _, bc := range []struct {
		name  string
		codec interface {
			Unmarshal(mem.BufferSlice, any) error
		}
		data []byte
	}{
		{"grpc/valid", encoding.GetCodecV2(grpcproto.Name), valid},
		{"agentd/valid", service.Codec(), valid},
		{"agentd/invalid", service.Codec(), invalid},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if err := bc.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bc.data)}, new(agentdv1.RunRequest)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A response that carries a journal frame as its only content marshals to the frame
// itself, not a copy: the bytes every stream of the run sends are the journal's. Any
// other message marshals as gRPC's codec does.
func TestCodec_FrameGoesOutAsItIs(t *testing.T) {
	ev := &agentdv1.RunEvent{Seq: 7, RunId: "run_x", Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: "m", Delta: "hi"}}}
	want, err := proto.Marshal(&agentdv1.AttachRunResponse{Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []proto.Message{&agentdv1.RunResponse{}, &agentdv1.StartRunResponse{}, &agentdv1.AttachRunResponse{}} {
		frame := slices.Clone(want)
		m.ProtoReflect().SetUnknown(frame)
		bs, err := service.Codec().Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := bs.Materialize()
		if !bytes.Equal(got, want) {
			t.Errorf("%T marshals to %x, want %x", m, got, want)
		}
		if len(bs) != 1 || &bs[0].ReadOnlyData()[0] != &frame[0] {
			t.Errorf("%T: the frame was copied", m)
		}
		// Decoded, it is the event.
		back := &agentdv1.AttachRunResponse{}
		if err := proto.Unmarshal(got, back); err != nil || !proto.Equal(back.GetEvent(), ev) {
			t.Errorf("%T decodes to %v, %v", m, back, err)
		}
	}
	// A response with its event set is marshaled as usual.
	bs, err := service.Codec().Marshal(&agentdv1.RunResponse{Event: ev})
	if err != nil || !bytes.Equal(bs.Materialize(), want) {
		t.Errorf("a response with an event marshals to %x, %v; want %x", bs.Materialize(), err, want)
	}
}
