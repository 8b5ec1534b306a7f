package anthropic

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/runtime/llm/internal/retry"
	"github.com/agentd/agentd/runtime/llm/internal/stall"
)

// ErrStalled is wrapped by the error of a call whose response stream sent no byte for
// [Config.IdleTimeout]; the error's text says for how long. It is the same error as
// package openai's ErrStalled, so one errors.Is check covers both adapters.
var ErrStalled = stall.ErrStalled

// DefaultIdleTimeout is [Config.IdleTimeout] when it is left 0: long enough for a
// reasoning model's quiet spells, short enough that a dead stream fails the call rather
// than holding the run until its deadline.
const DefaultIdleTimeout = stall.DefaultIdleTimeout

// ProviderError is a failed call of the Messages API. Its Error text holds the status,
// the API's error type and message, never a request header or the API key.
type ProviderError struct {
	// Status is the HTTP status of an error response; 0 when the call failed otherwise:
	// a connection failure, an error event in the stream, a stream cut short.
	Status int
	// Type is the API's error type: "rate_limit_error", "overloaded_error".
	Type string
	// Message is the API's explanation.
	Message string
	// RetryAfter is the wait the server asked for (retry-after-ms, retry-after); 0 when
	// it asked for none.
	RetryAfter time.Duration
	// Transient says the same call may succeed later: HTTP 408, 409, 429, 5xx and 529,
	// error events of the overloaded, api, rate-limit and timeout kinds, connection
	// failures, a stalled stream, a stream that ended before its stop reason.
	Transient bool
	// Emitted says the call had yielded events before it failed; it was not retried.
	Emitted bool
	// Attempts is the number of calls made, retries included.
	Attempts int
	// Err is the underlying error: the SDK's *anthropic.Error, a transport error, one
	// that wraps [ErrStalled], [runtime.ErrMissingFinishReason].
	Err error

	retryable bool
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	b.WriteString("anthropic: ")
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "%d %s", e.Status, cmp.Or(http.StatusText(e.Status), "Overloaded"))
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
		b.WriteString(": " + e.Err.Error())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *ProviderError) Unwrap() error { return e.Err }

// Retryable reports whether the runtime should retry the call: only when the adapter
// was configured not to retry (Config.MaxRetries negative) and the failure is
// transient and came before the first event. Once the adapter has retried, it reports
// false.
func (e *ProviderError) Retryable() bool { return e.retryable }

// classify turns a failed call into a ProviderError. res is the HTTP response, if one
// came.
func classify(err error, res *http.Response) *ProviderError {
	pe := &ProviderError{Err: err}
	if aerr, ok := errors.AsType[*ant.Error](err); ok {
		pe.Type, pe.Message = string(aerr.Type()), aerr.Message
		if aerr.StatusCode < 400 {
			// An error event in a stream that had started well.
			pe.Transient = transientType(pe.Type)
			return pe
		}
		pe.Status = aerr.StatusCode
		if aerr.Response != nil {
			res = aerr.Response
		}
	}
	if res != nil && res.StatusCode >= 400 {
		pe.Status = res.StatusCode
		pe.RetryAfter = retry.After(res.Header, time.Now())
		pe.Transient = retry.StatusTransient(res.StatusCode, res.Header)
		return pe
	}
	// A stall is a failure of the connection too: the server may answer a new one.
	pe.Transient = retry.ConnectionError(err) || errors.Is(err, ErrStalled)
	return pe
}

// transientType reports whether an error type says a retry may help.
func transientType(t string) bool {
	switch t {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}
