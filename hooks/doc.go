// Package hooks composes [runtime.Hooks] and installs them on a gRPC server.
//
// A hook is code that observes or changes a run at the runtime's hook points: before and
// after the run, each model call and each tool call, on every event, and on a failed model
// call. It implements [runtime.Hooks], usually by embedding [runtime.NoHooks] and
// overriding the points it needs; it may rewrite what the model or a tool gets, answer or
// deny a tool call, tell the client something with [runtime.RunInfo.Emit] (a hook_event),
// or stop the run with [runtime.Stop].
//
// [Chain] folds several hooks into one. [StreamServerInterceptor] and
// [UnaryServerInterceptor] attach a hook to each RPC's context, where the service finds
// them with [FromContext], so installing a hook reads like installing any middleware.
//
// # Order
//
// The first interceptor's hook runs first, then the next interceptor's, and so on in
// grpc.ChainStreamInterceptor order; then the agent's configured hooks. Order matters
// where hooks thread their input (BeforeModel, BeforeTool, AfterTool: each sees what the
// previous one rewrote) and where one stops the run: a stop ends the chain at once, so
// hooks after it do not see that point.
//
//	srv := grpc.NewServer(grpc.ChainStreamInterceptor(
//		hooks.StreamServerInterceptor(loopdetect.New(loopdetect.WithHardLimit(5))), // runs first
//		hooks.StreamServerInterceptor(budget.New(budget.WithMaxTokens(200_000))),
//	))
//
//	// In the handler: the context's hooks, then the agent's own (runtime.Config.Hooks).
//	req := &runtime.Request{Hooks: hooks.Chain(hooks.FromContext(ctx)...)}
//	for ev, err := range agent.Run(ctx, req) {
//		// …
//	}
//
// The built-in hooks live in packages of their own: loopdetect (the same call over and
// over), budget (tokens, tool calls, wall time), errorbreaker (failed tool calls in a row)
// and audit (a log record per tool call and decision). Each keeps per-run state keyed by
// the run and drops it when the run ends (or, for a run whose consumer stopped reading
// and so never reached AfterRun, once the run is garbage collected), so one instance may
// serve every run of a server.
package hooks
