// Package openai adapts the Chat Completions API to [runtime.Model], with OpenAI's
// official Go SDK (github.com/openai/openai-go/v3). It speaks to the OpenAI API and to
// every OpenAI-compatible server (Ollama, vLLM, the llama.cpp server, OpenRouter,
// LM Studio) through [Config.BaseURL].
//
// A call streams (stream_options.include_usage set) and is normalised to the runtime's
// model events:
//
//   - delta.content and delta.refusal become text deltas; delta.reasoning_content (or
//     delta.reasoning), where a compatible server streams one, becomes reasoning deltas.
//   - delta.tool_calls become tool-call deltas carrying the server's id, name, argument
//     fragment and index. The index is -1 when the server leaves it out. The runtime joins
//     fragments by id, falling back to the index: a server that numbers every parallel
//     call 0 (Ollama) but sends a fresh id with each is handled, and so is one that sends
//     no index at all.
//   - The usage of the final chunk becomes one usage event; the finish reason
//     (stop, length, tool_calls, content_filter) becomes the finish event, sent when the
//     stream ends. A "stop" after tool calls is reported as tool calls. A stream that
//     ends without a finish reason fails with an error that wraps
//     [runtime.ErrMissingFinishReason].
//
// The transcript converts to Chat Completions messages: system messages as system
// messages; user text and media (images as image_url parts, PDFs as file parts); an
// assistant message's text as its content, its tool calls with their exact argument
// text, and its reasoning as reasoning_content (see [Config.OmitReasoning]); each tool
// result as a tool message, its output's text or JSON as the content, prefixed with
// "Error: " when it failed. Images a tool returned follow the tool messages in a user
// message, since tool messages carry text only.
//
// # Retries
//
// A call that fails before its first event (HTTP 408, 409, 429 and 5xx, an error event
// at the start of the stream, a refused, reset or dropped connection, a stalled stream)
// is retried inside [Model.Stream], up to [Config.MaxRetries] times (2 by default), after
// the server's Retry-After (or retry-after-ms) when it sends one (asking for more than a
// minute, it gets no retry), else after an exponential backoff with jitter from
// [Config.RetryBackoff]. These
// are the only retries of a model call: the SDK's own are off, and the runtime's loop
// does not call a failed model again (it finishes the run FAILED). Nothing is retried
// once an event has been yielded: a failure then ends the sequence with a
// [*ProviderError] whose Emitted field is set. MaxRetries negative turns retries off.
//
// The final error is a [*ProviderError], the same type as package anthropic's: its
// Retryable method reports whether a later call may succeed (a transient failure before
// the first event). A model named with fallbacks (package fallback) moves on to the next
// one after such an error.
//
// # Stalled streams
//
// A server that sends the response headers and then goes quiet would hold the call, and
// the run, until the caller's context ends. Instead, once [Config.IdleTimeout]
// ([DefaultIdleTimeout], 3 minutes, by default) passes without a byte of the body, the
// HTTP stream is closed and the call fails with an error that wraps [ErrStalled] and says
// "no bytes from the model for 3m0s". Before the first event that is a connection
// failure like any other, retried as above; after it, the sequence ends with a
// [*ProviderError] whose Emitted field is set. Only the wait for the server counts, not
// the time the consumer takes between events. Set the timeout longer for a reasoning
// model on a server that sends nothing while it thinks; the wait for the response
// headers is the HTTP client's to bound.
//
// # Cancellation and keys
//
// Cancelling the context, or breaking out of the sequence, closes the HTTP stream at
// once. The API key comes from [Config.APIKey] or OPENAI_API_KEY and is sent in the
// Authorization header only; no error or log line of this package contains it.
package openai
