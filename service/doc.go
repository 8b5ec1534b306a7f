// Package service exposes the agentd runtime as the gRPC service agentd.v1.AgentService.
//
// [Server] implements agentdv1.AgentServiceServer; [Server.Register] installs it on a
// *grpc.Server together with the standard health service (grpc.health.v1) and server
// reflection, so grpcurl works with no proto files. [GracefulStop] drains a server within a
// deadline. Build that *grpc.Server with [ServerOptions] first, so that a client message
// with invalid UTF-8 is refused naming its field instead of failing the RPC with INTERNAL:
//
//	gs := grpc.NewServer(append(service.ServerOptions(), opts...)...)
//	srv.Register(gs)
package service
