// Package provider holds what the provider adapters (runtime/llm/openai,
// runtime/llm/anthropic) share around their SDK calls, so that each adapter keeps only
// what differs: the SDK calls, the conversions, and the mapping of its SDK's errors to an
// [*Error].
//
//   - [Retrier] is the one place a failed model call is retried: before the call's first
//     event, as often as its [Policy] allows, after the server's Retry-After or an
//     exponential backoff with jitter. The runtime's loop does not retry; it fails the run.
//   - [Error] is the failure of a call: status, the server's error type and message,
//     Retry-After, whether it is transient, whether output was emitted, attempts made.
//     The classifiers ([StatusTransient], [ConnectionError], [RetryAfter]) fill it from an
//     HTTP answer or a transport error. [Error.Retryable] and [NextMayHelp] answer, from
//     it, whether a later call or another model may succeed.
//   - [StallMiddleware] ends a streamed call whose server went quiet, with an error that
//     wraps [ErrStalled]: a failure of the connection, retried like one.
package provider
