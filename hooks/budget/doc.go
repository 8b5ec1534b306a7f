// Package budget is a hook that bounds what one run may spend: tokens, tool calls and
// wall time. A run that goes over a budget is stopped: it finishes STOPPED with a
// *runtime.StopError from hook [Name] whose reason says which budget, and a hook_event
// named [ExceededEvent] carrying an [Exceeded] goes out just before.
//
// Each budget is checked where it can be enforced:
//
//   - Tokens ([WithMaxTokens]): input plus output tokens of every model call of the run,
//     as the model reports them, checked in AfterModel, right after the call that goes
//     over, and in BeforeModel (a call cut short by a steer has no AfterModel but its
//     tokens count). The call's message is kept in the transcript; its tool calls do not
//     run.
//   - Tool calls ([WithMaxToolCalls]): calls that reach BeforeTool, that is, whose
//     arguments were valid, and that a hook before this one did not answer or deny. The
//     call that would go over does not run.
//   - Wall time ([WithMaxDuration]): from the run's start, checked before each model
//     call and each tool call. A call already running is not interrupted; give the run's
//     context a deadline for a hard bound.
//
// A budget of zero is no budget. Budgets are per run: a resumed run (after an approval
// parked it) starts afresh.
//
// A [Hook] is safe for concurrent use: one instance may serve every run of a server. Each
// run spends from its own instance ([Hook.ForRun]), which goes with the run.
package budget
