// Package runtime is agentd's agent loop: a stateless library that runs a model and its
// tools to an end and reports everything as events. It knows nothing of gRPC or protobuf
// and can be embedded on its own.
//
// An [Agent] holds configuration (model, tools, policy, hooks, limits) and nothing else.
// [Agent.Run] takes a [Request] with the transcript so far and yields events as they
// happen:
//
//	for ev, err := range agent.Run(ctx, req) {
//		if err != nil {
//			return err // the request was refused before the run started
//		}
//		switch ev := ev.(type) {
//		case *runtime.TextDelta:
//			fmt.Print(ev.Delta)
//		case *runtime.RunFinished:
//			history = append(history, ev.NewMessages...)
//		}
//	}
//
// The producer runs on the consumer's goroutine, so a slow consumer slows the model read
// (backpressure); breaking out of the loop cancels the model call and the running tools.
// The first event is always [RunStarted] and the last [RunFinished].
//
// # Steps
//
// One step is one model call and the tool calls it asked for:
//
//  1. A done context ends the run, cancelled (or shut down, when the cause is
//     [ErrShutdown]).
//  2. Steers sent to the run's [Inbox] enter the transcript as user messages and start a
//     new turn with a fresh step budget.
//  3. BeforeModel hooks may rewrite the call.
//  4. The model streams; deltas are emitted at once and assembled into one assistant
//     message in arrival order. Tool-call fragments are joined by call id, falling back to
//     the provider's index, falling back to the latest call (for providers that number
//     every call 0, or not at all). A failed call fails the run (see "Model failures").
//  5. AfterModel hooks see the message and its usage.
//  6. No tool calls: a queued steer continues the run; otherwise it completes.
//  7. Each call is prepared: arguments that are not valid JSON or do not match the tool's
//     schema get an error result and never run; BeforeTool hooks may rewrite, answer, deny
//     or stop; policy may disable the call or require an approval. Every approval request
//     goes out before the first wait ([Request.Approve]); a call runs with exactly the
//     arguments shown in its request, or the edited ones of the decision.
//  8. Calls run one after another, or in parallel up to [Config.ParallelTools] where the
//     tool allows it, each with its timeout; errors and panics become error results.
//     Results are reported in call order.
//  9. AfterTool hooks may rewrite results; the results join the transcript.
//  10. A successful call of a [ToolSpec.CompletesRun] tool completes the run.
//  11. Past the turn's step limit the run fails with [ErrMaxSteps].
//
// # Steering
//
// Input that arrives while the run goes on is a [Steer], sent to the run's [Inbox]
// ([Request.Inbox]) from any goroutine:
//
//	inbox := &runtime.Inbox{MaxSteers: 16}
//	go func() {
//		for line := range userInput {
//			if err := inbox.Send(runtime.Steer{Message: runtime.UserMessage(line)}); err != nil {
//				tell(err) // ErrInboxClosed: the run is ending; ErrInboxFull: try again later
//			}
//		}
//	}()
//	events := agent.Run(ctx, &runtime.Request{Messages: history, Inbox: inbox})
//
// The run takes every steer sent so far before each model call. A steer with Interrupt
// set also stops the current step. Where the run may end it closes the inbox, in the
// same step as finding it empty, so Send either accepts a steer that the run then
// applies ([SteerApplied]), reports dropped, or carries in the [Pending] of a parked run
// (the resumed run applies it), or refuses it.
//
// # Parking and resuming
//
// When a decision or a client's tool result cannot come now, [Request.Approve] or the
// client tool returns [ErrInterrupt]: the run finishes [EndAwaitingInput] with a
// [Pending] that describes the step. [Request.Resume] takes the step up again on any
// process, without calling the model first.
//
// # Model failures
//
// A failed model call is retried in one place: the model's adapter (runtime/llm/openai,
// runtime/llm/anthropic), which sees the provider's status and Retry-After, retries only
// before the call's first event, with bounded backoff, and names fallback models through
// runtime/llm/fallback. The loop calls the model once per step: a call that still fails
// ends the run [EndFailed] with a [*ModelError] wrapping the adapter's error, partial
// output kept and marked; the span's error.type names the failure. Cancellation is
// not a failure: the run finishes [EndCancelled].
//
// # Hooks
//
// [Hooks] observe and steer a run; [Chain] folds several into one, in one order: the
// server-wide hooks ([Request.Hooks], which a server fills from its gRPC interceptors,
// the outermost first) before the agent's own ([Config.Hooks]). A hook that keeps state
// per run implements [PerRun]: the runtime asks it for the run's own instance when the
// run starts and drops that instance when the run ends. See [Hooks] for the rules.
//
// # Telemetry
//
// A run reports itself through OpenTelemetry, to [Config.TracerProvider] and
// [Config.MeterProvider] (the global providers when nil, no-ops unless the program
// installs an SDK). Its spans, named and attributed after the GenAI semantic conventions:
//
//	invoke_agent {agent}            the run; a child of the span in Run's context, or a
//	│                               new trace's root; links: Request.SpanLinks
//	├── chat {model}                one per model call (the adapter's retries inside it)
//	├── await_approval {tool}       Request.Approve: the time a person takes to decide
//	└── execute_tool {tool}         one per execution; gen_ai.tool.type is "function" for
//	    └── await_client_tool {tool}  a client tool, whose Execute is the wait for the client
//
// Steers applied or dropped, interrupts, cancellation, cancelled calls, hook events and
// hook stops are events of the run's span. A failed model call, a failed run (including
// the step limit) and a failed tool call set status Error and error.type (the failing
// error's type: model_error, max_steps, a provider's error type, …); a cancel, an interrupt or a stop does not. The run's span also carries
// the usage and the end reason; [RunStarted] carries its trace id. A chat span's
// gen_ai.request.model is the model asked for and its gen_ai.response.model the one that
// served the call, as the model's stream reported it ([ModelResponseInfo]), else the same.
//
// Message content, tool arguments and results, and hook event values go on spans only with
// [Config.RecordContent]. Nothing is recorded per delta: a model call costs one span.
//
// Metrics: gen_ai.client.token.usage and gen_ai.client.operation.duration per model call,
// agentd.runs.active, agentd.runs by agentd.run.end_reason, agentd.tool.duration and
// agentd.approval.wait.duration. Client tools share the tool name "_client" in metrics, so
// that clients cannot grow their series without bound.
package runtime
