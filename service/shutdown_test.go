package service_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
)

// A server that shuts down ends the streams still attached once its runs are done (one
// to a parked run, here) UNAVAILABLE, saying to attach again elsewhere, so that the
// gRPC server's graceful stop does not wait out the shutdown timeout for them.
func TestShutdown_EndsTheStreamsStillAttached(t *testing.T) {
	srv := askerServer(t, service.Config{})
	runID, _, _ := parkRun(t, srv)
	stream, err := srv.Client.AttachRun(t.Context(), &agentdv1.AttachRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // attached
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if err := srv.Service.Shutdown(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := service.GracefulStop(ctx, srv.GRPC); err != nil {
		t.Fatalf("graceful stop: %v after %s: a stream held it", err, time.Since(began))
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("shutdown took %s with a stream attached to a parked run", took)
	}
	err = <-ended
	if code, reason, _ := errorInfo(err); code != codes.Unavailable || reason != "SERVER_DRAINING" {
		t.Errorf("the attached stream ended %v, want UNAVAILABLE SERVER_DRAINING", err)
	}
}
