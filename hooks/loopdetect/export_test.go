package loopdetect

// Runs returns the number of runs the hook keeps state for.
func (h *Hook) Runs() int { return h.runs.Len() }

// Canonical exposes canonical to the tests.
var Canonical = canonical
