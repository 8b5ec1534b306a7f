package runs

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/protoadapt"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// Code says what kind of failure an [Error] is. The codes are numbered as
// google.rpc.Code, so that a code journaled in a RunError, or kept with an input's
// answer, reads the same on every replica; the wire answers an Error with the gRPC code
// of the same number.
type Code uint32

// The codes, as google.rpc.Code numbers them.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

// String returns the code's name as google.rpc.Code spells it, such as
// "INVALID_ARGUMENT".
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

// Error is a failure the engine reports to whoever started, attached to or answered a
// run: what kind (Code), which of agentd's documented reasons (Reason), what happened
// (Message), and what a client needs to act on it. The wire turns it into a status
// with a google.rpc.ErrorInfo (Reason, Meta), a google.rpc.BadRequest (Fields) and
// Details; an Error with no Reason has no ErrorInfo.
type Error struct {
	Code    Code
	Reason  string
	Message string
	Meta    map[string]string
	Fields  wire.FieldErrors
	Details []protoadapt.MessageV1
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// statusError is the engine's error of the given code and reason, which the wire
// answers with a status carrying an ErrorInfo (and the given extra details).
func statusError(code Code, reason, msg string, meta map[string]string, details ...protoadapt.MessageV1) error {
	return &Error{Code: code, Reason: reason, Message: msg, Meta: meta, Details: details}
}

// invalidArgument is INVALID_ARGUMENT with a BadRequest listing what is wrong.
func invalidArgument(reason string, fe wire.FieldErrors) error {
	msg := "invalid request"
	if len(fe) > 0 {
		msg += ": " + fe.Summary()
	}
	return &Error{Code: InvalidArgument, Reason: reason, Message: msg, Fields: fe}
}

// contextError is the error of a wait that ctx ended: CANCELED or DEADLINE_EXCEEDED, as
// status.FromContextError says, with no ErrorInfo.
func contextError(err error) error {
	code := Unknown
	switch {
	case errors.Is(err, context.Canceled):
		code = Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = DeadlineExceeded
	}
	return &Error{Code: code, Message: err.Error()}
}

// runError describes how a run ended: the RunError of its run_finished and the status
// the RPC ends with. It is nil for the outcomes that end with OK.
func runError(fin *runtime.RunFinished, clientCancelled bool) *agentdv1.RunError {
	mk := func(code Code, reason, msg string, retryable bool) *agentdv1.RunError {
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
			return &agentdv1.RunError{Code: int32(OK), Reason: reasonCancelled, Message: wire.ProtoString(msg)}
		case errors.Is(fin.Err, context.DeadlineExceeded):
			return mk(DeadlineExceeded, reasonDeadline, "the run did not finish before the client's deadline", true)
		}
		return mk(Canceled, reasonCancelled, msg, false)
	case runtime.EndMaxSteps:
		return mk(ResourceExhausted, reasonMaxSteps, errString(fin.Err, "step limit reached"), false)
	case runtime.EndStopped:
		if ge, ok := errors.AsType[*runtime.GuardrailError](fin.Err); ok {
			re := mk(Aborted, reasonGuardrail, ge.Error(), false)
			re.Metadata = guardrailMeta(ge)
			return re
		}
		return mk(Aborted, reasonStopped, errString(fin.Err, "stopped"), false)
	case runtime.EndShutdown:
		return mk(Unavailable, reasonShutdown, "the server shut down; resume the run from its continuation on another replica", true)
	case runtime.EndFailed:
		if errors.Is(fin.Err, runtime.ErrMissingFinishReason) {
			return mk(Unavailable, reasonModelIncomplete, fin.Err.Error(), true)
		}
		if _, ok := errors.AsType[*runtime.OutputInvalidError](fin.Err); ok {
			return mk(Aborted, reasonOutputInvalid, fin.Err.Error(), true)
		}
		if _, ok := errors.AsType[*runtime.ModelError](fin.Err); ok {
			return mk(Unavailable, reasonModelError, fin.Err.Error(), true)
		}
		return mk(Internal, reasonInternal, errString(fin.Err, "the run failed"), false)
	}
	return mk(Internal, reasonInternal, "the run ended for an unknown reason", false)
}

// guardrailMeta is the RunError.metadata of a guardrail's trip.
func guardrailMeta(ge *runtime.GuardrailError) map[string]string {
	m := map[string]string{"guardrail": wire.ProtoString(ge.Guardrail), "stage": ge.Stage.String()}
	if ge.Tool != "" {
		m["tool"], m["tool_call_id"] = wire.ProtoString(ge.Tool), wire.ProtoString(ge.CallID)
	}
	for k, v := range ge.Details {
		m[wire.ProtoString("detail."+k)] = wire.ProtoString(v)
	}
	return m
}

func errString(err error, fallback string) string {
	if err == nil {
		return fallback
	}
	return err.Error()
}

// runStatus is the status an RPC ends with after its run_finished.
func runStatus(re *agentdv1.RunError, details ...protoadapt.MessageV1) error {
	if re == nil || Code(re.GetCode()) == OK {
		return nil
	}
	return statusError(Code(re.GetCode()), re.GetReason(), re.GetMessage(), re.GetMetadata(), details...)
}

// ackError is the RunError of a refused client message.
func ackError(reason, format string, args ...any) *agentdv1.RunError {
	return &agentdv1.RunError{Code: int32(FailedPrecondition), Reason: reason, Message: fmt.Sprintf(format, args...)}
}
