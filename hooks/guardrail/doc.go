// Package guardrail holds agentd's built-in guardrails: hooks that implement
// [runtime.Guardrail] and check what enters and leaves a run at the stages of their
// [runtime.GuardSpec]. What a trip does at each stage is the runtime's to say (see its
// package documentation): at the input and output stages it ends the run EndStopped with
// a *runtime.GuardrailError, at a tool stage it does what the spec's OnToolTrip says.
//
//   - [DenyList] refuses text that matches one of its regular expressions or holds one of
//     its keywords; by default it checks the user's input and the run's answer.
//   - [MaxSize] refuses text longer than a number of bytes; by default it checks the
//     run's answer.
//   - [ToolOutputSchema] refuses a tool result that does not match a JSON Schema. It
//     checks the tool output stage only: limit it to the tools whose results the schema
//     describes with GuardSpec.Tools, and set GuardSpec.OnToolTrip to
//     runtime.GuardCorrect to let the model read why and try again rather than end the
//     run.
//
// Each constructor takes the spec the guardrail runs under. An empty Name gets the
// guardrail's default name ([DenyListName], [MaxSizeName], [ToolOutputSchemaName]), zero
// Stages its default stages; Parallel, AfterApproval, OnToolTrip, Tools and FailOpen are
// used as given. A guardrail is installed as any hook is: in Config.Hooks or
// Request.Hooks, or through a server's hook interceptors. Several go together with
// runtime.Chain, and are checked in the chain's order; the first trip wins.
//
// A guardrail keeps no state once it is built: each is safe for concurrent use, and one
// value may serve every run of a server, checking several runs at once.
package guardrail
