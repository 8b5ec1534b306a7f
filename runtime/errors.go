package runtime

import (
	"errors"
	"fmt"
)

var (
	// ErrMaxSteps ends a run whose turn used up its step budget (EndMaxSteps).
	ErrMaxSteps = errors.New("runtime: step limit reached")
	// ErrInterrupt, returned by Request.Approve or by a client tool's Execute, parks the
	// run: it finishes EndAwaitingInput with a Pending to resume from.
	ErrInterrupt = errors.New("runtime: waiting for input")
	// ErrShutdown, as the cause of the run's context (context.WithCancelCause), ends the
	// run EndShutdown with a Pending to resume from elsewhere.
	ErrShutdown = errors.New("runtime: server shutting down")
	// ErrMissingFinishReason is wrapped by the ModelError of a stream that ended without
	// a finish event.
	ErrMissingFinishReason = errors.New("model stream ended without a finish reason")
	// ErrInvalidRequest is wrapped by the errors Run yields for a request it refuses
	// before starting.
	ErrInvalidRequest = errors.New("runtime: invalid request")
)

// ModelError is a failed model call. The model's adapter retries a call before its
// first event (see runtime/llm); the run does not call again: it finishes EndFailed with
// the ModelError, whose Err is the adapter's error.
type ModelError struct {
	Model string
	Err   error
}

func (e *ModelError) Error() string { return fmt.Sprintf("model %s: %v", e.Model, e.Err) }
func (e *ModelError) Unwrap() error { return e.Err }

// StopError is returned by a hook to stop the run; the run finishes EndStopped with it.
type StopError struct {
	// Hook names who stopped the run, such as "budget".
	Hook   string
	Reason string
	// Err is what the stop stands for, if more than a hook's word: a *GuardrailError
	// for a guardrail's trip.
	Err error
}

func (e *StopError) Unwrap() error { return e.Err }

func (e *StopError) Error() string {
	if e.Hook == "" {
		return "stopped: " + e.Reason
	}
	return fmt.Sprintf("stopped by %s: %s", e.Hook, e.Reason)
}

// Stop returns a *StopError for a hook to return.
func Stop(hook, reason string) error { return &StopError{Hook: hook, Reason: reason} }
