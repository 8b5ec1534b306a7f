// Package errtype names failures for OpenTelemetry's error.type attribute, alike in the
// runtime's spans and in the model adapters' events.
package errtype

import (
	"context"
	"errors"
)

// Other is the error.type of a failure nothing names.
const Other = "_OTHER"

// Known names the failures that match Err (errors.Is).
type Known struct {
	Err  error
	Type string
}

// Of returns the error.type of err: what the first error in its chain with an
// ErrorType() string method returns, unless empty; else the Type of the first of known
// that err matches; else "timeout" for a deadline; else Other.
func Of(err error, known ...Known) string {
	if et, ok := errors.AsType[interface {
		error
		ErrorType() string
	}](err); ok && et.ErrorType() != "" {
		return et.ErrorType()
	}
	if err == nil {
		return Other
	}
	for _, k := range known {
		if errors.Is(err, k.Err) {
			return k.Type
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return Other
}
