package agents_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/agents/agentstest"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// quietLog is the log of the registries and servers whose logs no test reads.
var quietLog = slog.New(slog.DiscardHandler)

// toolSummary and agentSummary are what ListAgents shows of an agent, in a form cmp can
// compare.
type toolSummary struct {
	Name, Source string
	Disabled     bool
	Approval     runtime.Approval
	Timeout      time.Duration
	Parallel     bool
}

type agentSummary struct {
	Name, Description, Model string
	AllowModelOverride       bool
	MaxSteps                 int
	DefaultApproval          runtime.Approval
	Tools                    []toolSummary
}

func agentSummaryOf(e *runs.Agent) agentSummary {
	s := agentSummary{
		Name:               e.Name,
		Description:        e.Description,
		Model:              e.Runtime.Model().Name(),
		AllowModelOverride: e.Models != nil,
		MaxSteps:           e.Runtime.MaxSteps(),
		DefaultApproval:    e.Runtime.Policy().Default.Approval,
	}
	specs := e.Runtime.Tools()
	if len(specs) != len(e.Tools) {
		panic("Agent.Tools and Runtime.Tools() disagree")
	}
	for i, ti := range e.Tools {
		if ti.Spec.Name != specs[i].Name || ti.Policy != e.Runtime.Policy().For(ti.Spec.Name) {
			panic("Agent.Tools and the runtime disagree on " + ti.Spec.Name)
		}
		s.Tools = append(s.Tools, toolSummary{
			Name: ti.Spec.Name, Source: ti.Source, Disabled: ti.Policy.Disabled,
			Approval: ti.Policy.Approval, Timeout: ti.Timeout, Parallel: ti.Parallel,
		})
	}
	return s
}

func registrySummary(r *agents.Registry) []agentSummary {
	var out []agentSummary
	for _, e := range r.List() {
		out = append(out, agentSummaryOf(e))
	}
	return out
}

// builtinToolSummaries returns the summaries of the three built-in tools with save_note's
// approval, a timeout and whether they run in parallel.
func builtinToolSummaries(noteApproval runtime.Approval, timeout time.Duration, parallel bool) []toolSummary {
	return []toolSummary{
		{Name: "current_time", Source: "builtin", Timeout: timeout, Parallel: parallel},
		{Name: "calculate", Source: "builtin", Timeout: timeout, Parallel: parallel},
		{Name: "save_note", Source: "builtin", Approval: noteApproval, Timeout: timeout, Parallel: parallel},
	}
}

var workloadToolSummaries = []toolSummary{
	{Name: "echo", Source: "workload", Timeout: time.Minute},
	{Name: "add", Source: "workload", Timeout: time.Minute},
}

func workloadSize(t *testing.T, name string) workload.Size {
	t.Helper()
	size, err := workload.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return size
}

// runAgent runs req on e and returns the terminal event.
func runAgent(t *testing.T, e *runs.Agent, req *runtime.Request) *runtime.RunFinished {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var fin *runtime.RunFinished
	for ev, err := range e.Runtime.Run(ctx, req) {
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := ev.(*runtime.RunFinished); ok {
			fin = f
		}
	}
	if fin == nil {
		t.Fatal("no RunFinished")
	}
	return fin
}

// defaultOf returns r's default agent.
func defaultOf(t testing.TB, r *agents.Registry) *runs.Agent {
	t.Helper()
	a, err := r.Agent("")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func hasTool(a *runs.Agent, name string) bool {
	for _, ti := range a.Tools {
		if ti.Spec.Name == name {
			return true
		}
	}
	return false
}

// writeAgentsFile writes an agents file after replacing the keys of vars.
func writeAgentsFile(t *testing.T, text string, vars map[string]string) string {
	t.Helper()
	for k, v := range vars {
		text = strings.ReplaceAll(text, k, v)
	}
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadRegistry loads an agents file and builds its registry, closed at the test's end.
func loadRegistry(t *testing.T, path string, models map[string]*rt.Model) *agents.Registry {
	t.Helper()
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Resolve: agentstest.ScriptResolver(models), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Errorf("Registry.Close: %v", err)
		}
	})
	return reg
}

// serveAgents serves a's agents over bufconn and returns a client.
func serveAgents(t *testing.T, a runs.Agents) agentdv1.AgentServiceClient {
	t.Helper()
	return servicetest.NewClient(t, service.Config{Agents: a, Logger: quietLog})
}

// buildTestServer builds the stdio MCP server of package mcp's tests.
func buildTestServer(t *testing.T) string {
	t.Helper()
	return agentdtest.Build(t, "github.com/agentd/agentd/runtime/tool/mcp/internal/testserver")
}

// toolResults returns the tool_call_results of evs, in order.
func toolResults(evs []*agentdv1.RunEvent) []*agentdv1.ToolCallResult {
	var rs []*agentdv1.ToolCallResult
	for _, ev := range evs {
		if r := ev.GetToolCallResult(); r != nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// checkErrorLines checks that err has one line per want, each starting with path and
// then that want: an agents file's errors name the file and line of each problem.
func checkErrorLines(t *testing.T, err error, path string, want []string) {
	t.Helper()
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("error has %d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], path+w) {
			t.Errorf("error line %d:\n got %s\nwant %s%s", i, lines[i], path, w)
		}
	}
}
