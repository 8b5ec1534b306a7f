package agents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
)

func TestDefaultIsFresh(t *testing.T) {
	a := agents.Default()
	a.Agents[0].Name = "changed"
	if b := agents.Default(); b.Agents[0].Name != "demo" {
		t.Errorf("Default shares state between calls: name %q", b.Agents[0].Name)
	}
}

func TestLoadFileExample(t *testing.T) {
	medium := workloadSize(t, "medium")
	builtinNatural := builtinToolSummaries(runtime.ApprovalAsk, time.Minute, false)
	want := []agentSummary{
		{
			Name:               "assistant",
			Description:        "Tells the time, calculates and keeps notes; every note needs an explicit yes.",
			Model:              demo.ModelName,
			AllowModelOverride: true,
			MaxSteps:           10,
			Tools: append(builtinToolSummaries(runtime.ApprovalAlways, 30*time.Second, true),
				toolSummary{Name: "researcher", Source: "agent:researcher", Timeout: 10 * time.Minute, Parallel: true}),
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
			Description: "Fetches pages from go.dev and sums them up, and keeps notes of what it finds.",
			Model:       demo.ModelName,
			MaxSteps:    25,
			Tools: []toolSummary{
				{Name: "http_fetch", Source: "builtin", Approval: runtime.ApprovalAsk, Timeout: time.Minute},
				{Name: "calculate", Source: "builtin", Timeout: time.Minute},
				{Name: "save_note", Source: "builtin", Approval: runtime.ApprovalAsk, Timeout: time.Minute},
			},
		},
		{
			Name:        "triage",
			Description: "Sorts a report into a one-line summary and a severity; answers with JSON.",
			Model:       demo.ModelName,
			MaxSteps:    25,
			Tools:       []toolSummary{{Name: "calculate", Source: "builtin", Timeout: time.Minute}},
		},
	}

	cfg, err := agents.LoadFile(filepath.Join("..", "..", "deploy", "agents.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultAgent != "assistant" || len(cfg.Agents) != 7 || cfg.Agents[0].ToolTimeout != agents.Duration(30*time.Second) {
		t.Errorf("LoadFile: default %q, %d agents, first tool_timeout %v; want assistant, 7, 30s", cfg.DefaultAgent, len(cfg.Agents), cfg.Agents[0].ToolTimeout)
	}
	if tr := cfg.Agents[6]; tr.OutputSchema == nil || !tr.AllowRunOutputSchema || len(tr.Hooks.Guardrails) != 3 {
		t.Errorf("triage: output_schema %v, allow_run_output_schema %v, %d guardrails; want a schema, true, 3", tr.OutputSchema, tr.AllowRunOutputSchema, len(tr.Hooks.Guardrails))
	}
	if hf := cfg.Agents[5].HTTPFetch; hf == nil || len(hf.AllowHosts) != 2 || hf.MaxBytes != 262144 || hf.Timeout != agents.Duration(15*time.Second) || cfg.Agents[5].MaxToolOutputBytes != 131072 {
		t.Errorf("researcher: http_fetch %+v, max_tool_output_bytes %d", hf, cfg.Agents[5].MaxToolOutputBytes)
	}
	r, err := agents.NewRegistry(cfg, agents.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, registrySummary(r)); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	if d := defaultOf(t, r); d.Name != "assistant" {
		t.Errorf("Agent(\"\") = %q, want assistant", d.Name)
	}

	// --model with a file switches the default agent's model; its listed tools stay.
	r, err = agents.NewRegistry(cfg, agents.RegistryOptions{ModelOverride: "workload:small"})
	if err != nil {
		t.Fatal(err)
	}
	got := agentSummaryOf(defaultOf(t, r))
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

func TestLoadFileTools(t *testing.T) {
	r, err := registryFromFile(filepath.Join("testdata", "no_tools.yaml"))
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

func registryFromFile(path string) (*agents.Registry, error) {
	cfg, err := agents.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return agents.NewRegistry(cfg, agents.RegistryOptions{})
}

func TestLoadFileErrors(t *testing.T) {
	supported := "supported models: demo, demo:agentd-demo, workload:small, workload:medium, workload:large, openai:<model>, openai-responses:<model>, anthropic:<model>"
	tests := []struct {
		file string
		want []string // the error's lines, after the file name
	}{
		{"unknown_field.yaml", []string{`:5: agent "ops": unknown field "sytem"; known fields: name, description, model, system, tools, policy, max_steps, parallel_tools, tool_timeout, allow_model_override`}},
		{"unknown_nested_field.yaml", []string{`:7: agent "ops": policy.tools.save_note: unknown field "aproval"; known fields: disabled, approval, max_grant, grant_any_arguments, idempotent`}},
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
		{"bad_output_schema.yaml", []string{
			`:5: agent "ops": output_schema: the root must be an object schema ("type": "object"); put a value of another kind in a property`,
			`:7: agent "ops": output_corrections: must be -1 (none), 0 (the default, 2) or positive, got -3`,
			`:8: agent "ops": output_mode: invalid output mode "json": want auto, tool or native`,
		}},
		{"bad_subagents.yaml", []string{
			`:7: agent "lead": subagents[1]: no agent named "ghost" in the file; agents: lead, writer, critic`,
			`:8: agent "lead": subagents[2]: the tool name "calculate" is the tool calculate's too: name one with as`,
			`:14: agent "critic": subagents[0]: as: invalid tool name "bad name": want 1 to 64 letters, digits, '_' or '-'`,
			`:14: agent "critic": subagents[0]: a cycle of sub-agents: lead → writer → critic → lead; an agent may not call itself, directly or through others`,
		}},
		{"bad_guardrails.yaml", []string{
			`:7: agent "ops": hooks.guardrails[0].deny_list: guardrail words: patterns[0]: error parsing regexp: missing closing ): ` + "`(unclosed`",
			`:8: agent "ops": hooks.guardrails[1].name: required`,
			`:9: agent "ops": hooks.guardrails[2]: deny_list, max_size, tool_output_schema and remote exclude each other; one guardrail checks one way`,
			`:12: agent "ops": hooks.guardrails[3].stages: required with remote: input, output, tool_input, tool_output`,
			`:16: agent "ops": hooks.guardrails[4].stages[0]: unknown guardrail stage "model": want input, output, tool_input, tool_output`,
			`:17: agent "ops": hooks.guardrails[4].mode: unknown mode "eventually": want blocking or parallel`,
			`:18: agent "ops": hooks.guardrails[4].on_tool_trip: unknown action "ignore": want end or correct`,
		}},
		{"wrong_type.yaml", []string{":4: agent \"ops\": max_steps: cannot unmarshal !!str `many` into int"}},
		{"bad_idempotent.yaml", []string{":8: agent \"ops\": policy.tools.save_note.idempotent: cannot unmarshal !!str `sometimes` into bool; want true or false"}},
		{"default_agent_missing.yaml", []string{`:1: default_agent: no agent named "support"; agents: ops, bench`}},
		{"no_agents.yaml", []string{`:2: agents: no agents; declare at least one`}},
		{"empty.yaml", []string{`: want a mapping with an agents list (and optionally default_agent)`}},
		{"two_documents.yaml", []string{`: more than one YAML document; want one`}},
		{"syntax_error.yaml", []string{`:4:4: YAML syntax error: did not find expected '-' indicator; check the indentation of line 4 against the lines above it`}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".yaml"), func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			_, err := registryFromFile(path)
			if err == nil {
				t.Fatal("no error")
			}
			checkErrorLines(t, err, path, tt.want)
		})
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, err := agents.LoadFile(filepath.Join("testdata", "nothing-here.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nothing-here.yaml") {
		t.Errorf("error %v, want one naming the file", err)
	}
}

func TestNewRegistryConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  agents.Config
		opts agents.RegistryOptions
		want string
	}{
		{
			"unknown tool",
			agents.Config{Agents: []agents.AgentConfig{{Name: "ops", Model: "demo", Tools: []string{"calculate", "rm_rf"}}}},
			agents.RegistryOptions{},
			`agents config: agent "ops": tools[1]: unknown tool "rm_rf"; known tools: current_time, calculate, save_note, http_fetch, echo, add`,
		},
		{
			"tool twice",
			agents.Config{Agents: []agents.AgentConfig{{Name: "ops", Model: "demo", Tools: []string{"calculate", "calculate"}}}},
			agents.RegistryOptions{},
			`agents config: agent "ops": tools[1]: tool "calculate" listed twice`,
		},
		{
			"no name",
			agents.Config{Agents: []agents.AgentConfig{{Model: "demo"}}},
			agents.RegistryOptions{},
			`agents config: agents[0]: name: required`,
		},
		{
			"no agents",
			agents.Config{},
			agents.RegistryOptions{},
			`agents config: agents: no agents; declare at least one`,
		},
		{
			"bad override",
			*agents.Default(),
			agents.RegistryOptions{ModelOverride: "gemini:gemini-2.5-pro"},
			`model override "gemini:gemini-2.5-pro" for the default agent "demo": model "gemini:gemini-2.5-pro": unknown model: no provider "gemini"; supported models: `,
		},
		{
			"bad tool policy approval",
			agents.Config{Agents: []agents.AgentConfig{{Name: "ops", Model: "demo", Policy: agents.PolicyConfig{
				Tools: map[string]agents.ToolPolicyConfig{"calculate": {Approval: "never"}},
			}}}},
			agents.RegistryOptions{},
			`agents config: agent "ops": policy.tools.calculate.approval: invalid approval "never": want auto, ask or always`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agents.NewRegistry(&tt.cfg, tt.opts)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error:\n got %v\nwant %s…", err, tt.want)
			}
		})
	}
}

func TestAgentConfigDurationYAML(t *testing.T) {
	b, err := yaml.Marshal(agents.AgentConfig{Name: "x", Model: "demo", ToolTimeout: agents.Duration(90 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "tool_timeout: 1m30s\n") {
		t.Errorf("marshalled:\n%s\nwant tool_timeout: 1m30s", b)
	}
	var back agents.AgentConfig
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.ToolTimeout != agents.Duration(90*time.Second) {
		t.Errorf("round trip: %v, want 1m30s", back.ToolTimeout)
	}
}

// TestLoadFileOutputSchema: an output schema is written as YAML or as a string of JSON,
// and its keys keep the order they are written in (the order a model generates them in).
func TestLoadFileOutputSchema(t *testing.T) {
	const file = `agents:
  - name: yaml
    model: demo
    output_schema:
      type: object
      required: [summary, score]
      properties:
        summary: {type: string, description: "one line"}
        score: {type: integer, minimum: 0, maximum: 10}
        done: {type: boolean}
  - name: json
    model: demo
    output_schema: '{"type": "object", "properties": {"z": {"type": "number"}, "a": {"type": "null"}}}'
    allow_run_output_schema: true
`
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"type":"object","required":["summary","score"],"properties":{"summary":{"type":"string","description":"one line"},"score":{"type":"integer","minimum":0,"maximum":10},"done":{"type":"boolean"}}}`,
		`{"type":"object","properties":{"z":{"type":"number"},"a":{"type":"null"}}}`,
	}
	for i, w := range want {
		if got := string(cfg.Agents[i].OutputSchema.JSON); got != w {
			t.Errorf("agent %s: schema\n%s\nwant\n%s", cfg.Agents[i].Name, got, w)
		}
	}
	r, err := agents.NewRegistry(cfg, agents.RegistryOptions{})
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	defer r.Close()
	for name, want := range map[string]bool{"yaml": false, "json": true} {
		a, err := r.Agent(name)
		if err != nil || a.RunOutputSchema != want {
			t.Errorf("agent %s: RunOutputSchema %v (%v), want %v from allow_run_output_schema", name, a.RunOutputSchema, err, want)
		}
	}
}

// TestLoadFileSubagents: an agent's sub-agents are tools of its own, named by as or by
// the agent, described by their entry or their agent, with a policy like any tool's.
func TestLoadFileSubagents(t *testing.T) {
	const file = `agents:
  - name: lead
    model: demo
    tools: []
    subagents:
      - researcher
      - {agent: coder, as: write_code, description: Writes Go.}
    policy:
      tools:
        write_code: {approval: always}
  - name: researcher
    description: Looks things up.
    model: demo
  - name: coder
    model: demo
`
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := agents.NewRegistry(cfg, agents.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lead, err := r.Agent("lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(lead.Subagents) != 2 || lead.Subagents[1] != (runs.Subagent{Agent: "coder", Tool: "write_code", Description: "Writes Go."}) {
		t.Errorf("Subagents = %+v", lead.Subagents)
	}
	got := map[string]runs.ToolInfo{}
	for _, ti := range lead.Tools {
		got[ti.Spec.Name] = ti
	}
	if ti := got["researcher"]; ti.Source != "agent:researcher" || ti.Policy.Approval != runtime.ApprovalAuto || !strings.Contains(ti.Spec.Description, "Looks things up.") {
		t.Errorf("researcher tool %+v, want source agent:researcher, auto, the agent's description", ti)
	}
	if ti := got["write_code"]; ti.Source != "agent:coder" || ti.Policy.Approval != runtime.ApprovalAlways || ti.Spec.Description != "Writes Go." {
		t.Errorf("write_code tool %+v, want source agent:coder, always, its own description", ti)
	}
}
