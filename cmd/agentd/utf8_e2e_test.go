package main

import (
	"bytes"
	"log/slog"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// rawUTF8Codec is a client codec that sends []byte as they are, so that the test can put
// invalid UTF-8 in a string, which no proto encoder writes.
type rawUTF8Codec struct{}

func (rawUTF8Codec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.([]byte); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawUTF8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawUTF8Codec) Name() string { return "proto" }

// badUTF8 encodes m with its "ZZ" made invalid UTF-8.
func badUTF8(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(b, []byte("ZZ"), []byte{0xff, 0xfe}, 1)
}

// TestServeRefusesInvalidUTF8NamingTheField checks that agentd's own server has the
// service's codec: invalid UTF-8 in a run's start is INVALID_ARGUMENT naming the field,
// and in a steer it is refused in the ack while the run goes on.
func TestServeRefusesInvalidUTF8NamingTheField(t *testing.T) {
	srv := startServe(t, []string{"--demo-delay=0"}, slog.New(slog.DiscardHandler))
	defer func() {
		if err := srv.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	ctx := srv.ctx
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawUTF8Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	var resp agentdv1.ExecuteRunResponse
	err = conn.Invoke(ctx, agentdv1.AgentService_ExecuteRun_FullMethodName,
		badUTF8(t, &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2? ZZ"}}), &resp)
	st := status.Convert(err)
	var reason, field string
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.BadRequest:
			field = d.GetFieldViolations()[0].GetField()
		}
	}
	if st.Code() != codes.InvalidArgument || reason != "INVALID_UTF8" || field != "start.input" {
		t.Errorf("ExecuteRun: %v (reason %q, field %q), want INVALID_ARGUMENT, INVALID_UTF8, start.input", err, reason, field)
	}

	run, err := agentdv1.NewAgentServiceClient(conn).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: "save a note: milk"}}}); err != nil {
		t.Fatal(err)
	}
	var refused, finished bool
	for {
		out, err := run.Recv()
		if err != nil {
			t.Fatalf("Recv: %v; the run should finish", err)
		}
		ev := out.GetEvent()
		if a := ev.GetApprovalRequested(); a != nil {
			if err := run.SendMsg(badUTF8(t, &agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_Steer{Steer: &agentdv1.Steer{Text: "ZZ"}}})); err != nil {
				t.Fatal(err)
			}
			if err := run.Send(&agentdv1.RunRequest{ClientSeq: 3, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
				ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}}}); err != nil {
				t.Fatal(err)
			}
		}
		if a := ev.GetInputAck(); a.GetClientSeq() == 2 {
			refused = !a.GetAccepted() && a.GetError().GetReason() == "INVALID_UTF8"
		}
		if f := ev.GetRunFinished(); f != nil {
			finished = f.GetReason() == agentdv1.RunEndReason_RUN_END_REASON_COMPLETED
			break
		}
	}
	run.CloseSend()
	if !refused || !finished {
		t.Errorf("steer refused with INVALID_UTF8: %v; run COMPLETED: %v; want both", refused, finished)
	}
}
