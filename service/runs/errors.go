package runs

import (
	"google.golang.org/protobuf/protoadapt"

	"github.com/agentd/agentd/internal/wire"
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
