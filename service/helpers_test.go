package service_test

import (
	"context"
	"encoding/json"
	"iter"
	"log/slog"
	"slices"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/agents/agentstest"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

var (
	testKey  = []byte("a continuation key for tests, 32+ bytes long")
	quietLog = slog.New(slog.DiscardHandler)
)

// scripted describes an agent on a scripted model. Its tools are the agents file
// catalogue's that tools names, with policy; or, when goTools is set, those Go tools
// alone, the agent then built in Go with runtime.New.
type scripted struct {
	name    string
	model   *rt.Model
	tools   []string
	policy  agents.PolicyConfig
	steps   int
	goTools []runtime.Tool
	// goPolicy is the policy of an agent built in Go (goTools).
	goPolicy runtime.Policy
	// output is the output schema of an agent built in Go (goTools).
	output string
	// runSchema lets a run of an agent built in Go ask for a typed result of its own.
	runSchema bool
	// hooks are the own hooks of an agent built in Go (runtime.Config.Hooks).
	hooks runtime.Hooks
	// subagents are the agents an agent built in Go calls as tools.
	subagents []runs.Subagent
	// parallel is how many calls of a step an agent built in Go runs at once.
	parallel int
}

// newTestServer serves the built-in demo agent (no pacing) and the scripted agents.
func newTestServer(t testing.TB, cfg service.Config, scripts ...scripted) *servicetest.Server {
	t.Helper()
	return newTestServerWith(t, cfg, nil, scripts...)
}

// newTestServerWith is newTestServer with a server-wide hook: h, unless nil, is installed
// by the hook interceptors ([withHooks]), as agentd installs --audit, so every run has it.
func newTestServerWith(t testing.TB, cfg service.Config, h runtime.Hooks, scripts ...scripted) *servicetest.Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	models := map[string]*rt.Model{}
	acfg := agents.Default()
	var goAgents []*service.Agent
	for _, a := range scripts {
		if a.goTools != nil {
			tools := slices.Clone(a.goTools)
			for _, sa := range a.subagents {
				tools = append(tools, runs.SubagentTool(sa))
			}
			r, err := runtime.New(runtime.Config{
				Name: a.name, Model: a.model, Tools: tools, MaxSteps: a.steps, Logger: cfg.Logger, Policy: a.goPolicy,
				OutputSchema: json.RawMessage(a.output), Hooks: a.hooks, ParallelTools: a.parallel,
			})
			if err != nil {
				t.Fatal(err)
			}
			goAgents = append(goAgents, &service.Agent{Name: a.name, Runtime: r, RunOutputSchema: a.runSchema, Subagents: a.subagents})
			continue
		}
		models[a.name] = a.model
		tools := a.tools
		if tools == nil {
			tools = []string{}
		}
		acfg.Agents = append(acfg.Agents, agents.AgentConfig{Name: a.name, Model: "script:" + a.name, Tools: tools, Policy: a.policy, MaxSteps: a.steps})
	}
	reg, err := agents.NewRegistry(acfg, agents.RegistryOptions{Resolve: agentstest.ScriptResolver(models), Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	cfg.Agents = withAgents(t, reg, goAgents...)
	if cfg.ContinuationKey == nil {
		cfg.ContinuationKey = testKey
	}
	if h == nil {
		return servicetest.NewServer(t, cfg)
	}
	return servicetest.NewServer(t, cfg, withHooks(h))
}

// withHooks installs hs as server-wide hooks ([hookInterceptors]).
func withHooks(hs ...runtime.Hooks) servicetest.Option {
	return servicetest.WithServerOptions(hookInterceptors(hs...)...)
}

// hookInterceptors installs hs as server-wide hooks, the way a server does: one hook
// interceptor each, for unary and streaming RPCs alike, the first hook outermost.
func hookInterceptors(hs ...runtime.Hooks) []grpc.ServerOption {
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	for _, h := range hs {
		unary = append(unary, hooks.UnaryServerInterceptor(h))
		stream = append(stream, hooks.StreamServerInterceptor(h))
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}
}

// withAgents returns base's agents and more, base's default the default.
func withAgents(t testing.TB, base service.Agents, more ...*service.Agent) service.Agents {
	t.Helper()
	if len(more) == 0 {
		return base
	}
	def, err := base.Agent("")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range base.List() {
		if a != def {
			more = append(more, a)
		}
	}
	set, err := service.NewAgents(def, more...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// ack returns the input_ack for client_seq among evs, or nil.
func ack(evs []*agentdv1.RunEvent, seq int64) *agentdv1.InputAck {
	for _, ev := range evs {
		if a := ev.GetInputAck(); a != nil && a.GetClientSeq() == seq {
			return a
		}
	}
	return nil
}

// isAck matches the input_ack of client_seq.
func isAck(seq int64) func(*agentdv1.RunEvent) bool {
	return func(ev *agentdv1.RunEvent) bool {
		return ev.GetInputAck().GetClientSeq() == seq && ev.GetInputAck() != nil
	}
}

// errorInfo returns the ErrorInfo reason of a status error.
func errorInfo(err error) (codes.Code, string, *errdetails.BadRequest) {
	st := status.Convert(err)
	var reason string
	var br *errdetails.BadRequest
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.BadRequest:
			br = d
		}
	}
	return st.Code(), reason, br
}

// gated is a model step that says text once gate is closed: it keeps a run going
// until the test has seen what it waits for (an ack of a message sent late, say).
func gated(gate <-chan struct{}, text string) rt.Step {
	return gatedCalled(gate, nil, text)
}

// gatedCalled is gated, closing called (unless nil) once the model is called: what
// the run's steers before that are taken into the call.
func gatedCalled(gate <-chan struct{}, called chan<- struct{}, text string) rt.Step {
	return rt.Step{Func: func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
			if called != nil {
				close(called)
			}
			select {
			case <-gate:
			case <-ctx.Done():
				yield(runtime.ModelEvent{}, ctx.Err())
				return
			}
			for _, ev := range rt.Say(text).Events {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}}
}
