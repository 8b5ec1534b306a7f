package service

import (
	"fmt"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/service/runs"
)

// The wire refuses what it checks at the door with the engine's errors, so that every
// refusal reaches the client through the one mapping (toStatus).

// refusal is an error of the given code and reason.
func refusal(code runs.Code, reason, msg string) error {
	return &runs.Error{Code: code, Reason: reason, Message: msg}
}

// invalidArgument is INVALID_ARGUMENT with a BadRequest listing what is wrong.
func invalidArgument(reason string, fe wire.FieldErrors) error {
	msg := "invalid request"
	if len(fe) > 0 {
		msg += ": " + fe.Summary()
	}
	return &runs.Error{Code: runs.InvalidArgument, Reason: reason, Message: msg, Fields: fe}
}

// ackError is the RunError of a refused client message.
func ackError(reason, format string, args ...any) *agentdv1.RunError {
	return &agentdv1.RunError{Code: int32(runs.FailedPrecondition), Reason: reason, Message: fmt.Sprintf(format, args...)}
}
