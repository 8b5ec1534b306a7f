// Package reasontest checks that the error reasons agentd's code can send are exactly the
// ones its wire contract documents.
//
// The contract (proto/agentd/v1) lists three closed sets of UPPER_SNAKE reasons as
// comment bullets, "  - REASON — when": the status reasons in AgentService's comment
// (google.rpc.ErrorInfo of a status error), the run reasons at RunError.reason
// (run_finished) and the ack reasons at InputAck.error (refused client messages).
// [Documented] reads them.
//
// [Used] reads a package's Go sources and follows every value that reaches a reason: the
// Reason field of an errdetails.ErrorInfo (a status reason) or an agentdv1.RunError (a run
// reason) literal, and, from there, the parameters of the functions and closures that
// pass a reason on, to the arguments of their calls, through local variables, to
// constants and string literals. A value it cannot follow is an error, so a reason cannot
// reach the wire unseen. [Diff] compares the two.
package reasontest
