// Package audit is a hook that writes one structured log record per tool call and per
// decision on a tool call, for an audit trail of what an agent did.
//
// Records, all at level Info, all carrying run_id, thread_id and agent:
//
//   - "tool call", per reported result: tool, call_id, executed (whether the tool ran;
//     false for a call denied, answered by a hook, or refused for its arguments), is_error,
//     duration (execute time), arguments, output.
//   - "tool call cancelled", per call that never got a result (the run stopped, was
//     cancelled or interrupted): tool, call_id, reason.
//   - "tool call decision", per approval resolved and per call a hook answered or denied:
//     tool, call_id, decision (approved, denied, expired, cancelled, answered),
//     decided_by (client, policy, hook, timeout, run_end), reason, and for approvals
//     approval_id and the final arguments.
//
// Arguments and outputs are not logged unless the operator opts in with [WithArguments]
// and [WithOutputs]: by default they read "[redacted]", and arguments_bytes and
// output_bytes give their sizes.
//
// Everything is recorded from what comes after the chain of hooks, so the position of
// audit in the chain does not matter: a server-wide audit, which runs before each agent's
// own hooks, records their decisions too. Tool calls and approvals are recorded from the
// run's events, which every hook sees whatever the others do, and the output logged is
// the one the model read (after every AfterTool rewrite). A hook's answer or denial is
// recorded when the call's result comes, from the call's BeforeTool input, which every
// hook of the chain shares and which then holds what the hooks decided, those after
// audit included. So a call a hook answered or denied has its "tool call decision" record
// just before its "tool call" record.
//
// A [Hook] is safe for concurrent use: one instance may serve every run of a server. Each
// run follows its calls in flight in its own instance ([Hook.ForRun]), which goes with
// the run.
package audit
