package agents_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
)

// policyOf returns the runtime policy of the agent named name, after checking that the
// service's tool list shows the same policies.
func policyOf(t *testing.T, reg *agents.Registry, name string) runtime.Policy {
	t.Helper()
	e, err := reg.Agent(name)
	if err != nil {
		t.Fatal(err)
	}
	p := e.Runtime.Policy()
	for _, ti := range e.Tools {
		if want := p.For(ti.Spec.Name); ti.Policy != want {
			t.Errorf("%s: %s: ToolInfo.Policy %+v, the runtime's %+v", name, ti.Spec.Name, ti.Policy, want)
		}
	}
	return p
}

func TestPolicyMaxGrant(t *testing.T) {
	path := writeAgentsFile(t, `agents:
  - name: plain
    model: demo
  - name: once
    model: demo
    policy:
      max_grant: once
  - name: run
    model: demo
    policy:
      approval: ask
      max_grant: run
      tools:
        calculate: {grant_any_arguments: true}
        save_note: {idempotent: false}
  - name: thread
    model: demo
    policy:
      approval: always
      max_grant: thread
      tools:
        current_time: {approval: auto, max_grant: once}
        calculate: {max_grant: run, grant_any_arguments: false}
        save_note:
          disabled: true
          max_grant: thread
          grant_any_arguments: true
  - name: tools-only
    model: demo
    policy:
      tools:
        current_time: {max_grant: thread}
        calculate: {max_grant: once, grant_any_arguments: true}
        save_note: {max_grant: run}
`, nil)
	reg := loadRegistry(t, path, nil)

	ask, always := runtime.ApprovalAsk, runtime.ApprovalAlways
	tools := func(currentTime, calculate, saveNote runtime.ToolPolicy) map[string]runtime.ToolPolicy {
		return map[string]runtime.ToolPolicy{"current_time": currentTime, "calculate": calculate, "save_note": saveNote}
	}
	want := map[string]runtime.Policy{
		// No max_grant anywhere: the policy is what it was before grants, save_note asking
		// by itself.
		"plain": {Tools: tools(runtime.ToolPolicy{}, runtime.ToolPolicy{}, runtime.ToolPolicy{Approval: ask})},
		// policy.max_grant reaches every tool, and the default (client tools).
		"once": {
			Default: runtime.ToolPolicy{MaxGrant: runtime.GrantOnce},
			Tools: tools(
				runtime.ToolPolicy{MaxGrant: runtime.GrantOnce},
				runtime.ToolPolicy{MaxGrant: runtime.GrantOnce},
				runtime.ToolPolicy{Approval: ask, MaxGrant: runtime.GrantOnce}),
		},
		// Entries that leave out max_grant and approval keep the policy's.
		"run": {
			Default: runtime.ToolPolicy{Approval: ask, MaxGrant: runtime.GrantRun},
			Tools: tools(
				runtime.ToolPolicy{Approval: ask, MaxGrant: runtime.GrantRun},
				runtime.ToolPolicy{Approval: ask, MaxGrant: runtime.GrantRun, GrantAnyArguments: true},
				runtime.ToolPolicy{Approval: ask, MaxGrant: runtime.GrantRun}),
		},
		// An entry's max_grant replaces the policy's, on an auto tool too.
		"thread": {
			Default: runtime.ToolPolicy{Approval: always, MaxGrant: runtime.GrantThread},
			Tools: tools(
				runtime.ToolPolicy{MaxGrant: runtime.GrantOnce},
				runtime.ToolPolicy{Approval: always, MaxGrant: runtime.GrantRun},
				runtime.ToolPolicy{Disabled: true, Approval: always, MaxGrant: runtime.GrantThread, GrantAnyArguments: true}),
		},
		// Entries that name only grants leave the approvals alone.
		"tools-only": {Tools: tools(
			runtime.ToolPolicy{MaxGrant: runtime.GrantThread},
			runtime.ToolPolicy{MaxGrant: runtime.GrantOnce, GrantAnyArguments: true},
			runtime.ToolPolicy{Approval: ask, MaxGrant: runtime.GrantRun})},
	}
	for name, want := range want {
		if diff := cmp.Diff(want, policyOf(t, reg, name)); diff != "" {
			t.Errorf("agent %s: policy (-want +got):\n%s", name, diff)
		}
	}

	// Grants change nothing else of the agents.
	plain, err := reg.Agent("plain")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"once", "run", "thread", "tools-only"} {
		e, err := reg.Agent(name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(plain.Runtime.Tools(), e.Runtime.Tools()); diff != "" {
			t.Errorf("agent %s: tool specs differ from plain's (-plain +got):\n%s", name, diff)
		}
	}
	if ti := toolInfo(t, reg, "run", "save_note"); ti.Spec.Idempotent {
		t.Errorf("run's save_note: idempotent, want false as declared")
	}
}

func toolInfo(t *testing.T, reg *agents.Registry, agent, tool string) runs.ToolInfo {
	t.Helper()
	e, err := reg.Agent(agent)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range e.Tools {
		if ti.Spec.Name == tool {
			return ti
		}
	}
	t.Fatalf("agent %s has no tool %s", agent, tool)
	return runs.ToolInfo{}
}

// TestMCPToolMaxGrant checks that MCP tools take the policy's max_grant, whatever
// approval their annotations imply, and their entries' grant fields.
func TestMCPToolMaxGrant(t *testing.T) {
	web := newWebServer(t)
	path := writeAgentsFile(t, `
mcp_servers:
  - name: web
    url: WEB_URL
agents:
  - name: ops
    model: demo
    tools: [calculate]
    mcp_servers: [web]
    policy:
      max_grant: run
      tools:
        lookup: {grant_any_arguments: true}
        delete_file: {max_grant: once}
  - name: plain
    model: demo
    tools: [calculate]
    mcp_servers: [web]
    policy:
      max_grant: once
`, map[string]string{"WEB_URL": web.url})
	reg := loadRegistry(t, path, nil)

	// lookup is read-only, so auto; delete_file has no annotations, so it asks.
	want := map[string]runtime.Policy{
		"ops": {
			Default: runtime.ToolPolicy{MaxGrant: runtime.GrantRun},
			Tools: map[string]runtime.ToolPolicy{
				"calculate":   {MaxGrant: runtime.GrantRun},
				"lookup":      {MaxGrant: runtime.GrantRun, GrantAnyArguments: true},
				"delete_file": {Approval: runtime.ApprovalAsk, MaxGrant: runtime.GrantOnce},
			},
		},
		"plain": {
			Default: runtime.ToolPolicy{MaxGrant: runtime.GrantOnce},
			Tools: map[string]runtime.ToolPolicy{
				"calculate":   {MaxGrant: runtime.GrantOnce},
				"lookup":      {MaxGrant: runtime.GrantOnce},
				"delete_file": {Approval: runtime.ApprovalAsk, MaxGrant: runtime.GrantOnce},
			},
		},
	}
	for name, want := range want {
		if diff := cmp.Diff(want, policyOf(t, reg, name)); diff != "" {
			t.Errorf("agent %s: policy (-want +got):\n%s", name, diff)
		}
	}
}

func TestPolicyMaxGrantErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // the error's lines, after the file name
	}{
		{"policy", `agents:
  - name: ops
    model: demo
    policy:
      max_grant: forever
`, []string{`:5: agent "ops": policy.max_grant: invalid max_grant "forever": want once, run or thread`}},
		// An approval's value is no scope.
		{"tool", `agents:
  - name: ops
    model: demo
    policy:
      tools:
        calculate:
          approval: ask
          max_grant: always
`, []string{`:8: agent "ops": policy.tools.calculate.max_grant: invalid max_grant "always": want once, run or thread`}},
		// Scopes are lowercase, like approvals; both errors are reported, in order.
		{"both", `agents:
  - name: ops
    model: demo
    policy:
      max_grant: ONCE
      tools:
        calculate: {max_grant: Run}
        save_note: {max_grant: thread}
`, []string{
			`:5: agent "ops": policy.max_grant: invalid max_grant "ONCE": want once, run or thread`,
			`:7: agent "ops": policy.tools.calculate.max_grant: invalid max_grant "Run": want once, run or thread`,
		}},
		{"not a string", `agents:
  - name: ops
    model: demo
    policy:
      max_grant: [once]
`, []string{":5: agent \"ops\": policy.max_grant: cannot unmarshal !!seq into string"}},
		{"grant_any_arguments not a bool", `agents:
  - name: ops
    model: demo
    policy:
      tools:
        calculate:
          grant_any_arguments: always
`, []string{":7: agent \"ops\": policy.tools.calculate.grant_any_arguments: cannot unmarshal !!str `always` into bool; want true or false"}},
		{"misspelt", `agents:
  - name: ops
    model: demo
    policy:
      max_grants: run
`, []string{`:5: agent "ops": policy: unknown field "max_grants"; known fields: approval, max_grant, tools`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeAgentsFile(t, tt.file, nil)
			_, err := registryFromFile(path)
			if err == nil {
				t.Fatal("no error")
			}
			checkErrorLines(t, err, path, tt.want)
		})
	}

	// A config made in Go is checked as much as a file.
	cfg := agents.Config{Agents: []agents.AgentConfig{{Name: "ops", Model: "demo", Policy: agents.PolicyConfig{
		MaxGrant: "run",
		Tools:    map[string]agents.ToolPolicyConfig{"calculate": {MaxGrant: "twice"}},
	}}}}
	_, err := agents.NewRegistry(&cfg, agents.RegistryOptions{})
	want := `agents config: agent "ops": policy.tools.calculate.max_grant: invalid max_grant "twice": want once, run or thread`
	if err == nil || err.Error() != want {
		t.Errorf("NewRegistry: error\n got %v\nwant %s", err, want)
	}
}

// TestLoadFileExampleGrants checks the grants deploy/agents.example.yaml shows.
func TestLoadFileExampleGrants(t *testing.T) {
	reg := loadRegistry(t, filepath.Join("..", "..", "deploy", "agents.example.yaml"), nil)
	assistant := policyOf(t, reg, "assistant")
	if assistant.Default.MaxGrant != runtime.GrantRun {
		t.Errorf("assistant: default max_grant %v, want run (%v)", assistant.Default.MaxGrant, runtime.GrantRun)
	}
	if sn := assistant.For("save_note"); sn.MaxGrant != runtime.GrantRun || sn.Approval != runtime.ApprovalAlways {
		t.Errorf("assistant's save_note: %+v, want approval always and the policy's max_grant, run", sn)
	}
	want := runtime.ToolPolicy{Approval: runtime.ApprovalAsk, GrantAnyArguments: true}
	if got := policyOf(t, reg, "cautious").For("calculate"); got != want {
		t.Errorf("cautious's calculate: %+v, want %+v", got, want)
	}
}
