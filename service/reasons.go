package service

// The reasons of the refusals the wire makes itself, at the door; the engine's are in
// service/runs/reasons.go. Each is listed, with when it is sent, in the wire contract
// (proto/agentd/v1), and the lists there are closed: a reason is added there first, then
// here. TestReasonsDocumented fails when the code and the lists disagree.

// Status reasons: google.rpc.ErrorInfo of a status error that refuses a stream.
const (
	reasonInvalidArgument      = "INVALID_ARGUMENT"
	reasonInvalidUTF8          = "INVALID_UTF8" // an ack reason too
	reasonFirstMessageNotStart = "FIRST_MESSAGE_NOT_START"
	reasonStartTimeout         = "START_TIMEOUT"
	reasonInternal             = "INTERNAL" // a run reason too
)

// Ack reasons: InputAck.error.reason of a refused client message.
const (
	reasonInvalidID      = "INVALID_ID"
	reasonInvalidMessage = "INVALID_MESSAGE"
)
