package hooks

import "github.com/agentd/agentd/runtime"

// Chain folds hs into one runtime.Hooks that calls them in order, the first first, with
// the rules of [runtime.Chain]:
//
//   - AfterRun and OnEvent reach every hook, one after another.
//   - A hook's error is logged and the chain goes on; so does a recovered panic.
//   - BeforeModel, BeforeTool and AfterTool thread their input: each hook sees what the
//     previous one rewrote.
//   - A *runtime.StopError wins: the chain returns it at once and the run stops.
//   - OnError asks every hook; any retry wins.
//
// Nil hooks are skipped and chains are flattened. Failures are logged to slog.Default();
// when the chain is a runtime.Request's or runtime.Config's hooks, the agent flattens it
// into its own chain and logs to its Config.Logger instead. Use [runtime.Chain] to name
// a logger for a chain called directly.
func Chain(hs ...runtime.Hooks) runtime.Hooks {
	return runtime.Chain(nil, hs...)
}
