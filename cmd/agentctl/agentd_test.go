package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// testKey signs the test agentd's continuations.
const testKey = "base64:/7YeE8kmxD9SeQgj3wEylR/MsMXXNqnImJaAbGVd9Ts="

// The real agentd, built once per test binary and started on demand.
var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error

	sharedOnce sync.Once
	sharedAddr string
	sharedErr  error

	runningMu sync.Mutex
	running   []*agentdProc
)

// agentdProc is a running agentd.
type agentdProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

func (p *agentdProc) stop() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// stopAgentds ends every agentd the tests started, and removes the build.
func stopAgentds() {
	runningMu.Lock()
	defer runningMu.Unlock()
	for _, p := range running {
		p.stop()
	}
	running = nil
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// agentdBinary builds cmd/agentd once.
func agentdBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts agentd; skipped with -short")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "agentctl-test-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "agentd")
		build := exec.Command("go", "build", "-o", buildBin, "../agentd")
		build.Dir = pkgDir
		out, err := build.CombinedOutput()
		if err != nil {
			buildErr = err
			buildBin = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build ../agentd: %v\n%s", buildErr, buildBin)
	}
	return buildBin
}

// sharedAgentd returns the address of an agentd with the demo agent, answering at once,
// shared by the tests.
func sharedAgentd(t *testing.T) string {
	t.Helper()
	bin := agentdBinary(t)
	sharedOnce.Do(func() { sharedAddr, sharedErr = startAgentd(bin, insecure.NewCredentials()) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedAddr
}

// startAgentd starts agentd on a free loopback port with extra flags and waits until it
// serves, reaching it with creds. It runs until stopAgentds.
func startAgentd(bin string, creds credentials.TransportCredentials, extra ...string) (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := lis.Addr().String()
	lis.Close()
	logf, err := os.CreateTemp(buildDir, "agentd-*.log")
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"--listen", addr, "--demo-delay", "0", "--log-level", "warn"}, extra...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTD_") && !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "AGENTD_CONTINUATION_KEY="+testKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", err
	}
	p := &agentdProc{cmd: cmd, exited: make(chan struct{}), log: logf.Name()}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	runningMu.Lock()
	running = append(running, p)
	runningMu.Unlock()
	if err := waitServing(addr, creds, p); err != nil {
		b, _ := os.ReadFile(p.log)
		return "", &startError{err: err, log: string(b)}
	}
	return addr, nil
}

type startError struct {
	err error
	log string
}

func (e *startError) Error() string { return e.err.Error() + "\n--- agentd log:\n" + e.log }

// waitServing polls agentd's health (which needs no token) until it answers SERVING.
func waitServing(addr string, creds credentials.TransportCredentials, p *agentdProc) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-p.exited:
			return errExited
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if time.Now().After(deadline) {
			return errNotServing
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type constErr string

func (e constErr) Error() string { return string(e) }

const (
	errExited     constErr = "agentd exited before it served"
	errNotServing constErr = "agentd did not answer SERVING within 20s"
)

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
