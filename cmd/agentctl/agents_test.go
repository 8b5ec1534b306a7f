package main

import (
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

func TestFormatAgentApprovals(t *testing.T) {
	tool := func(name string, approval agentdv1.ToolApproval, requires bool) *agentdv1.ToolInfo {
		return &agentdv1.ToolInfo{Spec: &agentdv1.ToolSpec{Name: name}, Enabled: true, Approval: approval, RequiresApproval: requires}
	}
	a := &agentdv1.Agent{Name: "ops", Tools: []*agentdv1.ToolInfo{
		tool("look", agentdv1.ToolApproval_TOOL_APPROVAL_AUTO, false),
		tool("write", agentdv1.ToolApproval_TOOL_APPROVAL_ASK, true),
		tool("delete", agentdv1.ToolApproval_TOOL_APPROVAL_ALWAYS, true),
		tool("legacy", agentdv1.ToolApproval_TOOL_APPROVAL_UNSPECIFIED, true), // a server without the field
	}}
	want := "ops\n  tools: look, write (needs approval), delete (needs explicit approval), legacy (needs approval)\n"
	if got := formatAgent(a); got != want {
		t.Errorf("formatAgent:\n got %q\nwant %q", got, want)
	}
}
