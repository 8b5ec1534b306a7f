package service_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/servicetest"
)

// denyAll is an agent's own hook that denies every tool call.
type denyAll struct{ named }

func (denyAll) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	in.Deny = "no tools today"
	return nil
}

// RegistryOptions.PostHooks run last, after the interceptors' hooks and the agent's own,
// so a server-wide audit there records the decision of a hook of the agent.
func TestHooks_PostHooksRunAfterTheAgentsOwnAndSeeTheirDecisions(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	hook := func(name string) named { return named{name: name, mu: &mu, seen: &seen} }
	var logs syncBuffer
	reg, err := agents.NewRegistry(nil, agents.RegistryOptions{
		Hooks:     denyAll{hook("agent")},
		PostHooks: runtime.Chain(nil, hook("post"), audit.New(slog.New(slog.NewJSONHandler(&logs, nil)))),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := servicetest.NewServer(t, service.Config{Agents: reg, ContinuationKey: testKey, Logger: slog.New(slog.DiscardHandler)},
		servicetest.WithServerOptions(grpc.ChainUnaryInterceptor(hooks.UnaryServerInterceptor(hook("interceptor")))))
	if _, err := srv.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: input("", "what is 2+2?")}); err != nil {
		t.Fatal(err)
	}

	if want := []string{"interceptor", "agent", "post"}; !slices.Equal(seen, want) {
		t.Errorf("hooks ran in the order %v, want %v", seen, want)
	}
	var decisions []map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit log line is not JSON: %v: %s", err, line)
		}
		if rec["msg"] == "tool call decision" {
			decisions = append(decisions, rec)
		}
	}
	if len(decisions) != 1 || decisions[0]["tool"] != "calculate" || decisions[0]["decision"] != "denied" ||
		decisions[0]["decided_by"] != "hook" || decisions[0]["reason"] != "no tools today" {
		t.Errorf("tool call decision records %v, want one: calculate denied by hook, no tools today\nlog:\n%s", decisions, logs.String())
	}
}
