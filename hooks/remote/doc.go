// Package remote calls hooks written in any language: a [Hook] is a runtime.Hooks that
// calls an agentd.hooks.v1.HookService server (proto/agentd/hooks/v1/hooks.proto, stubs in
// gen/) at the hook points the operator chose, and applies its answers to the run.
//
//	h, err := remote.Dial("unix:///run/agentd/policy.sock",
//		remote.WithPoints(remote.BeforeTool, remote.AfterTool),
//		remote.WithTimeout(500*time.Millisecond),
//		remote.WithFailClosed(true))
//	if err != nil { … }
//	defer h.Close()
//	grpc.NewServer(grpc.ChainStreamInterceptor(hooks.StreamServerInterceptor(h)))
//
// The connection is plaintext only to a hook server on a loopback address or a Unix
// socket. To any other address [Dial] wants [WithTLS] (a private CA, a client
// certificate for mTLS, the server name to verify), or transport credentials of the
// caller's choosing with [WithDialOptions]; without them it fails with [ErrPlaintext]:
//
//	h, err := remote.Dial("dns:///policy.internal:7070",
//		remote.WithTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}),
//		remote.WithFailClosed(true))
//
// A server whose certificate does not verify is a failed call like an unreachable one,
// handled by the fail mode below.
//
// Each configured point is one unary RPC on the run's path: the run waits for the answer,
// at most the timeout ([WithTimeout], 2 s by default). The answers map onto the runtime's
// hook inputs:
//
//   - DECISION_CONTINUE (or none): the run goes on, with the rewrites the response
//     carries: BeforeTool's arguments_json becomes the call's arguments (validated again
//     against the tool's schema) and require_approval asks for an approval; AfterTool's
//     output replaces the result the model sees; BeforeModel's system_prompt and
//     append_messages change the messages of that one model call.
//   - DECISION_DENY (BeforeTool): the call does not run; the model gets an error result
//     with the reason.
//   - DECISION_ANSWER (BeforeTool): the call does not run; the model gets the answer.
//   - DECISION_STOP (every point but AfterRun): the hook returns a *runtime.StopError
//     whose Hook is "remote:<name>", and the run finishes stopped.
//   - Events in a response are emitted (runtime.RunInfo.Emit) whatever the decision.
//
// A call that fails (an error status, no answer within the timeout, an unreachable
// server, a response the hook cannot apply, such as DECISION_DENY at AfterTool) is
// handled by the fail mode. Fail-open, the default, logs a warning and goes on as if the
// server had answered DECISION_CONTINUE. Fail-closed ([WithFailClosed]) stops the run
// with the reason "hook unreachable: …" (timeouts, unavailable servers) or "hook failed:
// …" (anything else). AfterRun cannot stop a run, so its failures are only logged. A call
// cut short because the run itself was cancelled is not a failure. A hook that enforces
// a policy (one that denies calls or stops runs) wants fail-closed: a policy server that
// is down, or one agentd cannot verify, must not let the calls through. Fail-open suits
// hooks that observe or enrich.
//
// At the points not configured ([WithPoints]; BeforeTool and AfterTool by default) the
// hook does nothing, as runtime.NoHooks. OnEvent is never called remotely: a round trip
// per streamed event would slow the model stream. A failed model call reaches the hook
// server at AfterRun, as RUN_END_REASON_FAILED with the error's text: the model's
// adapter has retried it already.
//
// Requests carry the run's ids, agent, model and metadata, and the point's input. They
// leave out media bytes and opaque reasoning state, and log lines never carry
// arguments, messages or outputs.
//
// A Hook is safe for concurrent use; one serves every run. Compose it with other hooks
// like any runtime.Hooks: it runs where it is installed in the chain.
//
// A [Guardrail] is a runtime.Guardrail whose checks the server's Guard RPC answers, at
// the stages of its runtime.GuardSpec, with what the stage checks (the input messages,
// the answer, a tool call's arguments or result):
//
//	g, err := remote.DialGuardrail("unix:///run/agentd/pii.sock",
//		runtime.GuardSpec{Name: "pii", Stages: runtime.GuardInput | runtime.GuardOutput},
//		remote.WithTimeout(300*time.Millisecond))
//
// It connects as [Dial] does. Unlike a Hook it fails closed by default: a check that
// fails (an error status, no answer within the timeout, an unreachable server, a
// response past GuardResponse's limits) trips it, unless the spec's FailOpen says the
// run goes on.
package remote
