package guardrail

import (
	"context"
	"fmt"
	"strconv"

	"github.com/agentd/agentd/runtime"
)

// MaxSize returns a guardrail that trips when the checked text (GuardCheck.Text) is longer
// than maxBytes bytes. An empty spec.Name means [MaxSizeName], zero spec.Stages means
// runtime.GuardOutput: the run's answer, its final text or a typed run's result as JSON.
// At the input stage the text is the new user messages' text, joined by newlines; at a
// tool stage, the call's arguments or its result as the model reads them.
//
// The trip's Reason is "the <stage> is N bytes; the limit is M", and its Details hold N
// under "bytes" and M under "limit", in decimal. MaxSize refuses a maxBytes of zero or
// less.
func MaxSize(spec runtime.GuardSpec, maxBytes int) (runtime.Guardrail, error) {
	spec = withDefaults(spec, MaxSizeName, runtime.GuardOutput)
	if maxBytes <= 0 {
		return nil, configError(spec.Name, "the limit is %d bytes; it must be more than 0", maxBytes)
	}
	return &maxSize{spec: spec, limit: maxBytes}, nil
}

// maxSize is the guardrail MaxSize returns. It is safe for concurrent use.
type maxSize struct {
	runtime.NoHooks
	spec  runtime.GuardSpec
	limit int
}

// Guard returns the guardrail's spec.
func (m *maxSize) Guard() runtime.GuardSpec { return guardSpec(m.spec) }

// Check trips when in.Text is longer than the limit.
func (m *maxSize) Check(_ context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
	n := len(in.Text)
	if n <= m.limit {
		return nil, nil
	}
	return &runtime.Trip{
		Reason:  fmt.Sprintf("the %s is %d bytes; the limit is %d", in.Stage, n, m.limit),
		Details: map[string]string{"bytes": strconv.Itoa(n), "limit": strconv.Itoa(m.limit)},
	}, nil
}
