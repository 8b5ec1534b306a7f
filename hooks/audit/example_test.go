package audit_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
)

func Example() {
	// Times and durations left out, so the output is stable.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "duration" {
			return slog.Attr{}
		}
		return a
	}}))
	agent, _ := runtime.New(runtime.Config{
		Name: "clerk",
		Model: &runtimetest.Model{Steps: []runtimetest.Step{
			runtimetest.Call(0, "lookup", `{"customer":"ACME"}`),
			runtimetest.Say("found"),
		}},
		Tools: []runtime.Tool{runtimetest.Tool("lookup", runtimetest.Echo)},
		Hooks: audit.New(logger), // arguments and outputs redacted
	})
	req := &runtime.Request{RunID: "run_1", ThreadID: "thread_1"}
	for range agent.Run(context.Background(), req) {
	}
	// Output:
	// level=INFO msg="tool call" run_id=run_1 thread_id=thread_1 agent=clerk tool=lookup call_id=call_0_0 executed=true is_error=false arguments=[redacted] arguments_bytes=19 output=[redacted] output_bytes=19
}
