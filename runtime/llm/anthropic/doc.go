// Package anthropic adapts the Messages API to [runtime.Model], with Anthropic's
// official Go SDK (github.com/anthropics/anthropic-sdk-go/v2, API version 2026-10-21).
//
// A call streams and is normalised to the runtime's model events:
//
//   - text_delta becomes text deltas; thinking_delta reasoning deltas.
//   - A tool_use block becomes a tool-call delta with its id and name, keyed by the
//     block's index, and each input_json_delta an argument fragment of it. A block whose
//     input streams no fragment (a tool without parameters) gets its input, or "{}".
//   - A thinking block's signature, and a redacted_thinking block's data, become
//     opaque reasoning state, sent when the block stops; see below.
//   - message_start and message_delta usage become one usage event before the finish
//     event: input tokens include the cache's reads and writes, which are also counted
//     on their own, and output tokens include thinking.
//   - The stop reason maps to the finish reason: end_turn, stop_sequence and pause_turn
//     to stop; tool_use to tool calls; max_tokens and model_context_window_exceeded to
//     length; refusal to content filter. A stream that ends without one fails with an
//     error that wraps [runtime.ErrMissingFinishReason].
//
// The transcript converts to Messages: system messages to the system prompt; user text,
// images and PDFs to user content blocks; an assistant message's parts, in order, to
// thinking, redacted_thinking, text and tool_use blocks (the call's argument text is the
// tool_use input, or {} when it is not a JSON object); tool results to tool_result blocks
// in a user message, with is_error set for failures and the media a tool returned
// inside. Consecutive messages of one role are joined into one turn.
//
// # Reasoning state
//
// Thinking blocks go back to the API with their signatures, byte for byte, as it
// requires within a tool-use turn. The state of each thinking or redacted_thinking block
// is one line of JSON ({"type":"thinking","signature":…,"text_bytes":N} or
// {"type":"redacted_thinking","data":…}), so that when the runtime joins adjacent
// reasoning blocks into one part, their states and texts still split back into the
// blocks they came from. A reasoning part without such state (from another provider)
// is left out of requests, since the API would refuse it unsigned.
//
// # Settings
//
// CallSettings.MaxOutputTokens, or [Config.MaxTokens], sets max_tokens, which the API
// requires. API version 2026-10-21 has no sampling parameters, so
// CallSettings.Temperature and TopP are not sent; CallSettings.Extra is merged into the
// request body as it is, for anything this package does not set.
//
// # Retries, stalls, cancellation and keys
//
// Retries work as in package openai, and are the only retries of a model call: a call
// that fails before its first event (HTTP 408, 409, 429, 5xx and 529, an
// overloaded_error, api_error or rate_limit_error event at the start of the stream, a
// refused, reset or dropped connection, a stream that stalled) is retried inside
// [Model.Stream], up to [Config.MaxRetries] times, after the server's retry-after or an
// exponential backoff with jitter; the SDK's own retries are off, and the runtime's loop
// does not call a failed model again. Nothing is retried once an event has been yielded.
// The final error is a [*ProviderError], the same type as package openai's, whose
// Retryable method reports whether a later call may succeed.
//
// A stream stalls when [Config.IdleTimeout] ([DefaultIdleTimeout], 3 minutes, by
// default) passes without a byte of the body after the headers; the API's ping events
// count as bytes. The HTTP stream is closed and the call fails with an error that wraps
// [ErrStalled], retried before the first event and not after, as in package openai.
//
// Cancelling the context, or breaking out of the sequence, closes the HTTP stream at
// once. The API key comes from [Config.APIKey] or ANTHROPIC_API_KEY (else from the SDK's
// credential chain: ANTHROPIC_AUTH_TOKEN, profiles, federation) and is sent in the
// Authorization header only (as SDK v2 sends it); no error or log line of this package
// contains it. With no credential and no base URL, [New] fails naming
// ANTHROPIC_API_KEY: no call goes out without one.
package anthropic
