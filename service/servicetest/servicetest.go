package servicetest

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/test/bufconn"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
)

// Server is an agentd service served over bufconn.
type Server struct {
	// Service is the service under test.
	Service *service.Server
	// GRPC is the grpc.Server it is registered on.
	GRPC *grpc.Server
	// Health is the health service on GRPC: the service reports agentd.v1.AgentService
	// on it (service.Config.Health); the whole server ("") is SERVING.
	Health *health.Server
	// Conn is a client connection to it.
	Conn *grpc.ClientConn
	// Client is an AgentService client on Conn.
	Client agentdv1.AgentServiceClient

	lis *bufconn.Listener
}

// Dial opens another connection to the server, for a client with dial options of its
// own: grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx
// context.Context, _ string) (net.Conn, error) { return srv.Dial(ctx) }), …).
func (s *Server) Dial(ctx context.Context) (net.Conn, error) { return s.lis.DialContext(ctx) }

// Connect opens another connection to the server, closed with t.Cleanup: a second
// client, whose going away is its own.
func (s *Server) Connect(t testing.TB) (*grpc.ClientConn, agentdv1.AgentServiceClient) {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, agentdv1.NewAgentServiceClient(conn)
}

// Option configures NewServer.
type Option func(*options)

type options struct {
	serverOpts []grpc.ServerOption
}

// WithServerOptions adds options to the grpc.Server (interceptors, limits).
func WithServerOptions(opts ...grpc.ServerOption) Option {
	return func(o *options) { o.serverOpts = append(o.serverOpts, opts...) }
}

// NewServer starts cfg's service over bufconn, on a grpc.Server with
// service.ServerOptions and opts' options, next to a health service and server
// reflection (v1 and v1alpha), as agentd serves them. A nil cfg.Agents means agentd's
// agents without an agents file (agents.Default); a nil cfg.Health, a new health service.
// Everything stops with t.Cleanup.
func NewServer(t testing.TB, cfg service.Config, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Agents == nil {
		reg, err := agents.NewRegistry(agents.Default(), agents.RegistryOptions{Logger: cfg.Logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		cfg.Agents = reg
	}
	if cfg.Health == nil {
		cfg.Health = health.NewServer()
	}
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(append(service.ServerOptions(), o.serverOpts...)...)
	healthpb.RegisterHealthServer(gs, cfg.Health)
	reflection.Register(gs)
	svc.Register(gs)
	cfg.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis := bufconn.Listen(1 << 20)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
		// Runs outlive their streams: those a test left going end now.
		svc.Shutdown(context.Background(), 0)
	})
	return &Server{Service: svc, GRPC: gs, Health: cfg.Health, Conn: conn, Client: agentdv1.NewAgentServiceClient(conn), lis: lis}
}

// NewClient starts cfg's service over bufconn and returns a client of it.
func NewClient(t testing.TB, cfg service.Config, opts ...Option) agentdv1.AgentServiceClient {
	t.Helper()
	return NewServer(t, cfg, opts...).Client
}
