// Package errorbreaker is a hook that stops a run whose tool calls keep failing: after a
// number of failed calls in a row ([WithThreshold], 5 by default) the run finishes
// STOPPED with a *runtime.StopError from hook [Name].
//
// A failed call is any result marked IsError that reaches AfterTool: the tool returned an
// error, panicked or timed out, its arguments were not valid, it was unknown or disabled,
// or its call was denied (by a person, a policy, or a hook). A successful result resets the
// count. Results are counted in call order, across steps, within one run.
//
// The breaker trips in AfterTool, on the result that reaches the threshold: the model
// does not get another turn. The other calls of that step still finish and their results
// join the transcript before the run stops (the runtime's rule for a stop from
// AfterTool), and hooks after this one in a chain do not see the tripping result at
// AfterTool (a stop ends the chain).
//
// A [Hook] is safe for concurrent use: one instance may serve every run of a server. Each
// run counts in its own instance ([Hook.ForRun]), which goes with the run; a resumed run
// counts afresh.
package errorbreaker
