package service_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
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
			r, err := runtime.New(runtime.Config{
				Name: a.name, Model: a.model, Tools: a.goTools, MaxSteps: a.steps, Logger: cfg.Logger,
			})
			if err != nil {
				t.Fatal(err)
			}
			goAgents = append(goAgents, &service.Agent{Name: a.name, Runtime: r})
			continue
		}
		models[a.name] = a.model
		tools := a.tools
		if tools == nil {
			tools = []string{}
		}
		acfg.Agents = append(acfg.Agents, agents.AgentConfig{Name: a.name, Model: "script:" + a.name, Tools: tools, Policy: a.policy, MaxSteps: a.steps})
	}
	reg, err := agents.NewRegistry(acfg, agents.RegistryOptions{Resolve: scriptResolver(models), Logger: cfg.Logger})
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

// scriptResolver resolves "script:<name>" to models[name], and every built-in spec.
func scriptResolver(models map[string]*rt.Model) agents.ModelResolver {
	return agents.NewModelResolver(append(agents.BuiltinModelProviders(0), agents.ModelProvider{
		Name: "script", Forms: []string{"script:<name>"},
		New: func(name string) (runtime.Model, error) {
			m, ok := models[name]
			if !ok {
				return nil, agents.ErrUnknownModel
			}
			return m, nil
		},
	})...)
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
	reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Resolve: scriptResolver(models), Logger: quietLog})
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

// buildTestServer builds the stdio MCP server of package mcp's tests.
func buildTestServer(t *testing.T) string {
	t.Helper()
	return agentdtest.Build(t, "github.com/agentd/agentd/runtime/tool/mcp/internal/testserver")
}

// stream is a client's side of a Run stream.
type stream struct {
	t      *testing.T
	s      agentdv1.AgentService_RunClient
	seq    int64
	events []*agentdv1.RunEvent
	err    error // the status the stream ended with, once it has
	done   bool
}

// open starts a run on a Run stream.
func open(t *testing.T, c agentdv1.AgentServiceClient, spec *agentdv1.RunSpec) *stream {
	t.Helper()
	s, err := c.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st := &stream{t: t, s: s}
	st.send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
	return st
}

// send sends a client message with the next client_seq, and returns that seq.
func (st *stream) send(req *agentdv1.RunRequest) int64 {
	st.t.Helper()
	st.seq++
	req.ClientSeq = st.seq
	if err := st.s.Send(req); err != nil && !errors.Is(err, io.EOF) {
		st.t.Fatalf("Send: %v", err)
	}
	return st.seq
}

// next returns the next event, or nil when the stream has ended.
func (st *stream) next() *agentdv1.RunEvent {
	st.t.Helper()
	if st.done {
		return nil
	}
	resp, err := st.s.Recv()
	if err != nil {
		st.done = true
		if !errors.Is(err, io.EOF) {
			st.err = err
		}
		return nil
	}
	st.events = append(st.events, resp.GetEvent())
	return resp.GetEvent()
}

// until reads events until one matches, and returns it.
func (st *stream) until(match func(*agentdv1.RunEvent) bool) *agentdv1.RunEvent {
	st.t.Helper()
	for {
		ev := st.next()
		if ev == nil {
			st.t.Fatalf("the stream ended (%v) before the event awaited; events:\n%s", st.err, render(st.events))
		}
		if match(ev) {
			return ev
		}
	}
}

// finish reads to the end and returns run_finished and the stream's status.
func (st *stream) finish() (*agentdv1.RunFinished, error) {
	st.t.Helper()
	for st.next() != nil {
	}
	checkEvents(st.t, st.events)
	return st.events[len(st.events)-1].GetRunFinished(), st.err
}

func render(evs []*agentdv1.RunEvent) string {
	var s string
	for _, ev := range evs {
		s += ev.String() + "\n"
	}
	return s
}

// checkEvents checks the ordering rules of the contract: seq from 1 without gaps
// (heartbeats take none), run_started first, run_finished last, one of each.
func checkEvents(t *testing.T, evs []*agentdv1.RunEvent) {
	t.Helper()
	var numbered []*agentdv1.RunEvent
	for _, ev := range evs {
		if ev.GetHeartbeat() != nil {
			if ev.GetSeq() != 0 {
				t.Errorf("heartbeat with seq %d", ev.GetSeq())
			}
			continue
		}
		numbered = append(numbered, ev)
	}
	for i, ev := range numbered {
		if ev.GetSeq() != int64(i+1) {
			t.Fatalf("event %d has seq %d; events:\n%s", i, ev.GetSeq(), render(evs))
		}
		if ev.GetRunId() == "" || ev.GetTime() == nil {
			t.Errorf("event %d lacks run_id or time", i)
		}
	}
	if len(numbered) == 0 || numbered[0].GetRunStarted() == nil {
		t.Fatalf("first event is not run_started:\n%s", render(evs))
	}
	if numbered[len(numbered)-1].GetRunFinished() == nil {
		t.Fatalf("last event is not run_finished:\n%s", render(evs))
	}
	starts, ends := 0, 0
	for _, ev := range numbered {
		if ev.GetRunStarted() != nil {
			starts++
		}
		if ev.GetRunFinished() != nil {
			ends++
		}
	}
	if starts != 1 || ends != 1 {
		t.Errorf("%d run_started and %d run_finished, want one each", starts, ends)
	}
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

func input(agent, text string) *agentdv1.RunSpec {
	return &agentdv1.RunSpec{Agent: agent, Input: text}
}

// gated is a model step that says text once gate is closed: it keeps a run going
// until the test has seen what it waits for (an ack of a message sent late, say).
func gated(gate <-chan struct{}, text string) rt.Step {
	return rt.Step{Func: func(ctx context.Context, _ *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
		return func(yield func(runtime.ModelEvent, error) bool) {
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

func approve(id string) *agentdv1.RunRequest {
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: id, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}}}
}
