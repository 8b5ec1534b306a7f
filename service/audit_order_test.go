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
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// denyAll is an agent's own hook that denies every tool call.
type denyAll struct{ named }

func (denyAll) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	in.Deny = "no tools today"
	return nil
}

// answerAll is an agent's own hook that answers every tool call in the tool's place.
type answerAll struct{ named }

func (answerAll) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	in.Answer = &runtime.Output{Text: "4"}
	return nil
}

// A server-wide audit, installed by the hook interceptors as agentd's --audit is, runs
// before the agent's own hooks, yet records what they decided: a denial, an answer in the
// tool's place. Over a unary RPC (ExecuteRun) and a stream (Run), each of which its own
// interceptor serves.
func TestHooks_AuditByInterceptorRecordsTheDecisionsOfTheAgentsOwnHooks(t *testing.T) {
	tests := []struct {
		name string
		own  func(named) runtime.Hooks
		want map[string]any // fields of the decision record, beside tool and decided_by
	}{
		{"denied", func(n named) runtime.Hooks { return denyAll{n} }, map[string]any{"decision": "denied", "reason": "no tools today"}},
		{"answered", func(n named) runtime.Hooks { return answerAll{n} }, map[string]any{"decision": "answered", "output": audit.Redacted, "output_bytes": 1.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			hook := func(name string) named { return named{name: name, mu: &mu, seen: &seen} }
			var logs logtest.Buffer
			auditor := audit.New(slog.New(slog.NewJSONHandler(&logs, nil)))
			srv := servicetest.NewServer(t, service.Config{Agents: ownHooksAgent(t, tt.own(hook("agent"))), Logger: quietLog, Config: runs.Config{ContinuationKey: testKey}},
				servicetest.WithServerOptions(
					grpc.ChainUnaryInterceptor(hooks.UnaryServerInterceptor(hook("server")), hooks.UnaryServerInterceptor(auditor)),
					grpc.ChainStreamInterceptor(hooks.StreamServerInterceptor(hook("server")), hooks.StreamServerInterceptor(auditor)),
				))

			if _, err := srv.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("", "what is 2+2?")}); err != nil {
				t.Fatal(err)
			}
			if _, err := servicetest.Open(t, srv.Client, servicetest.Input("", "what is 2+2?")).Finish(); err != nil {
				t.Fatal(err)
			}

			// The server-wide hooks, audit's among them, run first: the agent's hook
			// decides after audit has seen the call.
			mu.Lock()
			if want := []string{"server", "agent", "server", "agent"}; !slices.Equal(seen, want) {
				t.Errorf("hooks ran in the order %v, want %v", seen, want)
			}
			mu.Unlock()
			var decisions, calls []map[string]any
			for line := range strings.Lines(logs.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("audit log line is not JSON: %v: %s", err, line)
				}
				switch rec["msg"] {
				case "tool call decision":
					decisions = append(decisions, rec)
				case "tool call":
					calls = append(calls, rec)
				}
			}
			if len(decisions) != 2 || len(calls) != 2 {
				t.Fatalf("%d tool call decision and %d tool call records, want 2 of each (one a run)\nlog:\n%s", len(decisions), len(calls), logs.String())
			}
			for i, d := range decisions {
				if d["tool"] != "calculate" || d["decided_by"] != "hook" || d["agent"] != "own" {
					t.Errorf("decision record %d: %v, want calculate decided by hook, agent own", i, d)
				}
				for k, v := range tt.want {
					if d[k] != v {
						t.Errorf("decision record %d: %s = %v, want %v", i, k, d[k], v)
					}
				}
				if c := calls[i]; c["tool"] != "calculate" || c["executed"] != false || c["call_id"] != d["call_id"] || c["run_id"] != d["run_id"] {
					t.Errorf("tool call record %d: %v, want calculate not executed, the decision's call", i, c)
				}
			}
			if decisions[0]["run_id"] == decisions[1]["run_id"] {
				t.Errorf("both decision records are of run %v, want one a run", decisions[0]["run_id"])
			}
		})
	}
}
