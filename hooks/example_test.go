package hooks_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
)

// noShell denies every call of the tool "shell"; the model reads why.
type noShell struct{ runtime.NoHooks }

func (noShell) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	if in.Call.Name == "shell" {
		in.Deny = "no shell on this server"
		in.Emit("noshell.denied", in.Call.ID) // a hook_event for the client
	}
	return nil
}

func Example() {
	model := &runtimetest.Model{Steps: []runtimetest.Step{
		runtimetest.Call(0, "shell", `{"cmd":"rm -rf /"}`),
		runtimetest.Say("I may not use the shell."),
	}}
	agent, _ := runtime.New(runtime.Config{Model: model, Tools: []runtime.Tool{runtimetest.Tool("shell", runtimetest.Echo)}})

	// hooks.StreamServerInterceptor(noShell{}) does this for every RPC.
	ctx := hooks.NewContext(context.Background(), noShell{})

	req := &runtime.Request{Hooks: runtime.Chain(nil, hooks.FromContext(ctx)...)}
	for ev := range agent.Run(ctx, req) {
		switch ev := ev.(type) {
		case *runtime.HookEvent:
			fmt.Println("hook event:", ev.Name, ev.Value)
		case *runtime.ToolCallResult:
			fmt.Println("result:", ev.Result.Output.Text)
		case *runtime.RunFinished:
			fmt.Println(ev.Reason, ev.FinalText)
		}
	}
	// Output:
	// hook event: noshell.denied call_0_0
	// result: tool shell was denied: no shell on this server
	// completed I may not use the shell.
}

func ExampleStreamServerInterceptor() {
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(
		hooks.StreamServerInterceptor(noShell{}), // runs first
		hooks.StreamServerInterceptor(runtime.NoHooks{}),
	))
	defer srv.Stop()
	// A handler passes runtime.Chain(logger, hooks.FromContext(stream.Context())...) as
	// the run's Request.Hooks; the agent's own hooks run after them.
}
