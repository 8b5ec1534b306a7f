package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Tool is something the model can call.
//
// Execute runs with the run's context (bounded by the tool's timeout) and the call, whose
// Arguments are valid JSON matching the tool's schema. A returned error, like a panic,
// becomes an error result the model reads; it never ends the run. Implementations must be
// safe for concurrent use when Spec().Parallel is set. A Tool whose schema is compiled
// already passes it on as a [SchemaTool].
type Tool interface {
	Spec() ToolSpec
	Execute(ctx context.Context, call ToolCall) (Output, error)
}

// ToolSpec describes a tool.
type ToolSpec struct {
	// Name is unique within an agent.
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object (draft 2020-12 or draft-07).
	// Nil accepts any JSON object.
	Parameters json.RawMessage
	// Executor says where the tool runs; zero means ExecutorServer.
	Executor Executor
	// CompletesRun ends the run COMPLETED with the tool's output when a call succeeds.
	CompletesRun bool
	// Timeout bounds one call; zero means the agent's default.
	Timeout time.Duration
	// Parallel allows calls to run alongside other parallel calls of the same step.
	Parallel bool
	// Idempotent declares that running a call twice with the same arguments and the
	// same idempotency key ([IdempotencyKey]) has the effect of running it once. A call
	// of an idempotent tool that started and was lost with the process running it is
	// run again where the run goes on; one of any other tool is not (it may have had
	// its effect), and the model is told its outcome is unknown.
	Idempotent bool
}

// idempotencyKey is the context key of a call's idempotency key.
type idempotencyKey struct{}

// IdempotencyKey returns the idempotency key of the tool call whose context ctx is:
// "<run id>/<tool call id>", the same every time the call runs, on any process. A tool
// with effects outside agentd passes it on (an MCP server gets it in the request's
// _meta, as "agentd/idempotency-key"), so that what it calls can tell a repeat.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}

// ToolFunc is the function behind a tool made by [NewTool].
type ToolFunc func(ctx context.Context, call ToolCall) (Output, error)

// NewTool returns a Tool with the given spec that runs fn.
func NewTool(spec ToolSpec, fn ToolFunc) Tool { return funcTool{spec, fn} }

type funcTool struct {
	spec ToolSpec
	fn   ToolFunc
}

func (t funcTool) Spec() ToolSpec { return t.spec }

func (t funcTool) Execute(ctx context.Context, call ToolCall) (Output, error) {
	return t.fn(ctx, call)
}

// truncate cuts s to at most n bytes on a character boundary, saying so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := cutAtRune(s, n)
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}

// cutAtRune returns where to cut s to keep at most n bytes (n < len(s)) without splitting
// a character: n, or the start of the character byte n falls in.
func cutAtRune(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
