// Package service exposes the agentd runtime as the gRPC service agentd.v1.AgentService:
// the wire seam between protobuf and the run engine (package service/runs). It checks each
// request at the door, hands it to the engine, and maps the engine's errors to gRPC
// statuses in one place.
//
// [Server] implements agentdv1.AgentServiceServer for the agents of an [Agents]: agents
// defined in Go ([NewAgents]), or the Registry of package service/agents, built from
// agentd's agents file. [Server.Register] installs the AgentService alone, so the
// service mounts on a *grpc.Server that holds other services, its owner's health service
// among them; given that health service ([Config.Health]), the Server reports
// agentd.v1.AgentService on it, NOT_SERVING once it drains. Health for the whole server
// and reflection are the owner's: agentd's own daemon, cmd/agentd, registers both.
// [GracefulStop] drains a server within a deadline. Build the *grpc.Server with
// [ServerOptions] first, so that a client message with invalid UTF-8 is refused naming
// its field instead of failing the RPC with INTERNAL:
//
//	gs := grpc.NewServer(append(service.ServerOptions(), opts...)...)
//	srv, err := service.New(service.Config{Agents: agents, Health: hs})
//	…
//	srv.Register(gs)
//
// A run belongs to the Server, not to the stream that started it: its events are
// journaled in [Config.Store] (a bounded memory store unless set), streams attach to it
// with a cursor, and a run whose client went away parks there while it waits for one.
// With a store that outlives the process, call [Server.RecoverRuns] after New so that
// the runs a stopped process left go on.
package service
