package main

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// agentd owns its health service and reflection: the whole server ("") and
// agentd.v1.AgentService are SERVING once registered, and both turn NOT_SERVING when it
// shuts down, as new runs are refused.
func TestDaemonHealthAndShutdown(t *testing.T) {
	cfg, err := parseConfig([]string{"--demo-delay=0"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newServer(cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.close() })
	gs := grpc.NewServer()
	d.register(gs)
	var services []string
	for name := range gs.GetServiceInfo() {
		services = append(services, name)
	}
	slices.Sort(services)
	if want := []string{"agentd.v1.AgentService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}; !slices.Equal(services, want) {
		t.Errorf("services %q, want %q", services, want)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	statuses := func() []healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		var out []healthpb.HealthCheckResponse_ServingStatus
		for _, name := range []string{"", "agentd.v1.AgentService"} {
			resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
			if err != nil {
				t.Fatalf("Check(%q): %v", name, err)
			}
			out = append(out, resp.GetStatus())
		}
		return out
	}
	serving := healthpb.HealthCheckResponse_SERVING
	if got := statuses(); !slices.Equal(got, []healthpb.HealthCheckResponse_ServingStatus{serving, serving}) {
		t.Errorf("health of the server and the service: %v, want SERVING for both", got)
	}

	if err := d.shutdown(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	notServing := healthpb.HealthCheckResponse_NOT_SERVING
	if got := statuses(); !slices.Equal(got, []healthpb.HealthCheckResponse_ServingStatus{notServing, notServing}) {
		t.Errorf("health after shutdown: %v, want NOT_SERVING for both", got)
	}
	_, err = agentdv1.NewAgentServiceClient(conn).ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "hi"}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a run after shutdown: %v, want UNAVAILABLE", err)
	}
}
