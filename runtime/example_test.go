package runtime_test

import (
	"context"
	"fmt"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
)

func ExampleAgent_Run() {
	// A scripted model asks for one tool call, then answers from its result.
	model := &runtimetest.Model{Steps: []runtimetest.Step{
		runtimetest.Call(0, "add", `{"a":2,"b":3}`),
		runtimetest.Say("2 + 3 = ", "5"),
	}}
	add := runtime.NewTool(runtime.ToolSpec{
		Name:       "add",
		Parameters: []byte(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`),
	}, func(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{JSON: []byte(`{"sum":5}`)}, nil
	})
	agent, err := runtime.New(runtime.Config{Name: "calc", Model: model, Tools: []runtime.Tool{add}})
	if err != nil {
		panic(err)
	}
	req := &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("what is 2+3?")}}
	for ev, err := range agent.Run(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		switch ev := ev.(type) {
		case *runtime.ToolExecutionStarted:
			fmt.Println("calling", ev.Name, ev.Arguments)
		case *runtime.ToolCallResult:
			fmt.Println("result", ev.Result.Output.String())
		case *runtime.TextDelta:
			fmt.Print(ev.Delta)
		case *runtime.RunFinished:
			fmt.Println()
			fmt.Println(ev.Reason, len(ev.NewMessages), "new messages")
		}
	}
	// Output:
	// calling add {"a":2,"b":3}
	// result {"sum":5}
	// 2 + 3 = 5
	// completed 3 new messages
}
