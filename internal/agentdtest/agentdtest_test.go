package agentdtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
)

const agentdPkg = "github.com/agentd/agentd/cmd/agentd"

// TestStartServesAndTerminateExitsZero starts the real agentd with a developer's
// AGENTD_* setting in the test's environment that would keep it from starting: Start
// leaves it out, waits until agentd serves, and Terminate sees it exit 0 on SIGTERM.
func TestStartServesAndTerminateExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts agentd; skipped with -short")
	}
	t.Setenv("AGENTD_DEMO_DELAY", "not a duration")
	bin := agentdtest.Build(t, agentdPkg)
	if again := agentdtest.Build(t, agentdPkg); again != bin {
		t.Errorf("the second Build returned %s, want the first's %s", again, bin)
	}
	p := agentdtest.Start(t, bin, agentdtest.Options{Args: []string{"--demo-delay", "0", "--drain-period", "1s", "--shutdown-timeout", "5s"}})
	if !strings.HasPrefix(p.Addr, "127.0.0.1:") {
		t.Errorf("Addr %q, want a loopback address", p.Addr)
	}
	conn := p.Dial(t)
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v; want SERVING", resp, err)
	}
	run, err := agentdv1.NewAgentServiceClient(conn).ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	if err != nil || run.GetResult().GetFinalText() != "2+2 = 4" {
		t.Fatalf("ExecuteRun: %v, %v; want 2+2 = 4\n--- agentd log:\n%s", run, err, p.Log())
	}
	if err := p.Terminate(time.Minute); err != nil {
		t.Fatalf("Terminate: %v\n--- agentd log:\n%s", err, p.Log())
	}
	if !strings.Contains(p.Log(), `"msg":"agentd stopped"`) {
		t.Errorf("the log does not say agentd stopped:\n%s", p.Log())
	}
	if err := p.Terminate(time.Minute); err == nil {
		t.Error("a second Terminate returned nil, want an error")
	}
}

// TestSharedStartsOnce: the tests that share an agentd get the same process.
func TestSharedStartsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts agentd; skipped with -short")
	}
	var s agentdtest.Shared
	bin := agentdtest.Build(t, agentdPkg)
	o := agentdtest.Options{Args: []string{"--demo-delay", "0"}}
	var first *agentdtest.Process
	for i := range 2 {
		t.Run("test", func(t *testing.T) {
			p := s.Start(t, bin, o)
			if i == 0 {
				first = p
			} else if p != first {
				t.Errorf("the second test got another process (%s, the first %s)", p.Addr, first.Addr)
			}
		})
	}
	// Still serving after the test that started it ended: Main stops it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := healthpb.NewHealthClient(first.Dial(t)).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("the shared agentd after its first test: %v, %v; want SERVING", resp, err)
	}
}
