package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error is a failed call of a provider's API: the error an adapter's Stream ends with,
// which packages openai and anthropic name ProviderError. Its Error text holds the
// provider, the status, the server's error type and message, never a request header or
// the API key.
type Error struct {
	// Provider names the adapter, "openai" or "anthropic"; the Error text starts with it.
	Provider string
	// Status is the HTTP status of an error response; 0 when the call failed otherwise:
	// a connection failure, an error event in the stream, a stream cut short, a request
	// the adapter could not build.
	Status int
	// Type is the server's error type or code: "rate_limit_exceeded", "overloaded_error".
	Type string
	// Message is the server's explanation.
	Message string
	// RetryAfter is the wait the server asked for (retry-after-ms, Retry-After); 0 when
	// it asked for none.
	RetryAfter time.Duration
	// Transient says the same call may succeed later: HTTP 408, 409, 429 and 5xx
	// (Anthropic's 529 included), error events of the overloaded, server-error,
	// rate-limit and timeout kinds, connection failures, a stalled stream, a stream that
	// ended before its finish reason.
	Transient bool
	// Emitted says the call had yielded events before it failed; it was not retried.
	Emitted bool
	// Attempts is the number of calls made, retries included.
	Attempts int
	// Err is the underlying error: the SDK's error, a transport error, one that wraps
	// [ErrStalled], or runtime.ErrMissingFinishReason.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider + ": ")
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "%d", e.Status)
		if text := statusText(e.Status); text != "" {
			b.WriteString(" " + text)
		}
	case e.Emitted:
		b.WriteString("stream failed after the first delta")
	default:
		b.WriteString("call failed")
	}
	if e.Type != "" {
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	switch {
	case e.Message != "":
		b.WriteString(": " + e.Message)
	case e.Err != nil && e.Type == "":
		// With a type, the SDK's error text adds only the raw body and the URL.
		b.WriteString(": " + e.Err.Error())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// statusText is http.StatusText, knowing Anthropic's 529.
func statusText(status int) string {
	if status == 529 {
		return "Overloaded"
	}
	return http.StatusText(status)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the same call may succeed if made again later: the failure
// was transient and came before the first event. The adapter has already retried it as
// often as its policy allows, so a caller that calls again should wait first.
func (e *Error) Retryable() bool { return e.Transient && !e.Emitted }

// NextMayHelp reports whether another model may answer a call that failed with err,
// for a chain of models (runtime/llm/fallback) to decide whether to try its next one.
// It does not when the call's context is done (the caller gave up) nor once the failed
// call emitted output (the consumer has shown it). Every other failure may be the
// model's own, and another model may answer: one down, overloaded or rate limited past
// its retries (transient), one whose key, model name or server is wrong (401, 403, 404,
// no answer), one that refuses a request another takes (a 400 "model not loaded", a
// transcript too long for it). An error that is not an [*Error] is judged by the
// context alone.
func NextMayHelp(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if pe, ok := errors.AsType[*Error](err); ok && pe.Emitted {
		return false
	}
	return true
}
