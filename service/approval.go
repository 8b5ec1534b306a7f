package service

import (
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// approvalToProto is a tool's approval policy as ListAgents shows it.
func approvalToProto(a runtime.Approval) agentdv1.ToolApproval {
	switch a {
	case runtime.ApprovalAuto:
		return agentdv1.ToolApproval_TOOL_APPROVAL_AUTO
	case runtime.ApprovalAsk:
		return agentdv1.ToolApproval_TOOL_APPROVAL_ASK
	case runtime.ApprovalAlways:
		return agentdv1.ToolApproval_TOOL_APPROVAL_ALWAYS
	}
	// A level tighter than any the wire knows asks, and only an explicit decision can
	// answer it.
	return agentdv1.ToolApproval_TOOL_APPROVAL_ALWAYS
}
