// Package hooks installs [runtime.Hooks] on a gRPC server, and holds the built-in hooks.
//
// A hook is code that observes or changes a run at the runtime's hook points: before and
// after the run, each model call and each tool call, and on every event. It implements
// [runtime.Hooks], usually by embedding [runtime.NoHooks] and overriding the points it
// needs; it may rewrite what the model or a tool gets, answer or deny a tool call, tell
// the client something with [runtime.RunInfo.Emit] (a hook_event), or stop the run with
// [runtime.Stop]. A failed model call is not a hook point: the model's adapter retries
// it, and the run then finishes FAILED, which AfterRun and OnEvent see.
//
// [StreamServerInterceptor] and [UnaryServerInterceptor] attach a hook to each RPC's
// context, where the service finds them with [FromContext], so installing a hook reads
// like installing any middleware. [runtime.Chain] folds hooks into one.
//
// # Order
//
// A run's hooks are one chain in one order:
//
//  1. the server-wide hooks, installed by the gRPC interceptors, in
//     grpc.ChainStreamInterceptor (or ChainUnaryInterceptor) order: the outermost
//     interceptor's hook first;
//  2. then the agent's own hooks (runtime.Config.Hooks; in agentd's agents file, an
//     agent's hooks section).
//
// Order matters where hooks thread their input (BeforeModel, BeforeTool, AfterTool: each
// sees what the previous one rewrote) and where one stops the run: a stop ends the chain
// at that point, so the hooks after it do not see it. Every hook sees every event and
// AfterRun, whatever the others do. A hook that records what the others decided reads it
// after the chain, from the run's events or from the *runtime.ToolCallInput that every
// hook of the chain shares, so its place does not matter: package audit does so.
//
//	srv := grpc.NewServer(grpc.ChainStreamInterceptor(
//		hooks.StreamServerInterceptor(loopdetect.New(loopdetect.WithHardLimit(5))), // runs first
//		hooks.StreamServerInterceptor(budget.New(budget.WithMaxTokens(200_000))),
//	))
//
//	// In the handler: the context's hooks, then the agent's own (runtime.Config.Hooks).
//	req := &runtime.Request{Hooks: runtime.Chain(logger, hooks.FromContext(ctx)...)}
//	for ev, err := range agent.Run(ctx, req) {
//		// …
//	}
//
// # State per run
//
// The built-in hooks live in packages of their own: loopdetect (the same call over and
// over), budget (tokens, tool calls, wall time), errorbreaker (failed tool calls in a row)
// and audit (a log record per tool call and decision). One value of each may serve every
// run of a server: each implements [runtime.PerRun], so the runtime asks it for an
// instance of its own when a run starts, calls that instance at every point of the run,
// and drops it when the run ends. The long-lived value keeps nothing per run, so runs
// never share state (even two with the same run id) and a server's memory does not grow
// with the runs it has served, however they ended.
package hooks
