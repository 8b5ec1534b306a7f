package agentstest_test

import (
	"errors"
	"testing"

	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/agents/agentstest"
)

func TestScriptResolver(t *testing.T) {
	model := &rt.Model{Steps: []rt.Step{rt.Say("hi")}}
	resolve := agentstest.ScriptResolver(map[string]*rt.Model{"greeter": model})

	if m, err := resolve("script:greeter"); err != nil || m != model {
		t.Errorf("script:greeter resolved to %v, %v; want the test's model", m, err)
	}
	if _, err := resolve("script:nobody"); !errors.Is(err, agents.ErrUnknownModel) {
		t.Errorf("script:nobody: %v, want ErrUnknownModel", err)
	}
	if m, err := resolve("demo"); err != nil || m == nil {
		t.Errorf("demo: %v, %v; want the built-in demo model", m, err)
	}
}
