package errorbreaker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentd/agentd/hooks/errorbreaker"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
)

func Example() {
	// A model retrying a tool whose backend is down.
	var steps []runtimetest.Step
	for i := range 10 {
		steps = append(steps, runtimetest.Call(i, "query", fmt.Sprintf(`{"attempt":%d}`, i)))
	}
	down := runtimetest.Tool("query", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{}, errors.New("connection refused")
	})
	agent, _ := runtime.New(runtime.Config{
		Model: &runtimetest.Model{Steps: steps},
		Tools: []runtime.Tool{down},
		Hooks: errorbreaker.New(errorbreaker.WithThreshold(3)),
	})
	for ev := range agent.Run(context.Background(), &runtime.Request{}) {
		if fin, ok := ev.(*runtime.RunFinished); ok {
			fmt.Println(fin.Reason, fin.Err)
		}
	}
	// Output:
	// stopped stopped by errorbreaker: 3 tool calls failed in a row; the last was query (call call_2_0)
}
