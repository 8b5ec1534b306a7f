package service_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/service"
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

func agentSummaryOf(e *service.AgentEntry) agentSummary {
	s := agentSummary{
		Name:               e.Name,
		Description:        e.Description,
		Model:              e.Model,
		AllowModelOverride: e.AllowModelOverride,
		MaxSteps:           e.Runtime.MaxSteps(),
		DefaultApproval:    e.Runtime.Policy().Default.Approval,
	}
	specs := e.Runtime.Tools()
	if len(specs) != len(e.Tools) {
		panic("AgentEntry.Tools and Runtime.Tools() disagree")
	}
	for i, ti := range e.Tools {
		if ti.Spec.Name != specs[i].Name || ti.Policy != e.Runtime.Policy().For(ti.Spec.Name) {
			panic("AgentEntry.Tools and the runtime disagree on " + ti.Spec.Name)
		}
		s.Tools = append(s.Tools, toolSummary{
			Name: ti.Spec.Name, Source: ti.Source, Disabled: ti.Policy.Disabled,
			Approval: ti.Policy.Approval, Timeout: ti.Timeout, Parallel: ti.Parallel,
		})
	}
	return s
}

func registrySummary(r *service.Registry) []agentSummary {
	var out []agentSummary
	for _, e := range r.Agents() {
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

func TestRegistryDefaultAgents(t *testing.T) {
	medium := workloadSize(t, "medium")
	demoAgent := agentSummary{
		Name:        "demo",
		Description: service.DefaultAgentsConfig().Agents[0].Description,
		Model:       demo.ModelName,
		MaxSteps:    25,
		Tools:       builtinToolSummaries(runtime.ApprovalAsk, time.Minute, false),
	}
	onWorkload := demoAgent
	onWorkload.Model, onWorkload.MaxSteps, onWorkload.Tools = "workload:medium", medium.S+1, workloadToolSummaries

	tests := []struct {
		name string
		cfg  *service.AgentsConfig
		opts service.RegistryOptions
		want agentSummary
	}{
		{"DefaultAgentsConfig", service.DefaultAgentsConfig(), service.RegistryOptions{}, demoAgent},
		{"nil config", nil, service.RegistryOptions{}, demoAgent},
		{"override demo", nil, service.RegistryOptions{ModelOverride: "demo:agentd-demo"}, demoAgent},
		{"override workload", nil, service.RegistryOptions{ModelOverride: "workload:medium"}, onWorkload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := service.NewRegistry(tt.cfg, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]agentSummary{tt.want}, registrySummary(r)); diff != "" {
				t.Errorf("agents (-want +got):\n%s", diff)
			}
			if got := r.Default(); got == nil || got.Name != "demo" {
				t.Errorf("Default() = %v, want the demo agent", got)
			}
		})
	}
}

func TestDefaultAgentsConfigIsFresh(t *testing.T) {
	a := service.DefaultAgentsConfig()
	a.Agents[0].Name = "changed"
	if b := service.DefaultAgentsConfig(); b.Agents[0].Name != "demo" {
		t.Errorf("DefaultAgentsConfig shares state between calls: name %q", b.Agents[0].Name)
	}
}

func TestLoadAgentsFileExample(t *testing.T) {
	medium := workloadSize(t, "medium")
	builtinNatural := builtinToolSummaries(runtime.ApprovalAsk, time.Minute, false)
	want := []agentSummary{
		{
			Name:               "assistant",
			Description:        "Tells the time, calculates and keeps notes; every note needs an explicit yes.",
			Model:              demo.ModelName,
			AllowModelOverride: true,
			MaxSteps:           10,
			Tools:              builtinToolSummaries(runtime.ApprovalAlways, 30*time.Second, true),
		},
		{
			Name:        "bench-medium",
			Description: "Replays the benchmark workload (medium) for load tests.",
			Model:       "workload:medium",
			MaxSteps:    medium.S + 1,
			Tools:       workloadToolSummaries,
		},
		{
			Name:        "calculator",
			Description: "Evaluates arithmetic expressions; nothing else.",
			Model:       demo.ModelName,
			MaxSteps:    25,
			Tools:       []toolSummary{{Name: "calculate", Source: "builtin", Timeout: time.Minute}},
		},
		{
			Name:            "cautious",
			Description:     "The built-in tools, each call approved by a person.",
			Model:           demo.ModelName,
			MaxSteps:        25,
			DefaultApproval: runtime.ApprovalAsk,
			Tools: []toolSummary{
				{Name: "current_time", Source: "builtin", Timeout: time.Minute},
				{Name: "calculate", Source: "builtin", Approval: runtime.ApprovalAsk, Timeout: time.Minute},
				{Name: "save_note", Source: "builtin", Disabled: true, Approval: runtime.ApprovalAsk, Timeout: time.Minute},
			},
		},
		{Name: "notes", Model: demo.ModelName, MaxSteps: 25, Tools: builtinNatural},
		{
			Name:        "researcher",
			Description: "Fetches pages from go.dev and sums them up.",
			Model:       demo.ModelName,
			MaxSteps:    25,
			Tools: []toolSummary{
				{Name: "http_fetch", Source: "builtin", Approval: runtime.ApprovalAsk, Timeout: time.Minute},
				{Name: "calculate", Source: "builtin", Timeout: time.Minute},
			},
		},
	}

	cfg, err := service.LoadAgentsFile(filepath.Join("..", "deploy", "agents.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultAgent != "assistant" || len(cfg.Agents) != 6 || cfg.Agents[0].ToolTimeout != service.Duration(30*time.Second) {
		t.Errorf("LoadAgentsFile: default %q, %d agents, first tool_timeout %v; want assistant, 6, 30s", cfg.DefaultAgent, len(cfg.Agents), cfg.Agents[0].ToolTimeout)
	}
	if hf := cfg.Agents[5].HTTPFetch; hf == nil || len(hf.AllowHosts) != 2 || hf.MaxBytes != 262144 || hf.Timeout != service.Duration(15*time.Second) || cfg.Agents[5].MaxToolOutputBytes != 131072 {
		t.Errorf("researcher: http_fetch %+v, max_tool_output_bytes %d", hf, cfg.Agents[5].MaxToolOutputBytes)
	}
	r, err := service.NewRegistry(cfg, service.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, registrySummary(r)); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	if d := r.Default(); d.Name != "assistant" {
		t.Errorf("Default() = %q, want assistant", d.Name)
	}

	// --model with a file switches the default agent's model; its listed tools stay.
	r, err = service.NewRegistry(cfg, service.RegistryOptions{ModelOverride: "workload:small"})
	if err != nil {
		t.Fatal(err)
	}
	got := agentSummaryOf(r.Default())
	wantDefault := want[0]
	wantDefault.Model = "workload:small"
	wantDefault.MaxSteps = 10
	if diff := cmp.Diff(wantDefault, got); diff != "" {
		t.Errorf("default agent with --model workload:small (-want +got):\n%s", diff)
	}
	if cfg.Agents[0].Model != "demo" {
		t.Errorf("NewRegistry changed the config: model %q", cfg.Agents[0].Model)
	}
}

func TestLoadAgentsFileTools(t *testing.T) {
	r, err := registryFromFile(filepath.Join("testdata", "agents", "no_tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"chat": 0, "natural": 3} {
		e, err := r.Agent(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(e.Runtime.Tools()); got != want {
			t.Errorf("agent %s has %d tools, want %d", name, got, want)
		}
	}
}

func registryFromFile(path string) (*service.Registry, error) {
	cfg, err := service.LoadAgentsFile(path)
	if err != nil {
		return nil, err
	}
	return service.NewRegistry(cfg, service.RegistryOptions{})
}

func TestLoadAgentsFileErrors(t *testing.T) {
	supported := "supported models: demo, demo:agentd-demo, workload:small, workload:medium, workload:large, openai:<model>, anthropic:<model>"
	tests := []struct {
		file string
		want []string // the error's lines, after the file name
	}{
		{"unknown_field.yaml", []string{`:5: agent "ops": unknown field "sytem"; known fields: name, description, model, system, tools, policy, max_steps, parallel_tools, tool_timeout, allow_model_override`}},
		{"unknown_nested_field.yaml", []string{`:7: agent "ops": policy.tools.save_note: unknown field "aproval"; known fields: disabled, approval`}},
		{"unknown_top_field.yaml", []string{`:1: unknown field "default_agnet"; known fields: default_agent, agents`}},
		{"duplicate_name.yaml", []string{`:6: agent "ops": name: duplicate agent name "ops": agents[0] has it too`}},
		{"bad_name.yaml", []string{`:2: agent "Ops Team": name: invalid name "Ops Team": want 1 to 64 lowercase letters, digits, '_' or '-', starting with a letter or digit`}},
		{"unknown_tool.yaml", []string{`:6: agent "ops": tools[1]: unknown tool "web_search"; known tools: current_time, calculate, save_note, http_fetch, echo, add`}},
		{"unknown_policy_tool.yaml", []string{`:6: agent "ops": policy.tools.delete_everything: unknown tool "delete_everything"; known tools: current_time, calculate, save_note, http_fetch, echo, add`}},
		{"policy_tool_not_in_agent.yaml", []string{`:7: agent "ops": policy.tools.save_note: tool "save_note" is not one of the agent's tools (calculate)`}},
		{"bad_approval.yaml", []string{`:5: agent "ops": policy.approval: invalid approval "sometimes": want auto, ask or always`}},
		{"unknown_model.yaml", []string{`:6: agent "writer": model "gemini:gemini-2.5-pro": unknown model: no provider "gemini"; ` + supported}},
		{"bad_workload_size.yaml", []string{`:3: agent "bench": model "workload:huge": unknown model: workload: no workload size "huge"; ` + supported}},
		{"missing_model.yaml", []string{`:2: agent "ops": model: required (for example demo or workload:medium)`}},
		{"bad_duration.yaml", []string{`:4: agent "ops": tool_timeout: invalid duration "thirty seconds": want a duration such as 30s, 2m or 1m30s`}},
		{"duration_without_unit.yaml", []string{`:4: agent "ops": tool_timeout: invalid duration "30": want a duration such as 30s, 2m or 1m30s`}},
		{"negative_limits.yaml", []string{
			`:4: agent "ops": max_steps: must not be negative, got -1`,
			`:5: agent "ops": parallel_tools: must not be negative, got -2`,
			`:6: agent "ops": tool_timeout: must not be negative, got -5s`,
		}},
		{"wrong_type.yaml", []string{":4: agent \"ops\": max_steps: cannot unmarshal !!str `many` into int"}},
		{"default_agent_missing.yaml", []string{`:1: default_agent: no agent named "support"; agents: ops, bench`}},
		{"no_agents.yaml", []string{`:2: agents: no agents; declare at least one`}},
		{"empty.yaml", []string{`: want a mapping with an agents list (and optionally default_agent)`}},
		{"two_documents.yaml", []string{`: more than one YAML document; want one`}},
		{"syntax_error.yaml", []string{`: yaml: line `}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".yaml"), func(t *testing.T) {
			path := filepath.Join("testdata", "agents", tt.file)
			_, err := registryFromFile(path)
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("error has %d lines, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, want := range tt.want {
				if !strings.HasPrefix(lines[i], path+want) {
					t.Errorf("error line %d:\n got %s\nwant %s%s", i, lines[i], path, want)
				}
			}
		})
	}
}

func TestLoadAgentsFileMissing(t *testing.T) {
	_, err := service.LoadAgentsFile(filepath.Join("testdata", "agents", "nothing-here.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nothing-here.yaml") {
		t.Errorf("error %v, want one naming the file", err)
	}
}

func TestNewRegistryConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  service.AgentsConfig
		opts service.RegistryOptions
		want string
	}{
		{
			"unknown tool",
			service.AgentsConfig{Agents: []service.AgentConfig{{Name: "ops", Model: "demo", Tools: []string{"calculate", "rm_rf"}}}},
			service.RegistryOptions{},
			`agents config: agent "ops": tools[1]: unknown tool "rm_rf"; known tools: current_time, calculate, save_note, http_fetch, echo, add`,
		},
		{
			"tool twice",
			service.AgentsConfig{Agents: []service.AgentConfig{{Name: "ops", Model: "demo", Tools: []string{"calculate", "calculate"}}}},
			service.RegistryOptions{},
			`agents config: agent "ops": tools[1]: tool "calculate" listed twice`,
		},
		{
			"no name",
			service.AgentsConfig{Agents: []service.AgentConfig{{Model: "demo"}}},
			service.RegistryOptions{},
			`agents config: agents[0]: name: required`,
		},
		{
			"no agents",
			service.AgentsConfig{},
			service.RegistryOptions{},
			`agents config: agents: no agents; declare at least one`,
		},
		{
			"bad override",
			*service.DefaultAgentsConfig(),
			service.RegistryOptions{ModelOverride: "gemini:gemini-2.5-pro"},
			`model override "gemini:gemini-2.5-pro" for the default agent "demo": model "gemini:gemini-2.5-pro": unknown model: no provider "gemini"; supported models: `,
		},
		{
			"bad tool policy approval",
			service.AgentsConfig{Agents: []service.AgentConfig{{Name: "ops", Model: "demo", Policy: service.PolicyConfig{
				Tools: map[string]service.ToolPolicyConfig{"calculate": {Approval: "never"}},
			}}}},
			service.RegistryOptions{},
			`agents config: agent "ops": policy.tools.calculate.approval: invalid approval "never": want auto, ask or always`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := service.NewRegistry(&tt.cfg, tt.opts)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error:\n got %v\nwant %s…", err, tt.want)
			}
		})
	}
}

func TestRegistryModelOverrideWithoutModel(t *testing.T) {
	cfg := &service.AgentsConfig{Agents: []service.AgentConfig{{Name: "bench"}}}
	r, err := service.NewRegistry(cfg, service.RegistryOptions{ModelOverride: "workload:small"})
	if err != nil {
		t.Fatal(err)
	}
	if m := r.Default().Model; m != "workload:small" {
		t.Errorf("model %q, want workload:small", m)
	}
}

func TestRegistryResolveModel(t *testing.T) {
	r, err := service.NewRegistry(nil, service.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
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
		{spec: "gemini:gemini-2.5-pro", wantErr: `no provider "gemini"; supported models: demo, demo:agentd-demo, workload:small, workload:medium, workload:large, openai:<model>, anthropic:<model>`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			m, err := r.ResolveModel(tt.spec)
			if tt.wantErr != "" {
				if !errors.Is(err, service.ErrUnknownModel) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("ResolveModel(%q) error = %v, want ErrUnknownModel with %q", tt.spec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Name() != tt.want {
				t.Errorf("ResolveModel(%q) = %s, want %s", tt.spec, m.Name(), tt.want)
			}
		})
	}

	// The agents' own models are reused.
	m, err := r.ResolveModel("demo")
	if err != nil {
		t.Fatal(err)
	}
	if m != r.Default().Runtime.Model() {
		t.Error("ResolveModel(demo) made a new model; want the demo agent's")
	}
}

// renamedModel renames a model, standing in for a provider adapter.
type renamedModel struct {
	runtime.Model
	name string
}

func (m renamedModel) Name() string { return m.name }

func TestRegistryCustomResolver(t *testing.T) {
	fake := service.ModelProvider{
		Name:  "openai",
		Forms: []string{"openai:<model>"},
		New: func(model string) (runtime.Model, error) {
			if model == "" {
				return nil, errors.New("name a model")
			}
			return renamedModel{demo.New(demo.Config{}), "openai:" + model}, nil
		},
	}
	resolve := service.NewModelResolver(append(service.BuiltinModelProviders(0), fake)...)
	r, err := service.NewRegistry(nil, service.RegistryOptions{ModelOverride: "openai:gpt-4.1-mini", Resolve: resolve})
	if err != nil {
		t.Fatal(err)
	}
	got := agentSummaryOf(r.Default())
	if got.Model != "openai:gpt-4.1-mini" || len(got.Tools) != 3 {
		t.Errorf("default agent on openai:gpt-4.1-mini: %+v, want the model and the three built-in tools", got)
	}

	_, err = r.ResolveModel("anthropic:claude")
	want := `model "anthropic:claude": unknown model: no provider "anthropic"; supported models: demo, demo:agentd-demo, workload:small, workload:medium, workload:large, openai:<model> (anthropic:… arrive with the provider adapters)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
	_, err = r.ResolveModel("openai")
	if err == nil || errors.Is(err, service.ErrUnknownModel) || err.Error() != `model "openai": name a model` {
		t.Errorf("error %v, want the provider's own, not ErrUnknownModel", err)
	}
}

func TestRegistryAgent(t *testing.T) {
	cfg := &service.AgentsConfig{
		DefaultAgent: "ops",
		Agents: []service.AgentConfig{
			{Name: "zeta", Model: "demo"},
			{Name: "ops", Model: "demo"},
			{Name: "bench", Model: "workload:small"},
		},
	}
	r, err := service.NewRegistry(cfg, service.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range r.Agents() {
		names = append(names, e.Name)
	}
	if diff := cmp.Diff([]string{"bench", "ops", "zeta"}, names); diff != "" {
		t.Errorf("Agents() names (-want +got):\n%s", diff)
	}
	r.Agents()[0] = nil
	if r.Agents()[0] == nil {
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
	if !errors.Is(err, service.ErrAgentNotFound) {
		t.Errorf("Agent(nope) error %v, want ErrAgentNotFound", err)
	}
	if want := `agent not found: "nope"; agents: bench, ops, zeta`; err == nil || err.Error() != want {
		t.Errorf("Agent(nope) error %q, want %q", err, want)
	}
}

// runAgent runs req on e and returns the terminal event.
func runAgent(t *testing.T, e *service.AgentEntry, req *runtime.Request) *runtime.RunFinished {
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

// runCounter counts runs through the agent-level hooks.
type runCounter struct {
	runtime.NoHooks
	n int
}

func (c *runCounter) BeforeRun(context.Context, *runtime.RunInfo) error {
	c.n++
	return nil
}

func TestRegistryRunDemo(t *testing.T) {
	hooks := &runCounter{}
	r, err := service.NewRegistry(nil, service.RegistryOptions{Hooks: hooks})
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
	if hooks.n != 1 {
		t.Errorf("agent hooks saw %d runs, want 1", hooks.n)
	}
}

func TestRegistryRunWorkload(t *testing.T) {
	r, err := service.NewRegistry(nil, service.RegistryOptions{ModelOverride: "workload:small"})
	if err != nil {
		t.Fatal(err)
	}
	fin := runAgent(t, r.Default(), workload.Request())
	if err := workload.Check(workloadSize(t, "small"), fin); err != nil {
		t.Error(err)
	}
}

func TestAgentConfigDurationYAML(t *testing.T) {
	b, err := yaml.Marshal(service.AgentConfig{Name: "x", Model: "demo", ToolTimeout: service.Duration(90 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "tool_timeout: 1m30s\n") {
		t.Errorf("marshalled:\n%s\nwant tool_timeout: 1m30s", b)
	}
	var back service.AgentConfig
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.ToolTimeout != service.Duration(90*time.Second) {
		t.Errorf("round trip: %v, want 1m30s", back.ToolTimeout)
	}
}
