package budget_test

import (
	"context"
	"fmt"

	"github.com/agentd/agentd/hooks/budget"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
)

func Example() {
	// A model that keeps calling tools.
	var steps []runtimetest.Step
	for i := range 10 {
		steps = append(steps, runtimetest.Call(i, "fetch", fmt.Sprintf(`{"page":%d}`, i)))
	}
	agent, _ := runtime.New(runtime.Config{
		Model: &runtimetest.Model{Steps: steps},
		Tools: []runtime.Tool{runtimetest.Tool("fetch", runtimetest.Echo)},
		Hooks: budget.New(budget.WithMaxToolCalls(3), budget.WithMaxTokens(100_000)),
	})
	for ev := range agent.Run(context.Background(), &runtime.Request{}) {
		switch ev := ev.(type) {
		case *runtime.HookEvent:
			e := ev.Value.(budget.Exceeded)
			fmt.Println(ev.Name, e.Kind, e.Limit, e.Used)
		case *runtime.RunFinished:
			fmt.Println(ev.Reason, ev.Err)
		}
	}
	// Output:
	// budget.exceeded tool_calls 3 4
	// stopped stopped by budget: tool call budget of 3 exceeded: call 4 refused
}
