package service

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/continuation"
	"github.com/agentd/agentd/service/runs"
)

// Config configures a [Server]. Zero values take the defaults named on each field; the
// run engine's own settings (limits, parking, leases, retention, stalls) are its
// embedded [runs.Config].
type Config struct {
	// Agents are the agents served; required. [NewAgents] makes a fixed set from agents
	// defined in Go; package service/agents builds them from agentd's agents file.
	Agents Agents
	// Health, if set, is the health service the Server reports its own service on
	// (agentd.v1.AgentService): SERVING from [Server.Register], NOT_SERVING from
	// [Server.Drain]. The Server neither registers it nor touches any other name: the
	// whole server's status ("") and the other services' are the caller's.
	Health *health.Server
	// Logger receives the server's structured logs. Nil means slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds how long a Run stream may stay open without its start message;
	// past it the stream ends DEADLINE_EXCEEDED. 0 means 30 seconds.
	StartTimeout time.Duration
	// Propagator reads the trace context a caller sends in the RPC's metadata, so that a
	// run joins the caller's trace; nil means otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
	// Config is the run engine's configuration.
	runs.Config
}

// Server implements agentdv1.AgentServiceServer. It is safe for concurrent use.
type Server struct {
	agentdv1.UnimplementedAgentServiceServer
	cfg    Config
	engine *runs.Manager

	healthMu sync.Mutex // orders Register's SERVING before Drain's NOT_SERVING
}

// New returns a Server. Its one required field is cfg.Agents.
func New(cfg Config) (*Server, error) {
	if cfg.Agents == nil {
		return nil, errors.New("service: Config.Agents is required")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	srv := &Server{cfg: cfg}
	m, err := runs.New(cfg.Config, cfg.Agents, cfg.Logger, runs.Hooks{
		Drained:      func() { srv.setHealth(healthpb.HealthCheckResponse_NOT_SERVING) },
		TraceContext: srv.runTraceContext,
		CheckInput:   checkInput,
	})
	if err != nil {
		return nil, err
	}
	srv.engine = m
	return srv, nil
}

// Register installs the AgentService on gs, and nothing else: gs may hold the caller's
// own services, health and reflection among them. With [Config.Health] it reports
// agentd.v1.AgentService SERVING there, unless the Server drains already. Call it once,
// before gs.Serve. Build gs with [ServerOptions].
func (s *Server) Register(gs *grpc.Server) {
	agentdv1.RegisterAgentServiceServer(gs, s)
	s.setHealth(healthpb.HealthCheckResponse_SERVING)
}

// Drain starts a graceful shutdown: agentd.v1.AgentService turns NOT_SERVING on
// [Config.Health] so load balancers stop sending runs here, new runs are refused with
// UNAVAILABLE, and every open stream gets a go_away event saying how long its run has
// before it is shut down (period). Drain is idempotent; see [Server.Shutdown].
func (s *Server) Drain(period time.Duration) { s.engine.Drain(period) }

// Shutdown drains the server (see [Server.Drain]) and waits for the runs in progress to
// finish, up to period. Runs still going then end SHUTDOWN, each with a continuation
// that any replica sharing the continuation key resumes. Shutdown returns when every run
// has ended, or when ctx is done.
func (s *Server) Shutdown(ctx context.Context, period time.Duration) error {
	return s.engine.Shutdown(ctx, period)
}

// ActiveRuns returns the number of runs in progress.
func (s *Server) ActiveRuns() int { return s.engine.ActiveRuns() }

// ParkedRuns returns how many runs wait parked, with nothing of them running: their
// clients went away while they waited for one (see ParkTimeout).
func (s *Server) ParkedRuns() int { return s.engine.ParkedRuns() }

// RecoverRuns takes up the runs a process that stopped left unfinished in the store,
// with a store that outlives processes (Config.Store other than memory): call it once,
// after New and before serving. A run parked stays parked, ready to wake, its park
// timeout counted from when it parked. A run that was going on goes on from its last
// checkpoint, on a goroutine of its own, as the same run: what its journal holds after
// that checkpoint is closed first (the step it was in ends abandoned, its open messages
// too, its approvals are cancelled and its tool calls, which may or may not have run,
// are cancelled), and its seq goes on. A run that no client can follow any more (one
// of ExecuteRun, or under ON_DISCONNECT_CANCEL) ends CANCELLED instead.
//
// With a store several replicas share (PostgreSQL), the runs are not this process's to
// take: RecoverRuns starts taking up, from then until Shutdown, the runs that need a
// replica and have none (their replica died, or drained and handed them over, or a
// parked run's approval expires or its park times out), and returns 0.
//
// ctx carries what the recovered runs run with, as an RPC's context would after the
// server's interceptors: hooks.NewContext for server-wide hooks. It returns how many
// runs it took up.
func (s *Server) RecoverRuns(ctx context.Context) (int, error) { return s.engine.RecoverRuns(ctx) }

// setHealth reports st for agentd.v1.AgentService on Config.Health, if there is one. Once
// the server drains it reports NOT_SERVING alone.
func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	if s.cfg.Health == nil {
		return
	}
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	if s.engine.Draining() {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.cfg.Health.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, st)
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

// LoadContinuationKey returns the continuation signing key from value (the
// AGENTD_CONTINUATION_KEY variable: at least 32 bytes, used as they are, or
// "base64:…" or "hex:…") or else from the named file. With neither it returns nil, and
// [New] then makes a random key.
func LoadContinuationKey(value, file string) ([]byte, error) {
	if value == "" && file == "" {
		return nil, nil
	}
	key, _, err := continuation.Key(value, file)
	return key, err
}
