package service

import (
	"context"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
)

// GetThread implements agentdv1.AgentServiceServer.
func (s *Server) GetThread(ctx context.Context, in *agentdv1.GetThreadRequest) (_ *agentdv1.GetThreadResponse, err error) {
	defer func() { err = toStatus(err) }()

	if err := checkRequest(in); err != nil {
		return nil, err
	}
	if in.GetThreadId() == "" {
		return nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "thread_id", Description: "must be set"}})
	}
	return s.engine.GetThread(ctx, in.GetThreadId(), in.GetPageToken(), in.GetPageSize())
}

// ListThreads implements agentdv1.AgentServiceServer.
func (s *Server) ListThreads(ctx context.Context, in *agentdv1.ListThreadsRequest) (_ *agentdv1.ListThreadsResponse, err error) {
	defer func() { err = toStatus(err) }()

	return s.engine.ListThreads(ctx, in.GetPageToken(), in.GetPageSize())
}

// DeleteThread implements agentdv1.AgentServiceServer.
func (s *Server) DeleteThread(ctx context.Context, in *agentdv1.DeleteThreadRequest) (_ *agentdv1.DeleteThreadResponse, err error) {
	defer func() { err = toStatus(err) }()

	if err := checkRequest(in); err != nil {
		return nil, err
	}
	if err := s.engine.DeleteThread(ctx, in.GetThreadId()); err != nil {
		return nil, err
	}
	return &agentdv1.DeleteThreadResponse{}, nil
}

// RevokeGrant implements agentdv1.AgentServiceServer: a thread's later calls that the
// grant would have approved are asked again.
func (s *Server) RevokeGrant(ctx context.Context, in *agentdv1.RevokeGrantRequest) (_ *agentdv1.RevokeGrantResponse, err error) {
	defer func() { err = toStatus(err) }()

	if err := checkRequest(in); err != nil {
		return nil, err
	}
	var fe wire.FieldErrors
	if in.GetThreadId() == "" {
		fe.Add("thread_id", "must be set")
	}
	if in.GetGrantId() == "" {
		fe.Add("grant_id", "must be set")
	}
	if len(fe) > 0 {
		return nil, invalidArgument(reasonInvalidArgument, fe)
	}
	if err := s.engine.RevokeGrant(ctx, in.GetThreadId(), in.GetGrantId()); err != nil {
		return nil, err
	}
	return &agentdv1.RevokeGrantResponse{}, nil
}
