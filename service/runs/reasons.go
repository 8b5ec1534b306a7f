package runs

// The stable UPPER_SNAKE reasons agentd's errors carry. Each is listed, with when it is
// sent, in the wire contract (proto/agentd/v1), and the lists there are closed: a reason
// is added there first, then here. TestReasonsDocumented fails when the two disagree.

// Status reasons: google.rpc.ErrorInfo of a status error that refuses a stream, or ends
// one whose sending broke (AgentService's comment). A status that ends a run carries its
// run reason instead.
const (
	reasonInvalidArgument      = "INVALID_ARGUMENT"
	reasonDraining             = "SERVER_DRAINING"
	reasonAgentNotFound        = "AGENT_NOT_FOUND"
	reasonModelOverride        = "MODEL_OVERRIDE_NOT_ALLOWED"
	reasonOutputSchema         = "OUTPUT_SCHEMA_NOT_ALLOWED"
	reasonContinuation         = "CONTINUATION_INVALID"
	reasonContinuationExpired  = "CONTINUATION_EXPIRED"
	reasonContinuationMismatch = "CONTINUATION_MISMATCH"
	reasonTooManyRuns          = "TOO_MANY_RUNS"
	reasonTooManyCallerRuns    = "TOO_MANY_RUNS_FOR_CALLER"
	reasonTooManyAttachments   = "TOO_MANY_ATTACHMENTS"
	reasonTooManyInputs        = "TOO_MANY_INPUTS"
	reasonStreamBroken         = "STREAM_BROKEN"
	reasonRunNotFound          = "RUN_NOT_FOUND"
	reasonEventsExpired        = "EVENTS_EXPIRED"
	reasonCursorAhead          = "CURSOR_AHEAD"
	reasonRunFinished          = "RUN_FINISHED"
	reasonInputKeyReused       = "INPUT_KEY_REUSED"
	reasonStoreUnavailable     = "STORE_UNAVAILABLE"
	reasonRunElsewhere         = "RUN_NOT_HERE"
	reasonRunMoved             = "RUN_MOVED"
	reasonInputUnanswered      = "INPUT_UNANSWERED"
	reasonGrantNotFound        = "GRANT_NOT_FOUND"
	reasonScopeNotAllowed      = "SCOPE_NOT_ALLOWED"
	reasonThreadNotFound       = "THREAD_NOT_FOUND"
	reasonThreadBusy           = "THREAD_BUSY"
	reasonInvalidPageToken     = "INVALID_PAGE_TOKEN"
	reasonInternal             = "INTERNAL" // a run reason too
)

// Run reasons: RunError.reason in run_finished, and the status that ends the RPC after it.
const (
	reasonCancelled       = "CANCELLED"
	reasonDeadline        = "DEADLINE_EXCEEDED"
	reasonMaxSteps        = "MAX_STEPS"
	reasonStopped         = "STOPPED"
	reasonShutdown        = "SERVER_SHUTDOWN"
	reasonClientStalled   = "CLIENT_STALLED"
	reasonModelError      = "MODEL_ERROR"
	reasonModelIncomplete = "MODEL_STREAM_INCOMPLETE"
	reasonParkExpired     = "PARK_EXPIRED"
	reasonOutputInvalid   = "OUTPUT_INVALID"
	reasonGuardrail       = "GUARDRAIL_TRIPPED"
)

// Ack reasons: InputAck.error.reason of a refused client message.
const (
	reasonRateLimited       = "RATE_LIMITED"
	reasonAlreadyStarted    = "ALREADY_STARTED"
	reasonEmptyMessage      = "EMPTY_MESSAGE"
	reasonRunEnding         = "RUN_ENDING"
	reasonInvalidDecision   = "INVALID_DECISION"
	reasonInvalidEditedArgs = "INVALID_ARGUMENTS"
	reasonUnknownApproval   = "UNKNOWN_APPROVAL"
	reasonAlreadyDecided    = "ALREADY_DECIDED"
	reasonApprovalClosed    = "APPROVAL_CLOSED"
	reasonInvalidSteer      = "INVALID_STEER"
	reasonSteerQueueFull    = "STEER_QUEUE_FULL"
	reasonSteerRateLimited  = "STEER_RATE_LIMITED"
	reasonUnknownToolCall   = "UNKNOWN_TOOL_CALL"
	reasonToolCallClosed    = "TOOL_CALL_CLOSED"
	reasonInvalidToolResult = "INVALID_TOOL_RESULT"
	reasonAlreadyAttached   = "ALREADY_ATTACHED"
	reasonWakeFailed        = "WAKE_FAILED"
)
