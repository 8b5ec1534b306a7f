package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/protoadapt"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs"
)

// statusError is the engine's error of the given code and reason, which the wire
// answers with a status carrying an ErrorInfo (and the given extra details).
func statusError(code runs.Code, reason, msg string, meta map[string]string, details ...protoadapt.MessageV1) error {
	return &runs.Error{Code: code, Reason: reason, Message: msg, Meta: meta, Details: details}
}

// invalidArgument is INVALID_ARGUMENT with a BadRequest listing what is wrong.
func invalidArgument(reason string, fe wire.FieldErrors) error {
	msg := "invalid request"
	if len(fe) > 0 {
		msg += ": " + fe.Summary()
	}
	return &runs.Error{Code: runs.InvalidArgument, Reason: reason, Message: msg, Fields: fe}
}

// contextError is the error of a wait that ctx ended: CANCELED or DEADLINE_EXCEEDED, as
// status.FromContextError says, with no ErrorInfo.
func contextError(err error) error {
	code := runs.Unknown
	switch {
	case errors.Is(err, context.Canceled):
		code = runs.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = runs.DeadlineExceeded
	}
	return &runs.Error{Code: code, Message: err.Error()}
}

// runError describes how a run ended: the RunError of its run_finished and the status
// the RPC ends with. It is nil for the outcomes that end with OK.
func runError(fin *runtime.RunFinished, clientCancelled bool) *agentdv1.RunError {
	mk := func(code runs.Code, reason, msg string, retryable bool) *agentdv1.RunError {
		return &agentdv1.RunError{Code: int32(code), Reason: reason, Message: wire.ProtoString(msg), Retryable: retryable}
	}
	switch fin.Reason {
	case runtime.EndCompleted, runtime.EndAwaitingInput:
		return nil
	case runtime.EndCancelled:
		msg := "the run was cancelled"
		if fin.Err != nil {
			msg += ": " + fin.Err.Error()
		}
		switch {
		case clientCancelled:
			return &agentdv1.RunError{Code: int32(runs.OK), Reason: reasonCancelled, Message: wire.ProtoString(msg)}
		case errors.Is(fin.Err, context.DeadlineExceeded):
			return mk(runs.DeadlineExceeded, reasonDeadline, "the run did not finish before the client's deadline", true)
		}
		return mk(runs.Canceled, reasonCancelled, msg, false)
	case runtime.EndMaxSteps:
		return mk(runs.ResourceExhausted, reasonMaxSteps, errString(fin.Err, "step limit reached"), false)
	case runtime.EndStopped:
		return mk(runs.Aborted, reasonStopped, errString(fin.Err, "stopped"), false)
	case runtime.EndShutdown:
		return mk(runs.Unavailable, reasonShutdown, "the server shut down; resume the run from its continuation on another replica", true)
	case runtime.EndFailed:
		if errors.Is(fin.Err, runtime.ErrMissingFinishReason) {
			return mk(runs.Unavailable, reasonModelIncomplete, fin.Err.Error(), true)
		}
		if _, ok := errors.AsType[*runtime.ModelError](fin.Err); ok {
			return mk(runs.Unavailable, reasonModelError, fin.Err.Error(), true)
		}
		return mk(runs.Internal, reasonInternal, errString(fin.Err, "the run failed"), false)
	}
	return mk(runs.Internal, reasonInternal, "the run ended for an unknown reason", false)
}

func errString(err error, fallback string) string {
	if err == nil {
		return fallback
	}
	return err.Error()
}

// runStatus is the status an RPC ends with after its run_finished.
func runStatus(re *agentdv1.RunError, details ...protoadapt.MessageV1) error {
	if re == nil || runs.Code(re.GetCode()) == runs.OK {
		return nil
	}
	return statusError(runs.Code(re.GetCode()), re.GetReason(), re.GetMessage(), nil, details...)
}

// ackError is the RunError of a refused client message.
func ackError(reason, format string, args ...any) *agentdv1.RunError {
	return &agentdv1.RunError{Code: int32(runs.FailedPrecondition), Reason: reason, Message: fmt.Sprintf(format, args...)}
}
