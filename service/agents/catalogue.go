package agents

import (
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// catalogueTool is a tool an agents file can name (AgentConfig.Tools).
type catalogueTool struct {
	source string
	// approval is the tool's own approval: an agent's default approval never loosens it.
	approval runtime.Approval
	make     func(*agentState) runtime.Tool
}

// agentState is what an agent's tools share, across rebuilds: save_note's store, and the
// http_fetch tool made from the agent's config.
type agentState struct {
	notes *builtin.Notes
	fetch runtime.Tool
}

// catalogueOrder lists the catalogue for error messages.
var catalogueOrder = []string{builtin.CurrentTimeName, builtin.CalculateName, builtin.SaveNoteName, builtin.HTTPFetchName, "echo", "add"}

// catalogue is every tool an agents file can name, by name.
var catalogue = map[string]*catalogueTool{
	builtin.CurrentTimeName: {source: "builtin", make: func(*agentState) runtime.Tool { return builtin.CurrentTime() }},
	builtin.CalculateName:   {source: "builtin", make: func(*agentState) runtime.Tool { return builtin.Calculate() }},
	builtin.SaveNoteName: {
		source:   "builtin",
		approval: builtin.Policy().For(builtin.SaveNoteName).Approval,
		make:     func(s *agentState) runtime.Tool { return builtin.SaveNote(s.notes) },
	},
	builtin.HTTPFetchName: {
		source:   "builtin",
		approval: builtin.Policy().For(builtin.HTTPFetchName).Approval,
		make:     func(s *agentState) runtime.Tool { return s.fetch },
	},
	"echo": {source: "workload", make: workloadTool("echo")},
	"add":  {source: "workload", make: workloadTool("add")},
}

func workloadTool(name string) func(*agentState) runtime.Tool {
	return func(*agentState) runtime.Tool {
		for _, t := range workload.Tools() {
			if t.Spec().Name == name {
				return t
			}
		}
		panic("agents: the workload has no tool " + name)
	}
}
