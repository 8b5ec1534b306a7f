package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "localhost:50051" || cfg.shutdownTimeout != 30*time.Second || cfg.logLevel != slog.LevelInfo {
		t.Errorf("defaults = %+v", cfg)
	}
}

func TestConfigEnvironmentFallback(t *testing.T) {
	cfg, err := parseConfig(nil, env(map[string]string{
		"AGENTD_LISTEN":           "127.0.0.1:6000",
		"AGENTD_SHUTDOWN_TIMEOUT": "5s",
		"AGENTD_LOG_LEVEL":        "debug",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "127.0.0.1:6000" || cfg.shutdownTimeout != 5*time.Second || cfg.logLevel != slog.LevelDebug {
		t.Errorf("from environment = %+v", cfg)
	}
}

func TestConfigFlagWinsOverEnvironment(t *testing.T) {
	cfg, err := parseConfig([]string{"--listen", "127.0.0.1:7000"}, env(map[string]string{"AGENTD_LISTEN": "127.0.0.1:6000"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "127.0.0.1:7000" {
		t.Errorf("listen = %q, want the flag's value", cfg.listen)
	}
}

func TestConfigBadEnvironmentValueNamesVariable(t *testing.T) {
	_, err := parseConfig(nil, env(map[string]string{"AGENTD_SHUTDOWN_TIMEOUT": "soon"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "AGENTD_SHUTDOWN_TIMEOUT") {
		t.Errorf("error = %v, want one naming AGENTD_SHUTDOWN_TIMEOUT", err)
	}
}

func TestConfigRejectsStrayArguments(t *testing.T) {
	if _, err := parseConfig([]string{"serve"}, env(nil), io.Discard); err == nil {
		t.Error("stray argument accepted")
	}
	if _, err := parseConfig([]string{"--help"}, env(nil), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help error = %v, want flag.ErrHelp", err)
	}
}

// The daemon serves health on a real loopback port and stops cleanly when its context ends.
func TestServeAndShutdownOnLoopback(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, config{shutdownTimeout: time.Second}, lis, slog.New(slog.DiscardHandler))
	}()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, want SERVING", resp.GetStatus())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v after shutdown, want nil", err)
	}
}

func TestRunFailsOnBusyAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	err = run(t.Context(), []string{"--listen", lis.Addr().String()}, env(nil), io.Discard)
	if err == nil {
		t.Fatal("run on a busy address succeeded")
	}
}
