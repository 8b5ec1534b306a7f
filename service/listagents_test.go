package service_test

import (
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

// TestListAgentsToolApproval checks that ListAgents tells a tool that asks (and that a
// run's AUTO_APPROVE may answer) from one that only an explicit decision approves, which
// requires_approval alone cannot.
func TestListAgentsToolApproval(t *testing.T) {
	agent, err := runtime.New(runtime.Config{
		Name:  "gated",
		Model: &rt.Model{},
		Tools: []runtime.Tool{rt.Tool("look", rt.Echo), rt.Tool("write", rt.Echo), rt.Tool("delete", rt.Echo)},
		Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{
			"write":  {Approval: runtime.ApprovalAsk},
			"delete": {Approval: runtime.ApprovalAlways},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	agents, err := service.NewAgents(&service.Agent{Runtime: agent})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := servicetest.NewServer(t, service.Config{Agents: agents, Logger: slog.New(slog.DiscardHandler)}).Client.ListAgents(t.Context(), &agentdv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type policy struct {
		Approval         agentdv1.ToolApproval
		RequiresApproval bool
	}
	got := map[string]policy{}
	for _, a := range resp.GetAgents() {
		for _, ti := range a.GetTools() {
			got[a.GetName()+"/"+ti.GetSpec().GetName()] = policy{ti.GetApproval(), ti.GetRequiresApproval()}
		}
	}
	want := map[string]policy{
		"gated/look":   {agentdv1.ToolApproval_TOOL_APPROVAL_AUTO, false},
		"gated/write":  {agentdv1.ToolApproval_TOOL_APPROVAL_ASK, true},
		"gated/delete": {agentdv1.ToolApproval_TOOL_APPROVAL_ALWAYS, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool policies in ListAgents (-want +got):\n%s", diff)
	}
}

// ListAgents marks the default agent, the one a start that names none runs, and no
// other, whatever its place in the sorted list.
func TestListAgentsMarksTheDefault(t *testing.T) {
	newAgent := func(name string) *service.Agent {
		r, err := runtime.New(runtime.Config{Name: name, Model: &rt.Model{}})
		if err != nil {
			t.Fatal(err)
		}
		return &service.Agent{Runtime: r}
	}
	agents, err := service.NewAgents(newAgent("zeta"), newAgent("alpha"), newAgent("mid"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := servicetest.NewServer(t, service.Config{Agents: agents, Logger: slog.New(slog.DiscardHandler)}).Client.ListAgents(t.Context(), &agentdv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, a := range resp.GetAgents() {
		if a.GetIsDefault() {
			defaults = append(defaults, a.GetName())
		}
	}
	if len(defaults) != 1 || defaults[0] != "zeta" {
		t.Errorf("agents marked default: %q, want [zeta]", defaults)
	}
}
