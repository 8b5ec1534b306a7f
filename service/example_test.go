package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/service"
)

// An embedder mounts agentd's service on a grpc.Server of its own, which already serves
// its own health service, with an agent defined in Go: no agents file.
func Example() {
	// The embedder's server, with its health service.
	gs := grpc.NewServer(service.ServerOptions()...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)

	// One agent: the demo model, with a Go tool that reads the office clock.
	clock := runtime.NewTool(runtime.ToolSpec{
		Name:        "current_time",
		Description: "Tells the time on the office clock.",
		Parameters:  []byte(`{"type":"object","properties":{"timezone":{"type":"string"}}}`),
	}, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{JSON: []byte(`{"time":"2026-01-02T15:04:05Z","timezone":"UTC"}`)}, nil
	})
	rt, err := runtime.New(runtime.Config{Name: "clock", Model: demo.New(demo.Config{}), Tools: []runtime.Tool{clock}})
	if err != nil {
		panic(err)
	}
	served, err := service.NewAgents(&service.Agent{Description: "Reads the office clock.", Runtime: rt})
	if err != nil {
		panic(err)
	}

	// The service reports its own name on the embedder's health service, and registers
	// the AgentService alone.
	srv, err := service.New(service.Config{Agents: served, Health: hs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	srv.Register(gs)

	lis := bufconn.Listen(1 << 20)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx := context.Background()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
	if err != nil {
		panic(err)
	}
	fmt.Println("agentd.v1.AgentService:", h.GetStatus())
	resp, err := agentdv1.NewAgentServiceClient(conn).ExecuteRun(ctx, &agentdv1.ExecuteRunRequest{
		Start: &agentdv1.RunSpec{Input: "What time is it?"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.GetResult().GetFinalText())
	// Output:
	// agentd.v1.AgentService: SERVING
	// It is 15:04 on Friday, 2 January 2026 in UTC (2026-01-02T15:04:05Z).
}
