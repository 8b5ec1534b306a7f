package tlstest_test

import (
	"context"
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentd/agentd/internal/tlstest"
)

// A health server behind mutual TLS, and a client the same CA vouches for. The body is
// a test's: every helper takes the test's t.
func Example() {
	_ = func(t *testing.T) {
		ca := tlstest.NewCA(t, "test CA")
		addr := tlstest.ServeTLS(t, &tls.Config{
			Certificates: []tls.Certificate{ca.Issue(t, "server", "127.0.0.1")},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    ca.Pool,
		}, func(gs *grpc.Server) { healthpb.RegisterHealthServer(gs, health.NewServer()) })

		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs:      ca.Pool,
			Certificates: []tls.Certificate{ca.Issue(t, "client")},
		})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("Check: %v", err)
		}
	}
}
