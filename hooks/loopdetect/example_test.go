package loopdetect_test

import (
	"context"
	"fmt"

	"github.com/agentd/agentd/hooks/loopdetect"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
)

func Example() {
	// A model stuck on the same call.
	var steps []runtimetest.Step
	for i := range 5 {
		steps = append(steps, runtimetest.Call(i, "search", `{"q":"weather"}`))
	}
	agent, _ := runtime.New(runtime.Config{
		Model: &runtimetest.Model{Steps: steps},
		Tools: []runtime.Tool{runtimetest.Tool("search", runtimetest.Echo)},
		Hooks: loopdetect.New(loopdetect.WithSoftLimit(2), loopdetect.WithHardLimit(3)),
	})
	for ev := range agent.Run(context.Background(), &runtime.Request{}) {
		switch ev := ev.(type) {
		case *runtime.HookEvent:
			fmt.Printf("%s %+v\n", ev.Name, ev.Value)
		case *runtime.RunFinished:
			fmt.Println(ev.Reason, ev.Err)
		}
	}
	// Output:
	// loopdetect.warning {Tool:search CallID:call_1_0 Count:2 SoftLimit:2 HardLimit:3}
	// stopped stopped by loopdetect: tool search was called 3 times with the same arguments (limit 3)
}
