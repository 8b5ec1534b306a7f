package budget

// Runs returns the number of runs the hook keeps state for.
func (h *Hook) Runs() int { return h.runs.Len() }
