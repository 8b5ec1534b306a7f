package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/runs/journal"
)

// Run implements agentdv1.AgentServiceServer: a whole conversation on one stream, which
// starts a run or attaches to one.
func (s *Server) Run(stream grpc.BidiStreamingServer[agentdv1.RunRequest, agentdv1.RunResponse]) (err error) {
	defer func() { err = toStatus(err) }()

	first, err := s.recvStart(stream)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return invalidArgument(reasonFirstMessageNotStart, wire.FieldErrors{{Field: "start", Description: "the stream closed before its start message"}})
		}
		return err
	}
	if why, ok := takeUndecodable(first); ok {
		return refusal(runs.InvalidArgument, reasonInvalidArgument, why)
	}
	if fe := takeInvalidUTF8(first); fe != nil {
		return invalidArgument(reasonInvalidUTF8, fe)
	}
	if fe := badIDs(first); fe != nil {
		return invalidArgument(reasonInvalidArgument, fe)
	}
	send := func(f journal.Frame) error { return journal.SendFrame(stream.Send, f) }
	if at := first.GetAttach(); at != nil {
		return s.engine.AttachStream(stream.Context(), at.GetRunId(), at.GetAfterSeq(), send, clientRecv(stream.Recv))
	}
	spec := first.GetStart()
	if spec == nil {
		return invalidArgument(reasonFirstMessageNotStart, wire.FieldErrors{{Field: "kind", Description: "the first message of a Run stream must be start or attach"}})
	}
	st, err := s.engine.Start(stream.Context(), runs.ModeRun, spec)
	if err != nil {
		return err
	}
	return s.engine.Serve(stream.Context(), st, send, clientRecv(stream.Recv))
}

// StartRun implements agentdv1.AgentServiceServer: a run whose events stream back to a
// caller that cannot answer; what would need it parks the run.
func (s *Server) StartRun(in *agentdv1.StartRunRequest, stream grpc.ServerStreamingServer[agentdv1.StartRunResponse]) (err error) {
	defer func() { err = toStatus(err) }()

	if err := checkRequest(in); err != nil {
		return err
	}
	send := func(f journal.Frame) error { return journal.SendFrame(stream.Send, f) }
	st, err := s.engine.Start(stream.Context(), runs.ModeStart, in.GetStart())
	if err != nil {
		return err
	}
	return s.engine.Serve(stream.Context(), st, send, nil)
}

// ExecuteRun implements agentdv1.AgentServiceServer: a run whose outcome alone comes
// back, on the RPC's goroutine and bound to its context. A failed run's status carries
// the whole outcome as a detail, so nothing is lost.
func (s *Server) ExecuteRun(ctx context.Context, in *agentdv1.ExecuteRunRequest) (_ *agentdv1.ExecuteRunResponse, err error) {
	defer func() { err = toStatus(err) }()

	if err := checkRequest(in); err != nil {
		return nil, err
	}
	st, err := s.engine.Start(ctx, runs.ModeExecute, in.GetStart())
	if err != nil {
		return nil, err
	}
	return s.engine.Execute(ctx, st)
}

// AttachRun implements agentdv1.AgentServiceServer: a run's events from a cursor on.
func (s *Server) AttachRun(in *agentdv1.AttachRunRequest, stream grpc.ServerStreamingServer[agentdv1.AttachRunResponse]) (err error) {
	defer func() { err = toStatus(err) }()

	if err := checkRequest(in); err != nil {
		return err
	}
	send := func(f journal.Frame) error { return journal.SendFrame(stream.Send, f) }
	return s.engine.AttachStream(stream.Context(), in.GetRunId(), in.GetAfterSeq(), send, nil)
}

// ListAgents implements agentdv1.AgentServiceServer.
func (s *Server) ListAgents(context.Context, *agentdv1.ListAgentsRequest) (_ *agentdv1.ListAgentsResponse, err error) {
	defer func() { err = toStatus(err) }()

	resp := &agentdv1.ListAgentsResponse{}
	def, err := s.cfg.Agents.Agent("")
	for _, e := range s.cfg.Agents.List() {
		a := agentToProto(e)
		a.IsDefault = err == nil && def != nil && e.Name == def.Name
		resp.Agents = append(resp.Agents, a)
	}
	return resp, nil
}

// SendRunInput implements agentdv1.AgentServiceServer: one input for a run, from any
// client its owner allows.
func (s *Server) SendRunInput(ctx context.Context, in *agentdv1.SendRunInputRequest) (_ *agentdv1.SendRunInputResponse, err error) {
	defer func() { err = toStatus(err) }()

	if err := checkRequest(in); err != nil {
		return nil, err
	}
	var fe wire.FieldErrors
	if in.GetRunId() == "" {
		fe.Add("run_id", "must be set")
	}
	switch key := in.GetClientKey(); {
	case key == "":
		fe.Add("client_key", "must be set: a key of the client's for this input, so that a retry acts once")
	case len(key) > runs.MaxClientKey:
		fe.Add("client_key", "at most %d bytes", runs.MaxClientKey)
	case strings.HasPrefix(key, runs.StreamInputPrefix):
		fe.Add("client_key", "must not begin with %q: agentd keeps the inputs of Run streams under such keys", runs.StreamInputPrefix)
	}
	req := &agentdv1.RunRequest{}
	switch k := in.GetInput().(type) {
	case *agentdv1.SendRunInputRequest_ApprovalDecision:
		req.Kind = &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: k.ApprovalDecision}
	case *agentdv1.SendRunInputRequest_Steer:
		req.Kind = &agentdv1.RunRequest_Steer{Steer: k.Steer}
	case *agentdv1.SendRunInputRequest_ToolResult:
		req.Kind = &agentdv1.RunRequest_ToolResult{ToolResult: k.ToolResult}
	case *agentdv1.SendRunInputRequest_Cancel:
		req.Kind = &agentdv1.RunRequest_Cancel{Cancel: k.Cancel}
	default:
		fe.Add("input", "set one of approval_decision, steer, tool_result or cancel")
	}
	if len(fe) > 0 {
		return nil, invalidArgument(reasonInvalidArgument, fe)
	}
	return s.engine.SendInput(ctx, in.GetRunId(), in.GetClientKey(), req)
}

// recvStart reads a Run stream's first message, which must come within the start
// timeout: a stream that never starts a run does not hold the server. The receive it
// waits for is not joined: when the time is up the handler returns, and the end of the
// RPC ends the receive.
func (s *Server) recvStart(stream grpc.BidiStreamingServer[agentdv1.RunRequest, agentdv1.RunResponse]) (*agentdv1.RunRequest, error) {
	type received struct {
		req *agentdv1.RunRequest
		err error
	}
	ch := make(chan received, 1)
	go func() {
		req, err := stream.Recv()
		ch <- received{req, err}
	}()
	t := time.NewTimer(s.cfg.StartTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.req, r.err
	case <-t.C:
		return nil, refusal(runs.DeadlineExceeded, reasonStartTimeout, fmt.Sprintf("no start message within %s of opening the stream", s.cfg.StartTimeout))
	case <-stream.Context().Done():
		return nil, status.FromContextError(stream.Context().Err()).Err()
	}
}

// clientRecv is a Run stream's receive as the engine takes it: a client gone (the RPC
// cancelled or past its deadline) is errClientGone.
func clientRecv(recv func() (*agentdv1.RunRequest, error)) func() (*agentdv1.RunRequest, error) {
	return func() (*agentdv1.RunRequest, error) {
		req, err := recv()
		if c := status.Code(err); c == codes.Canceled || c == codes.DeadlineExceeded {
			err = fmt.Errorf("%w: %w", runs.ErrClientGone, err)
		}
		return req, err
	}
}

// checkInput is the wire's check of a client message after start, which the run acks
// with the refusal it returns: nil for a message the run may act on.
func checkInput(req *agentdv1.RunRequest) *agentdv1.RunError {
	if why, ok := takeUndecodable(req); ok {
		// A transcoder could not decode it (MarkUndecodable).
		return ackError(reasonInvalidMessage, "%s", why)
	}
	if fe := takeInvalidUTF8(req); fe != nil {
		// Decoded with the strings made valid (Codec).
		return utf8Refusal(fe)
	}
	if fe := badIDs(req); fe != nil {
		// An id too long, or with a NUL.
		return ackError(reasonInvalidID, "%s", fe.Summary())
	}
	return nil
}

// checkRequest is the door check of every request but a Run stream's: strings the codec
// had to make valid UTF-8, and ids too long or with a NUL, refused INVALID_ARGUMENT.
func checkRequest(in proto.Message) error {
	if fe := takeInvalidUTF8(in); fe != nil {
		return invalidArgument(reasonInvalidUTF8, fe)
	}
	if fe := badIDs(in); fe != nil {
		return invalidArgument(reasonInvalidArgument, fe)
	}
	return nil
}
