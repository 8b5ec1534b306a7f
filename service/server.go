package service

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// Config configures a [Server]. Zero values take the defaults named on each field.
type Config struct {
	// Agents are the agents served; nil means the built-in demo agent.
	Agents *Registry
	// Logger receives the server's structured logs. Nil means slog.Default().
	Logger *slog.Logger
	// ContinuationKey signs continuations; every replica that may resume a run must share
	// it. Nil means a random key: parked runs then resume only on this process.
	ContinuationKey []byte
	// ContinuationTTL is how long a continuation stays valid; 0 means 24 hours.
	ContinuationTTL time.Duration
	// MaxConcurrentRuns bounds the runs in progress; past it new runs get
	// RESOURCE_EXHAUSTED. 0 means 1024.
	MaxConcurrentRuns int
	// MaxClientTools bounds the client tools one run may declare; 0 means 64.
	MaxClientTools int
	// MaxTranscriptBytes bounds the size of a start's transcript: its messages (as
	// encoded on the wire) and its input. A larger one is refused with INVALID_ARGUMENT
	// naming the limit. 0 means 2 MiB: more than the context window of most models, less
	// than gRPC's default 4 MiB message limit. A server that raises the message limit
	// (grpc.MaxRecvMsgSize) for long resumed transcripts raises this one too.
	MaxTranscriptBytes int
	// SteerRate and SteerBurst bound a run's steers (a token bucket); 0 means 5 a second
	// with bursts of 10.
	SteerRate  float64
	SteerBurst int
	// ApprovalTimeout is how long an approval waits under APPROVAL_POLICY_ASK when the
	// client names none; 0 means 10 minutes.
	ApprovalTimeout time.Duration
	// ClientToolTimeout is how long a client tool call waits for its result when the
	// client names none; 0 means 5 minutes.
	ClientToolTimeout time.Duration
	// HeartbeatInterval is the silence after which a stream gets a heartbeat; 0 means 15 s.
	HeartbeatInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// TracerProvider and MeterProvider are the runtime's (runtime.Config) for the agents of
	// the registry New builds when Agents is nil; [NewRegistry] takes them from
	// [RegistryOptions]. Nil means the global ones.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Propagator reads the trace context a caller sends in the RPC's metadata, so that a
	// run joins the caller's trace; nil means otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
}

// Server implements agentdv1.AgentServiceServer. It is safe for concurrent use.
type Server struct {
	agentdv1.UnimplementedAgentServiceServer

	cfg    Config
	log    *slog.Logger
	health *health.Server
	agents *Registry
	codec  *continuationCodec

	active atomic.Int64   // runs in progress
	runs   sync.WaitGroup // one per run in progress

	drainOnce   sync.Once
	drainCtx    context.Context // done when draining starts
	drainCancel context.CancelFunc
	drainUntil  atomic.Int64 // unix nanos when running runs are shut down
	stopRuns    context.Context
	stopCancel  context.CancelCauseFunc
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = 1024
	}
	if cfg.MaxClientTools <= 0 {
		cfg.MaxClientTools = 64
	}
	if cfg.MaxTranscriptBytes <= 0 {
		cfg.MaxTranscriptBytes = 2 << 20
	}
	if cfg.SteerRate <= 0 {
		cfg.SteerRate = 5
	}
	if cfg.SteerBurst <= 0 {
		cfg.SteerBurst = 10
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 10 * time.Minute
	}
	if cfg.ClientToolTimeout <= 0 {
		cfg.ClientToolTimeout = 5 * time.Minute
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 15 * time.Second
	}
	if cfg.Agents == nil {
		reg, err := NewRegistry(DefaultAgentsConfig(), RegistryOptions{Logger: cfg.Logger, TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider})
		if err != nil {
			return nil, err
		}
		cfg.Agents = reg
	}
	key := cfg.ContinuationKey
	if len(key) == 0 {
		var err error
		if key, _, err = continuationKey("", ""); err != nil {
			return nil, err
		}
		cfg.Logger.Warn("no continuation key configured: a random one is used, so parked runs resume only on this process (set AGENTD_CONTINUATION_KEY on every replica)")
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		health: health.NewServer(),
		agents: cfg.Agents,
		codec:  newContinuationCodec(key, cfg.ContinuationTTL, cfg.Now),
	}
	s.drainCtx, s.drainCancel = context.WithCancel(context.Background())
	s.stopRuns, s.stopCancel = context.WithCancelCause(context.Background())
	return s, nil
}

func (s *Server) now() time.Time { return s.cfg.Now() }

// Register installs the AgentService, the health service and server reflection (v1 and
// v1alpha) on gs, and reports SERVING for the whole server ("") and for
// agentd.v1.AgentService. Call it once, before gs.Serve. Build gs with [ServerOptions].
func (s *Server) Register(gs *grpc.Server) {
	agentdv1.RegisterAgentServiceServer(gs, s)
	healthpb.RegisterHealthServer(gs, s.health)
	reflection.Register(gs)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// Drain starts a graceful shutdown: health turns NOT_SERVING so load balancers stop
// sending runs here, new runs are refused with UNAVAILABLE, and every open stream gets a
// go_away event saying how long its run has before it is shut down (period). Drain is
// idempotent; see [Server.Shutdown].
func (s *Server) Drain(period time.Duration) {
	s.drainOnce.Do(func() {
		s.drainUntil.Store(s.now().Add(period).UnixNano())
		s.log.Info("draining: health is NOT_SERVING, new runs are refused", "period", period.String())
		s.health.Shutdown()
		s.drainCancel()
	})
}

func (s *Server) isDraining() bool { return s.drainCtx.Err() != nil }

func (s *Server) drainDeadline() time.Time { return time.Unix(0, s.drainUntil.Load()) }

// Shutdown drains the server (see [Server.Drain]) and waits for the runs in progress to
// finish, up to period. Runs still going then end SHUTDOWN, each with a continuation
// that any replica sharing the continuation key resumes. Shutdown returns when every run
// has ended, or when ctx is done.
func (s *Server) Shutdown(ctx context.Context, period time.Duration) error {
	s.Drain(period)
	done := make(chan struct{})
	go func() {
		s.runs.Wait()
		close(done)
	}()
	timer := time.NewTimer(period)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	if n := s.active.Load(); n > 0 {
		s.log.Info("drain period over: shutting down the runs in progress", "runs", n)
	}
	s.stopCancel(runtime.ErrShutdown)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ActiveRuns returns the number of runs in progress.
func (s *Server) ActiveRuns() int { return int(s.active.Load()) }

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
	key, _, err := continuationKey(value, file)
	return key, err
}
