package service_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/tool/builtin"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// named records the order in which hooks see a run start.
type named struct {
	runtime.NoHooks
	name string
	mu   *sync.Mutex
	seen *[]string
}

func (h named) BeforeRun(context.Context, *runtime.RunInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.seen = append(*h.seen, h.name)
	return nil
}

// ownHooksAgent is an agent built in Go, the demo model with the calculate tool, whose
// own hooks (runtime.Config.Hooks) are h: what an agents file's hooks entry builds.
func ownHooksAgent(t *testing.T, h runtime.Hooks) service.Agents {
	t.Helper()
	r, err := runtime.New(runtime.Config{Name: "own", Model: demo.New(demo.Config{}), Tools: []runtime.Tool{builtin.Calculate()}, Hooks: h, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	set, err := service.NewAgents(&service.Agent{Name: "own", Runtime: r})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestHooks_InterceptorsRunFirstInInstallationOrderThenTheAgents(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	hook := func(name string) runtime.Hooks { return named{name: name, mu: &mu, seen: &seen} }
	srv := servicetest.NewServer(t, service.Config{Agents: ownHooksAgent(t, hook("agent")), Logger: quietLog, Config: runs.Config{ContinuationKey: testKey}},
		servicetest.WithServerOptions(
			grpc.ChainStreamInterceptor(hooks.StreamServerInterceptor(hook("first")), hooks.StreamServerInterceptor(hook("second"))),
			grpc.ChainUnaryInterceptor(hooks.UnaryServerInterceptor(hook("first")), hooks.UnaryServerInterceptor(hook("second"))),
		))
	s := servicetest.Open(t, srv.Client, servicetest.Input("", "what is 1+1?"))
	if _, err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("", "what is 1+1?")}); err != nil {
		t.Fatal(err)
	}
	want := []string{"first", "second", "agent", "first", "second", "agent"}
	if !slices.Equal(seen, want) {
		t.Errorf("hooks ran in the order %v, want %v", seen, want)
	}
}

func TestHooks_AgentsFileEnablesBuiltinHooks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`
agents:
  - name: frugal
    model: demo
    hooks:
      budget: {max_tokens: 100}
      loopdetect: {soft_limit: 2, hard_limit: 4}
      errorbreaker: {threshold: 3}
      audit: {}
  - name: plain
    model: demo
`), 0o644)
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	c := servicetest.NewClient(t, service.Config{Agents: reg, Logger: slog.New(slog.DiscardHandler), Config: runs.Config{ContinuationKey: testKey}})
	if _, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("plain", "what is 2+2?")}); err != nil {
		t.Fatalf("the agent without hooks: %v", err)
	}
	// The demo model's first call alone uses more than 100 tokens.
	s := servicetest.Open(t, c, servicetest.Input("frugal", "what is 2+2?"))
	fin, err := s.Finish()
	code, reason, _ := errorInfo(err)
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_STOPPED || code != codes.Aborted || reason != "STOPPED" || !strings.Contains(fin.GetError().GetMessage(), "budget") {
		t.Fatalf("finished %v (%v), status %v; want stopped by the budget", fin.GetReason(), fin.GetError(), err)
	}
	var event *agentdv1.HookEvent
	for _, ev := range s.Events() {
		if he := ev.GetHookEvent(); he != nil {
			event = he
		}
	}
	if event.GetName() != "budget.exceeded" {
		t.Errorf("hook event %v, want budget.exceeded", event)
	}
}

func TestHooks_BadHookConfigNamesTheField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`
agents:
  - name: x
    model: demo
    hooks:
      remote:
        - address: 127.0.0.1:1
          points: [before_lunch]
`), 0o644)
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = agents.NewRegistry(cfg, agents.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "hooks.remote[0].points") {
		t.Errorf("error %v, want one naming hooks.remote[0].points", err)
	}
}
