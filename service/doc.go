// Package service exposes the agentd runtime as the gRPC service agentd.v1.AgentService.
//
// [Server] implements agentdv1.AgentServiceServer; [Server.Register] installs it on a
// *grpc.Server together with the standard health service (grpc.health.v1) and server
// reflection, so grpcurl works with no proto files. [GracefulStop] drains a server within a
// deadline.
package service
