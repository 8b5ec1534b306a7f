package demo_test

import (
	"context"
	"fmt"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// An agent on the demo model with the built-in tools: the model calls calculate, then
// answers from its result.
func ExampleNew() {
	agent, err := runtime.New(runtime.Config{
		Model:  demo.New(demo.Config{}),
		Tools:  builtin.Tools(),
		Policy: builtin.Policy(),
	})
	if err != nil {
		panic(err)
	}
	req := &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("what is 12*7?")}}
	for ev, err := range agent.Run(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		switch ev := ev.(type) {
		case *runtime.ToolCallArgsDone:
			fmt.Println("call:", ev.Arguments)
		case *runtime.ToolCallResult:
			fmt.Println("result:", ev.Result.Output.String())
		case *runtime.RunFinished:
			fmt.Println(ev.Reason, ev.FinalText)
		}
	}
	// Output:
	// call: {"expression":"12*7"}
	// result: {"expression":"12*7","result":84}
	// completed 12*7 = 84
}
