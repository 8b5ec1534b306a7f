package agents_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// idempotency returns whether each of e's tools is idempotent, by name, as the runtime
// has them, after checking that the service's tool list agrees.
func idempotency(t *testing.T, e *runs.Agent) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, spec := range e.Runtime.Tools() {
		got[spec.Name] = spec.Idempotent
	}
	for _, ti := range e.Tools {
		if ti.Spec.Idempotent != got[ti.Spec.Name] {
			t.Errorf("%s: ToolInfo.Spec.Idempotent %v, the runtime's %v", ti.Spec.Name, ti.Spec.Idempotent, got[ti.Spec.Name])
		}
	}
	return got
}

func TestPolicyToolIdempotent(t *testing.T) {
	path := writeAgentsFile(t, `agents:
  - name: ops
    model: script:ops
    tools: [current_time, calculate, save_note]
    policy:
      tools:
        calculate: {idempotent: false}
        save_note: {approval: auto, idempotent: true}
        current_time: {idempotent: ~}
  - name: plain
    model: script:plain
    tools: [current_time, calculate, save_note]
`, nil)
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Approval   string
		Idempotent *bool
	}
	entries := map[string]entry{}
	for name, pc := range cfg.Agents[0].Policy.Tools {
		entries[name] = entry{pc.Approval, pc.Idempotent}
	}
	yes, no := true, false
	if diff := cmp.Diff(map[string]entry{
		"calculate":    {Idempotent: &no},
		"save_note":    {Approval: "auto", Idempotent: &yes},
		"current_time": {}, // null: the tool's own
	}, entries); diff != "" {
		t.Errorf("policy.tools (-want +got):\n%s", diff)
	}

	model := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "calculate", `{"expression":"6*7"}`, "save_note", `{"title":"t","text":"x"}`),
		rt.Say("done"),
	}}
	reg := loadRegistry(t, path, map[string]*rt.Model{"ops": model, "plain": {}})
	ops, err := reg.Agent("ops")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := reg.Agent("plain")
	if err != nil {
		t.Fatal(err)
	}
	// The tools' own declarations, which plain keeps.
	if diff := cmp.Diff(map[string]bool{"current_time": true, "calculate": true, "save_note": false}, idempotency(t, plain)); diff != "" {
		t.Errorf("plain's tools, idempotent (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"current_time": true, "calculate": false, "save_note": true}, idempotency(t, ops)); diff != "" {
		t.Errorf("ops's tools, idempotent (-want +got):\n%s", diff)
	}
	// Nothing else of the specs changed.
	for i, spec := range ops.Runtime.Tools() {
		want := plain.Runtime.Tools()[i]
		want.Idempotent = spec.Idempotent
		if diff := cmp.Diff(want, spec); diff != "" {
			t.Errorf("%s's spec (-want +got):\n%s", spec.Name, diff)
		}
	}

	// The calls still go to the tools.
	fin := runAgent(t, ops, &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("go")}})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run finished %s (%v)", fin.Reason, fin.Err)
	}
	var outs []string
	for _, m := range fin.NewMessages {
		for _, p := range m.Parts {
			if p.Kind == runtime.PartToolResult {
				o := p.ToolResult.Output
				outs = append(outs, strings.Join([]string{p.ToolResult.Name, o.Text, string(o.JSON)}, " "))
				if o.IsError {
					t.Errorf("%s: error result %s", p.ToolResult.Name, o.Text)
				}
			}
		}
	}
	if len(outs) != 2 || !strings.Contains(outs[0], "42") || !strings.Contains(outs[1], "note_1") {
		t.Errorf("tool results %q, want calculate's 42 and save_note's note_1", outs)
	}
}

func TestPolicyToolIdempotentErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // the error's lines, after the file name
	}{
		// yaml's errors give the line alone, so a flow mapping's error names its key.
		{"quoted", `agents:
  - name: ops
    model: demo
    policy:
      tools:
        calculate: {idempotent: "false"}
`, []string{":6: agent \"ops\": policy.tools.calculate: cannot unmarshal !!str `false` into bool; want true or false"}},
		{"a list", `agents:
  - name: ops
    model: demo
    policy:
      tools:
        calculate:
          idempotent: [true]
`, []string{`:7: agent "ops": policy.tools.calculate.idempotent: cannot unmarshal !!seq into bool; want true or false`}},
		// An entry that sets idempotent alone names a tool as much as any other.
		{"not the agent's tool", `agents:
  - name: ops
    model: demo
    tools: [calculate]
    policy:
      tools:
        calculate: {idempotent: false}
        save_note: {idempotent: true}
`, []string{`:8: agent "ops": policy.tools.save_note: tool "save_note" is not one of the agent's tools (calculate)`}},
		{"unknown tool", `agents:
  - name: ops
    model: demo
    policy:
      tools:
        send_mail: {idempotent: true}
`, []string{`:6: agent "ops": policy.tools.send_mail: unknown tool "send_mail"; known tools: `}},
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
}

// TestMCPToolIdempotent declares idempotency both ways for MCP tools, against their
// annotations, and checks that the declarations hold after the agent is rebuilt for a
// change of the server's tools.
func TestMCPToolIdempotent(t *testing.T) {
	web := newWebServer(t)
	path := writeAgentsFile(t, `
mcp_servers:
  - name: web
    url: WEB_URL
agents:
  - name: ops
    model: script:ops
    tools: [calculate]
    mcp_servers: [web]
    policy:
      tools:
        delete_file: {approval: auto, idempotent: true}
        lookup: {idempotent: false}
  - name: plain
    model: script:plain
    tools: [calculate]
    mcp_servers: [web]
`, map[string]string{"WEB_URL": web.url})
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "delete_file", `{"path":"/tmp/a"}`), rt.Say("deleted")}}
	reg := loadRegistry(t, path, map[string]*rt.Model{"ops": model, "plain": {}})

	// lookup is read-only, so idempotent by its annotations; delete_file has none.
	wantPlain := map[string]bool{"calculate": true, "lookup": true, "delete_file": false}
	wantOps := map[string]bool{"calculate": true, "lookup": false, "delete_file": true}
	check := func(when string) {
		t.Helper()
		for name, want := range map[string]map[string]bool{"plain": wantPlain, "ops": wantOps} {
			e, err := reg.Agent(name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, idempotency(t, e)); diff != "" {
				t.Errorf("%s: %s's tools, idempotent (-want +got):\n%s", when, name, diff)
			}
			for _, ti := range e.Tools {
				if ti.Spec.Name != "calculate" && ti.Source != "mcp:web" {
					t.Errorf("%s: %s's %s: source %q, want mcp:web", when, name, ti.Spec.Name, ti.Source)
				}
			}
		}
	}
	check("at startup")

	// A new tool the server annotates idempotent, not read-only, rebuilds both agents.
	web.srv.AddTool(&sdk.Tool{Name: "put", InputSchema: map[string]any{"type": "object"}, Annotations: &sdk.ToolAnnotations{IdempotentHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult("put"), nil
		})
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range []string{"ops", "plain"} {
		for e, _ := reg.Agent(name); !hasTool(e, "put"); e, _ = reg.Agent(name) {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s was not rebuilt with the new tool", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wantPlain["put"], wantOps["put"] = true, true
	check("after the rebuild")

	// A call of a tool declared so in the file goes to the server.
	c := servicetest.NewClient(t, service.Config{Agents: reg, Logger: quietLog})
	s := servicetest.Open(t, c, servicetest.Input("ops", "delete"))
	if fin, err := s.Finish(); err != nil || fin.GetFinalText() != "deleted" {
		t.Fatalf("run finished %v, %v", fin, err)
	}
	if rs := toolResults(s.Events()); len(rs) != 1 || rs[0].GetText() != "deleted /tmp/a" {
		t.Errorf("results %v, want delete_file's", rs)
	}
	if deletes, _ := web.received(); !slices.Equal(deletes, []string{`{"path":"/tmp/a"}`}) {
		t.Errorf("the MCP server got %q", deletes)
	}
}
