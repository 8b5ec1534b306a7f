package agents_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/servicetest"
)

var (
	testKey  = []byte("a continuation key for tests, 32+ bytes long")
	quietLog = slog.New(slog.DiscardHandler)
)

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

func agentSummaryOf(e *service.Agent) agentSummary {
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
func runAgent(t *testing.T, e *service.Agent, req *runtime.Request) *runtime.RunFinished {
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
func defaultOf(t testing.TB, r *agents.Registry) *service.Agent {
	t.Helper()
	a, err := r.Agent("")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func hasTool(a *service.Agent, name string) bool {
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

// serveAgents serves a's agents over bufconn and returns a client.
func serveAgents(t *testing.T, a service.Agents) agentdv1.AgentServiceClient {
	t.Helper()
	return servicetest.NewClient(t, service.Config{Agents: a, Logger: quietLog, ContinuationKey: testKey})
}

// buildTestServer builds the stdio MCP server of package mcp's tests.
func buildTestServer(t *testing.T) string {
	t.Helper()
	return agentdtest.Build(t, "github.com/agentd/agentd/runtime/tool/mcp/internal/testserver")
}

// checkNoLeak registers, first, a check that the test leaves no goroutine behind once
// everything it started is cleaned up.
func checkNoLeak(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
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

// send sends a client message with the next client_seq.
func (st *stream) send(req *agentdv1.RunRequest) {
	st.t.Helper()
	st.seq++
	req.ClientSeq = st.seq
	if err := st.s.Send(req); err != nil && !errors.Is(err, io.EOF) {
		st.t.Fatalf("Send: %v", err)
	}
}

// next returns the next event, or nil when the stream has ended.
func (st *stream) next() *agentdv1.RunEvent {
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
	if len(st.events) == 0 {
		st.t.Fatalf("no events; the stream ended with %v", st.err)
	}
	return st.events[len(st.events)-1].GetRunFinished(), st.err
}

func render(evs []*agentdv1.RunEvent) string {
	var s strings.Builder
	for _, ev := range evs {
		s.WriteString(ev.String() + "\n")
	}
	return s.String()
}

func input(agent, text string) *agentdv1.RunSpec {
	return &agentdv1.RunSpec{Agent: agent, Input: text}
}

func approve(id string) *agentdv1.RunRequest {
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: id, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}}}
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
