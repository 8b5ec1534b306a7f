package service

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// Run implements agentdv1.AgentServiceServer: a whole conversation on one stream.
func (s *Server) Run(stream grpc.BidiStreamingServer[agentdv1.RunRequest, agentdv1.RunResponse]) error {
	first, err := s.recvStart(stream)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return invalidArgument(reasonFirstMessageNotStart, fieldErrors{{Field: "start", Description: "the stream closed before its start message"}})
		}
		return err
	}
	spec := first.GetStart()
	if spec == nil {
		return invalidArgument(reasonFirstMessageNotStart, fieldErrors{{Field: "kind", Description: "the first message of a Run stream must be start"}})
	}
	if fe := takeInvalidUTF8(first); fe != nil {
		return invalidArgument(reasonInvalidUTF8, fe)
	}
	ss, req, err := s.newSession(stream.Context(), modeRun, spec, func(ev *agentdv1.RunEvent) error {
		return stream.Send(&agentdv1.RunResponse{Event: ev})
	})
	if err != nil {
		return err
	}
	defer s.endSession(ss)
	// Client messages are read once run_started is out, so that it stays the first event
	// and every ack follows it.
	ss.started = func() { go ss.receive(stream.Recv) }
	return ss.executeStreaming(req)
}

// StartRun implements agentdv1.AgentServiceServer: a run whose events stream back to a
// caller that cannot answer; what would need it parks the run.
func (s *Server) StartRun(in *agentdv1.StartRunRequest, stream grpc.ServerStreamingServer[agentdv1.StartRunResponse]) error {
	if fe := takeInvalidUTF8(in); fe != nil {
		return invalidArgument(reasonInvalidUTF8, fe)
	}
	ss, req, err := s.newSession(stream.Context(), modeStart, in.GetStart(), func(ev *agentdv1.RunEvent) error {
		return stream.Send(&agentdv1.StartRunResponse{Event: ev})
	})
	if err != nil {
		return err
	}
	defer s.endSession(ss)
	return ss.executeStreaming(req)
}

// ExecuteRun implements agentdv1.AgentServiceServer: a run whose outcome alone comes
// back. A failed run's status carries the whole outcome as a detail, so nothing is lost.
func (s *Server) ExecuteRun(ctx context.Context, in *agentdv1.ExecuteRunRequest) (*agentdv1.ExecuteRunResponse, error) {
	if fe := takeInvalidUTF8(in); fe != nil {
		return nil, invalidArgument(reasonInvalidUTF8, fe)
	}
	ss, req, err := s.newSession(ctx, modeExecute, in.GetStart(), nil)
	if err != nil {
		return nil, err
	}
	defer s.endSession(ss)
	rf, err := ss.execute(req)
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.ExecuteRunResponse{RunId: ss.runID, ThreadId: ss.thread, TraceId: ss.traceID, Result: rf}
	if err := runStatus(rf.GetError(), resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// ListAgents implements agentdv1.AgentServiceServer.
func (s *Server) ListAgents(context.Context, *agentdv1.ListAgentsRequest) (*agentdv1.ListAgentsResponse, error) {
	resp := &agentdv1.ListAgentsResponse{}
	for _, e := range s.agents.List() {
		resp.Agents = append(resp.Agents, agentToProto(e))
	}
	return resp, nil
}
