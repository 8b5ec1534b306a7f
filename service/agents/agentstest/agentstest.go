package agentstest

import (
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service/agents"
)

// ScriptResolver resolves "script:<name>" to models[name], and every built-in spec as
// agentd does ([agents.BuiltinModelProviders], the demo model unpaced), so that an agents
// file can give each agent a model of the test's: "model: script:<name>". A name models
// lacks is [agents.ErrUnknownModel], as an unknown model is in agentd's own resolver.
func ScriptResolver(models map[string]*runtimetest.Model) agents.ModelResolver {
	return agents.NewModelResolver(append(agents.BuiltinModelProviders(0), agents.ModelProvider{
		Name: "script", Forms: []string{"script:<name>"},
		New: func(name string) (runtime.Model, error) {
			m, ok := models[name]
			if !ok {
				return nil, agents.ErrUnknownModel
			}
			return m, nil
		},
	})...)
}
