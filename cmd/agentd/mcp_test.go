package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/internal/logtest"
)

// TestServeStopsMCPServersOnShutdown checks that agentd starts the MCP servers of its
// agents file and stops them when it shuts down.
func TestServeStopsMCPServersOnShutdown(t *testing.T) {
	bin := agentdtest.Build(t, "github.com/agentd/agentd/runtime/tool/mcp/internal/testserver")
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	file := "mcp_servers: [{name: proc, command: " + strconv.Quote(bin) + "}]\n" +
		"agents: [{name: ops, model: demo, tools: [calculate], mcp_servers: [proc]}]\n"
	if err := os.WriteFile(agents, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	srv := startServe(t, []string{"--config", agents}, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	resp, err := agentdv1.NewAgentServiceClient(dial(t, srv.addr, nil)).ListAgents(srv.ctx, &agentdv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]int{}
	for _, ti := range resp.GetAgents()[0].GetTools() {
		sources[ti.GetSource()]++
	}
	if sources["builtin"] != 1 || sources["mcp:proc"] == 0 {
		t.Errorf("tools by source %v, want calculate and the server's", sources)
	}

	// The server process says its pid on its standard error, which agentd logs. The bound
	// is for a pid that never comes, not for a slow one.
	pidRE := regexp.MustCompile(`testserver: started, pid (\d+)`)
	var pid int
	for deadline := time.Now().Add(time.Minute); pid == 0; time.Sleep(10 * time.Millisecond) {
		if m := pidRE.FindStringSubmatch(logs.String()); m != nil {
			pid, _ = strconv.Atoi(m[1])
		} else if time.Now().After(deadline) {
			t.Fatalf("no pid in the logs:\n%s", logs.String())
		}
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the MCP server process %d is not running: %v", pid, err)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	// Closing the source waited for the process, so it is reaped and gone.
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the MCP server process %d still runs after agentd stopped", pid)
	}
}
