package service

import (
	"encoding/json"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/runs"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// The agents a Server serves are the run engine's (service/runs); these names keep an
// embedder's code as it was.
type (
	// Agent is one agent a [Server] serves; see [runs.Agent].
	Agent = runs.Agent
	// ToolInfo describes one server tool of an agent, as ListAgents shows it; see
	// [runs.ToolInfo].
	ToolInfo = runs.ToolInfo
	// Agents is what a [Server] serves; see [runs.Agents].
	Agents = runs.Agents
)

// ErrAgentNotFound is wrapped by the error of [Agents.Agent] for a name no agent has.
var ErrAgentNotFound = runs.ErrAgentNotFound

// NewAgents returns a fixed set of agents defined in Go; see [runs.NewAgents].
func NewAgents(def *Agent, more ...*Agent) (Agents, error) { return runs.NewAgents(def, more...) }

// toolInfos returns what ListAgents shows of a's tools: a.Tools, or what its Runtime says.
func toolInfos(a *Agent) []ToolInfo {
	if a.Tools != nil {
		return a.Tools
	}
	policy := a.Runtime.Policy()
	var out []ToolInfo
	for _, spec := range a.Runtime.Tools() {
		out = append(out, ToolInfo{Spec: spec, Policy: policy.For(spec.Name), Timeout: spec.Timeout})
	}
	return out
}

// agentToProto describes an agent for ListAgents.
func agentToProto(e *Agent) *agentdv1.Agent {
	a := &agentdv1.Agent{
		Name: e.Name, Description: e.Description, Model: e.Runtime.Model().Name(),
		ModelOverrideAllowed: e.Models != nil, MaxSteps: int32(e.Runtime.MaxSteps()),
		RunOutputSchemaAllowed: e.RunOutputSchema,
	}
	a.OutputSchema = schemaStruct(e.Runtime.OutputSchema())
	for _, t := range toolInfos(e) {
		ti := &agentdv1.ToolInfo{
			Spec:             &agentdv1.ToolSpec{Name: t.Spec.Name, Description: t.Spec.Description},
			Source:           t.Source,
			Enabled:          !t.Policy.Disabled,
			RequiresApproval: t.Policy.Approval > runtime.ApprovalAuto,
			Approval:         wire.ApprovalToProto(t.Policy.Approval),
			CompletesRun:     t.Spec.CompletesRun,
			Parallel:         t.Parallel,
		}
		if t.Timeout > 0 {
			ti.Timeout = durationpb.New(t.Timeout)
		}
		ti.Spec.Parameters = schemaStruct(t.Spec.Parameters)
		a.Tools = append(a.Tools, ti)
	}
	return a
}

// schemaStruct is a JSON Schema (an object) as a Struct; nil for none, or for one that
// is not a JSON object.
func schemaStruct(raw json.RawMessage) *structpb.Struct {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	s, _ := structpb.NewStruct(m)
	return s
}
