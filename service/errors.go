package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// errorDomain is the google.rpc.ErrorInfo domain of agentd's errors; their reasons are in
// reasons.go.
const errorDomain = "agentd"

// statusError is a gRPC status with an ErrorInfo (and the given extra details).
func statusError(code codes.Code, reason, msg string, meta map[string]string, details ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	all := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: meta}}, details...)
	if withDetails, err := st.WithDetails(all...); err == nil {
		st = withDetails
	}
	return st.Err()
}

// invalidArgument is INVALID_ARGUMENT with a BadRequest listing what is wrong.
func invalidArgument(reason string, fe wire.FieldErrors) error {
	msg := "invalid request"
	if len(fe) > 0 {
		msg += ": " + fe.Summary()
	}
	return statusError(codes.InvalidArgument, reason, msg, nil, &errdetails.BadRequest{FieldViolations: fe})
}

// runError describes how a run ended: the RunError of its run_finished and the status
// the RPC ends with. It is nil for the outcomes that end with OK.
func runError(fin *runtime.RunFinished, clientCancelled bool) *agentdv1.RunError {
	mk := func(code codes.Code, reason, msg string, retryable bool) *agentdv1.RunError {
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
			return &agentdv1.RunError{Code: int32(codes.OK), Reason: reasonCancelled, Message: wire.ProtoString(msg)}
		case errors.Is(fin.Err, context.DeadlineExceeded):
			return mk(codes.DeadlineExceeded, reasonDeadline, "the run did not finish before the client's deadline", true)
		}
		return mk(codes.Canceled, reasonCancelled, msg, false)
	case runtime.EndMaxSteps:
		return mk(codes.ResourceExhausted, reasonMaxSteps, errString(fin.Err, "step limit reached"), false)
	case runtime.EndStopped:
		return mk(codes.Aborted, reasonStopped, errString(fin.Err, "stopped"), false)
	case runtime.EndShutdown:
		return mk(codes.Unavailable, reasonShutdown, "the server shut down; resume the run from its continuation on another replica", true)
	case runtime.EndFailed:
		if errors.Is(fin.Err, runtime.ErrMissingFinishReason) {
			return mk(codes.Unavailable, reasonModelIncomplete, fin.Err.Error(), true)
		}
		if _, ok := errors.AsType[*runtime.ModelError](fin.Err); ok {
			return mk(codes.Unavailable, reasonModelError, fin.Err.Error(), true)
		}
		return mk(codes.Internal, reasonInternal, errString(fin.Err, "the run failed"), false)
	}
	return mk(codes.Internal, reasonInternal, "the run ended for an unknown reason", false)
}

func errString(err error, fallback string) string {
	if err == nil {
		return fallback
	}
	return err.Error()
}

// runStatus is the status an RPC ends with after its run_finished.
func runStatus(re *agentdv1.RunError, details ...protoadapt.MessageV1) error {
	if re == nil || codes.Code(re.GetCode()) == codes.OK {
		return nil
	}
	return statusError(codes.Code(re.GetCode()), re.GetReason(), re.GetMessage(), nil, details...)
}

// ackError is the RunError of a refused client message.
func ackError(reason, format string, args ...any) *agentdv1.RunError {
	return &agentdv1.RunError{Code: int32(codes.FailedPrecondition), Reason: reason, Message: fmt.Sprintf(format, args...)}
}
