package service_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

// start serves a fresh Server over bufconn and returns it, its grpc.Server and a client
// connection. Everything is torn down with t.Cleanup.
func start(t *testing.T) (*service.Server, *grpc.Server, *grpc.ClientConn) {
	t.Helper()
	srv := servicetest.NewServer(t, service.Config{Logger: slog.New(slog.DiscardHandler)})
	return srv.Service, srv.GRPC, srv.Conn
}

func TestHealthServingForServerAndAgentService(t *testing.T) {
	_, _, conn := start(t)
	hc := healthpb.NewHealthClient(conn)
	for _, name := range []string{"", "agentd.v1.AgentService"} {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatalf("Check(%q): %v", name, err)
		}
		if got := resp.GetStatus(); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, want SERVING", name, got)
		}
	}
	_, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Check(unknown service) error = %v, want NotFound", err)
	}
}

func TestDrainTurnsHealthNotServing(t *testing.T) {
	srv, _, conn := start(t)
	srv.Drain(time.Second)
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetStatus(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after Drain status = %v, want NOT_SERVING", got)
	}
}

func TestReflectionListsServicesV1AndV1Alpha(t *testing.T) {
	_, _, conn := start(t)
	want := []string{"agentd.v1.AgentService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("v1 services = %q, want %q", got, want)
	}
	stream.CloseSend()

	alpha, err := reflectionv1alphapb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := alpha.Send(&reflectionv1alphapb.ServerReflectionRequest{MessageRequest: &reflectionv1alphapb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "agentd.v1.AgentService"}}); err != nil {
		t.Fatal(err)
	}
	aresp, err := alpha.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(aresp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("v1alpha: no file descriptor for agentd.v1.AgentService: %v", aresp)
	}
	alpha.CloseSend()
}

func TestGracefulStopWaitsForOpenStreamsThenCloses(t *testing.T) {
	_, gs, conn := start(t)
	// A health Watch stream stays open until the server ends it.
	watch, err := healthpb.NewHealthClient(conn).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := service.GracefulStop(ctx, gs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GracefulStop with an open stream = %v, want DeadlineExceeded", err)
	}
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("open stream after the forced stop: Recv error = %v, want Unavailable", err)
	}
}

func TestGracefulStopReturnsNilWhenIdle(t *testing.T) {
	_, gs, _ := start(t)
	if err := service.GracefulStop(t.Context(), gs); err != nil {
		t.Fatalf("GracefulStop with nothing open = %v, want nil", err)
	}
}
