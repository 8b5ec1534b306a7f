package openai

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentd/agentd/runtime/llm/internal/retry"
	"github.com/agentd/agentd/runtime/llm/internal/stall"
)

// ErrStalled is wrapped by the error of a call whose response stream sent no byte for
// [Config.IdleTimeout]; the error's text says for how long. It is the same error as
// package anthropic's ErrStalled, so one errors.Is check covers both adapters.
var ErrStalled = stall.ErrStalled

// DefaultIdleTimeout is [Config.IdleTimeout] when it is left 0: long enough for a
// reasoning model's quiet spells, short enough that a dead stream fails the call rather
// than holding the run until its deadline.
const DefaultIdleTimeout = stall.DefaultIdleTimeout

// ProviderError is a failed call of the Chat Completions API. Its Error text holds the
// status, the server's error type and message, never a request header or the API key.
type ProviderError struct {
	// Status is the HTTP status of an error response; 0 when the call failed otherwise:
	// a connection failure, an error event in the stream, a stream cut short.
	Status int
	// Type is the server's error type or code: "rate_limit_exceeded", "server_error".
	Type string
	// Message is the server's explanation.
	Message string
	// RetryAfter is the wait the server asked for (retry-after-ms, Retry-After); 0 when
	// it asked for none.
	RetryAfter time.Duration
	// Transient says the same call may succeed later: HTTP 408, 409, 429 and 5xx,
	// error events of the server_error and rate-limit kinds, connection failures, a
	// stalled stream, a stream that ended before its finish reason.
	Transient bool
	// Emitted says the call had yielded events before it failed; it was not retried.
	Emitted bool
	// Attempts is the number of calls made, retries included.
	Attempts int
	// Err is the underlying error: the SDK's *openai.Error, a transport error, one that
	// wraps [ErrStalled], [runtime.ErrMissingFinishReason].
	Err error

	retryable bool
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	b.WriteString("openai: ")
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "%d %s", e.Status, http.StatusText(e.Status))
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
	case e.Err != nil:
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
// came: the SDK reports an error response whose body is not JSON by that JSON's error
// alone, losing the status.
func classify(err error, res *http.Response) *ProviderError {
	pe := &ProviderError{Err: err}
	if aerr, ok := errors.AsType[*oai.Error](err); ok {
		pe.Status, pe.Type, pe.Message = aerr.StatusCode, cmp.Or(aerr.Type, aerr.Code), aerr.Message
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
	if se, ok := errors.AsType[*ssestream.StreamError](err); ok {
		var body struct {
			Error struct {
				Message string          `json:"message"`
				Type    string          `json:"type"`
				Code    json.RawMessage `json:"code"`
			} `json:"error"`
		}
		var code string
		if json.Unmarshal(se.Event.Data, &body) == nil {
			json.Unmarshal(body.Error.Code, &code) // a number or null leaves it empty
			pe.Type, pe.Message = cmp.Or(body.Error.Type, code), body.Error.Message
		}
		pe.Transient = transientType(body.Error.Type) || transientType(code)
		return pe
	}
	// A stall is a failure of the connection too: the server may answer a new one.
	pe.Transient = retry.ConnectionError(err) || errors.Is(err, ErrStalled)
	return pe
}

// transientType reports whether an error event's type or code says a retry may help.
func transientType(t string) bool {
	t = strings.ToLower(t)
	return strings.Contains(t, "server_error") || strings.Contains(t, "rate_limit") ||
		strings.Contains(t, "overloaded") || strings.Contains(t, "timeout") || t == "api_error"
}
