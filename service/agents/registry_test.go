package agents_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
)

func TestRegistryDefaultAgents(t *testing.T) {
	medium := workloadSize(t, "medium")
	demoAgent := agentSummary{
		Name:        "demo",
		Description: agents.Default().Agents[0].Description,
		Model:       demo.ModelName,
		MaxSteps:    25,
		Tools:       builtinToolSummaries(runtime.ApprovalAsk, time.Minute, false),
	}
	onWorkload := demoAgent
	onWorkload.Model, onWorkload.MaxSteps, onWorkload.Tools = "workload:medium", medium.S+1, workloadToolSummaries

	tests := []struct {
		name string
		cfg  *agents.Config
		opts agents.RegistryOptions
		want agentSummary
	}{
		{"Default", agents.Default(), agents.RegistryOptions{}, demoAgent},
		{"nil config", nil, agents.RegistryOptions{}, demoAgent},
		{"override demo", nil, agents.RegistryOptions{ModelOverride: "demo:agentd-demo"}, demoAgent},
		{"override workload", nil, agents.RegistryOptions{ModelOverride: "workload:medium"}, onWorkload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := agents.NewRegistry(tt.cfg, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]agentSummary{tt.want}, registrySummary(r)); diff != "" {
				t.Errorf("agents (-want +got):\n%s", diff)
			}
			if got := defaultOf(t, r); got == nil || got.Name != "demo" {
				t.Errorf("Agent(\"\") = %v, want the demo agent", got)
			}
		})
	}
}

func TestRegistryModelOverrideWithoutModel(t *testing.T) {
	cfg := &agents.Config{Agents: []agents.AgentConfig{{Name: "bench"}}}
	r, err := agents.NewRegistry(cfg, agents.RegistryOptions{ModelOverride: "workload:small"})
	if err != nil {
		t.Fatal(err)
	}
	if m := defaultOf(t, r).Runtime.Model().Name(); m != "workload:small" {
		t.Errorf("model %q, want workload:small", m)
	}
}

// overridable returns cfg (nil: Default) with model overrides allowed to its first agent.
func overridable(cfg *agents.Config) *agents.Config {
	if cfg == nil {
		cfg = agents.Default()
	}
	cfg.Agents[0].AllowModelOverride = true
	return cfg
}

func TestRegistryModelOverrides(t *testing.T) {
	r, err := agents.NewRegistry(overridable(nil), agents.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	models := defaultOf(t, r).Models
	if models == nil {
		t.Fatal("the agent allows model overrides, but its Models is nil")
	}
	tests := []struct {
		spec    string
		want    string // the model's name
		wantErr string // a part of the error; the error must wrap ErrUnknownModel
	}{
		{spec: "demo", want: demo.ModelName},
		{spec: "demo:agentd-demo", want: demo.ModelName},
		{spec: "workload:small", want: "workload:small"},
		{spec: "workload:large", want: "workload:large"},
		{spec: "", wantErr: "unknown model: no model named; supported models: demo, demo:agentd-demo, workload:small"},
		{spec: "workload", wantErr: `model "workload": unknown model: workload: no workload size ""`},
		{spec: "workload:huge", wantErr: `model "workload:huge": unknown model: workload: no workload size "huge"`},
		{spec: "demo:gpt", wantErr: `model "demo:gpt": unknown model: the demo provider has one model, demo:agentd-demo`},
		{spec: "gemini:gemini-2.5-pro", wantErr: `no provider "gemini"; supported models: demo, demo:agentd-demo, workload:small, workload:medium, workload:large, openai:<model>, openai-responses:<model>, anthropic:<model>`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			m, err := models(tt.spec)
			if tt.wantErr != "" {
				if !errors.Is(err, agents.ErrUnknownModel) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Models(%q) error = %v, want ErrUnknownModel with %q", tt.spec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Name() != tt.want {
				t.Errorf("Models(%q) = %s, want %s", tt.spec, m.Name(), tt.want)
			}
		})
	}

	// The agents' own models are reused.
	m, err := models("demo")
	if err != nil {
		t.Fatal(err)
	}
	if m != defaultOf(t, r).Runtime.Model() {
		t.Error("Models(demo) made a new model; want the demo agent's")
	}
}

// An agent that does not allow model overrides says so with a nil Models, which the
// service refuses a client's model with.
func TestRegistryNoModelOverrides(t *testing.T) {
	r, err := agents.NewRegistry(&agents.Config{Agents: []agents.AgentConfig{
		{Name: "fixed", Model: "demo"},
		{Name: "open", Model: "demo", AllowModelOverride: true},
	}}, agents.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"fixed": false, "open": true} {
		a, err := r.Agent(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Models != nil; got != want {
			t.Errorf("agent %s: Models set = %v, want %v", name, got, want)
		}
	}
}

// renamedModel renames a model, standing in for a provider adapter.
type renamedModel struct {
	runtime.Model
	name string
}

func (m renamedModel) Name() string { return m.name }

func TestRegistryCustomResolver(t *testing.T) {
	fake := agents.ModelProvider{
		Name:  "openai",
		Forms: []string{"openai:<model>"},
		New: func(model string) (runtime.Model, error) {
			if model == "" {
				return nil, errors.New("name a model")
			}
			return renamedModel{demo.New(demo.Config{}), "openai:" + model}, nil
		},
	}
	resolve := agents.NewModelResolver(append(agents.BuiltinModelProviders(0), fake)...)
	r, err := agents.NewRegistry(overridable(nil), agents.RegistryOptions{ModelOverride: "openai:gpt-4.1-mini", Resolve: resolve})
	if err != nil {
		t.Fatal(err)
	}
	got := agentSummaryOf(defaultOf(t, r))
	if got.Model != "openai:gpt-4.1-mini" || len(got.Tools) != 3 {
		t.Errorf("default agent on openai:gpt-4.1-mini: %+v, want the model and the three built-in tools", got)
	}

	models := defaultOf(t, r).Models
	_, err = models("anthropic:claude")
	want := `model "anthropic:claude": unknown model: no provider "anthropic"; supported models: demo, demo:agentd-demo, workload:small, workload:medium, workload:large, openai:<model> (anthropic:… arrive with the provider adapters)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
	_, err = models("openai")
	if err == nil || errors.Is(err, agents.ErrUnknownModel) || err.Error() != `model "openai": name a model` {
		t.Errorf("error %v, want the provider's own, not ErrUnknownModel", err)
	}
}

func TestRegistryAgent(t *testing.T) {
	cfg := &agents.Config{
		DefaultAgent: "ops",
		Agents: []agents.AgentConfig{
			{Name: "zeta", Model: "demo"},
			{Name: "ops", Model: "demo"},
			{Name: "bench", Model: "workload:small"},
		},
	}
	r, err := agents.NewRegistry(cfg, agents.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range r.List() {
		names = append(names, e.Name)
	}
	if diff := cmp.Diff([]string{"bench", "ops", "zeta"}, names); diff != "" {
		t.Errorf("Agents() names (-want +got):\n%s", diff)
	}
	r.List()[0] = nil
	if r.List()[0] == nil {
		t.Error("Agents() returned the registry's own slice")
	}

	tests := []struct {
		name, want string
	}{
		{"", "ops"},
		{"ops", "ops"},
		{"bench", "bench"},
		{"zeta", "zeta"},
	}
	for _, tt := range tests {
		e, err := r.Agent(tt.name)
		if err != nil || e.Name != tt.want {
			t.Errorf("Agent(%q) = %v, %v; want %s", tt.name, e, err, tt.want)
		}
	}
	_, err = r.Agent("nope")
	if !errors.Is(err, runs.ErrAgentNotFound) {
		t.Errorf("Agent(nope) error %v, want ErrAgentNotFound", err)
	}
	if want := `agent not found: "nope"; agents: bench, ops, zeta`; err == nil || err.Error() != want {
		t.Errorf("Agent(nope) error %q, want %q", err, want)
	}
}

func TestRegistryRunDemo(t *testing.T) {
	r, err := agents.NewRegistry(nil, agents.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := r.Agent("")
	if err != nil {
		t.Fatal(err)
	}
	fin := runAgent(t, entry, &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("what is 6*7")}})
	if fin.Reason != runtime.EndCompleted || !strings.Contains(fin.FinalText, "42") {
		t.Errorf("run finished %s (%v) with %q, want completed with 42", fin.Reason, fin.Err, fin.FinalText)
	}
}

func TestRegistryRunWorkload(t *testing.T) {
	r, err := agents.NewRegistry(nil, agents.RegistryOptions{ModelOverride: "workload:small"})
	if err != nil {
		t.Fatal(err)
	}
	fin := runAgent(t, defaultOf(t, r), workload.Request())
	if err := workload.Check(workloadSize(t, "small"), fin); err != nil {
		t.Error(err)
	}
}
