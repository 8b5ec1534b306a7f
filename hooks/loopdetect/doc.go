// Package loopdetect is a hook that notices a model calling the same tool with the same
// arguments over and over within a run, warns it, and stops the run if it goes on.
//
// Arguments are compared canonically: JSON is parsed and encoded again with sorted keys
// and no insignificant space, so {"b":1, "a":2} equals {"a":2,"b":1}; numbers compare by
// value (1 equals 1.0). Arguments that are not JSON compare byte for byte. Every call of
// the run counts, not only consecutive ones; a call counts even when a hook before this
// one in the chain answered or denied it, since it is the model's behaviour that loops.
//
// At the soft limit ([WithSoftLimit], 3 by default) and for every identical call after it,
// the hook
//
//   - emits a hook_event named [WarningEvent] whose value is a [Warning], and
//   - lets the call run, then appends a note to its result telling the model that it
//     repeats itself and that the run will be stopped at the hard limit. The model reads
//     the result and the warning together; a legitimate repeat (polling a job) still gets
//     its answer. A JSON result becomes text: the JSON, a blank line, the note.
//
// At the hard limit ([WithHardLimit], 5 by default) BeforeTool returns a
// *runtime.StopError from hook [Name]: that call does not run, and the run finishes
// STOPPED with the reason.
//
// A [Hook] is safe for concurrent use: one instance may serve every run of a server. Its
// counts are per run, kept in the run's own instance ([Hook.ForRun]), and go with the
// run. A resumed run (after an approval parked it) counts afresh.
package loopdetect
