package service

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// Config configures a [Server].
type Config struct {
	// Logger receives the server's structured logs. Nil means slog.Default().
	Logger *slog.Logger
}

// Server implements agentdv1.AgentServiceServer. It is safe for concurrent use.
type Server struct {
	agentdv1.UnimplementedAgentServiceServer

	log    *slog.Logger
	health *health.Server
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Server{log: log, health: health.NewServer()}, nil
}

// Register installs the AgentService, the health service and server reflection (v1 and
// v1alpha) on gs, and reports SERVING for the whole server ("") and for
// agentd.v1.AgentService. Call it once, before gs.Serve.
func (s *Server) Register(gs *grpc.Server) {
	agentdv1.RegisterAgentServiceServer(gs, s)
	healthpb.RegisterHealthServer(gs, s.health)
	reflection.Register(gs)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// Drain turns every health status to NOT_SERVING, so load balancers and meshes stop
// sending new runs here. It is the first step of a graceful shutdown; see [GracefulStop].
func (s *Server) Drain() {
	s.log.Info("draining: health is NOT_SERVING")
	s.health.Shutdown()
}

// GracefulStop stops gs gracefully: it stops accepting connections and waits for open RPCs
// to finish, but no longer than ctx allows. When ctx is done first, it closes every
// connection and open RPC at once (grpc.Server.Stop). It returns ctx.Err() in that case and
// nil when every RPC finished in time.
func GracefulStop(ctx context.Context, gs *grpc.Server) error {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		gs.Stop()
		<-done
		return ctx.Err()
	}
}
