package anthropic

import (
	"errors"
	"net/http"

	ant "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// ErrStalled is wrapped by the error of a call whose response stream sent no byte for
// [Config.IdleTimeout]; the error's text says for how long. Package openai's ErrStalled is
// the same error, so one errors.Is covers both adapters.
var ErrStalled = provider.ErrStalled

// DefaultIdleTimeout is [Config.IdleTimeout] when it is left 0: long enough for extended
// thinking's quiet spells, short enough that a dead stream fails the call rather than
// holding the run until its deadline.
const DefaultIdleTimeout = provider.DefaultIdleTimeout

// ProviderError is a failed call of the Messages API. Provider is "anthropic"; Status is
// the HTTP status (0 when the call failed otherwise); Type and Message are the API's
// error ("rate_limit_error", "overloaded_error") and its text; RetryAfter is the wait the
// API asked for; Transient says the same call may succeed later, Emitted that output
// came first, Attempts how many calls were made; Err is the SDK's *anthropic.Error, a
// transport error, or one that wraps [ErrStalled] or [runtime.ErrMissingFinishReason].
// Retryable reports whether a later call may succeed. Its Error text never holds a
// request header or the API key. Package openai's ProviderError is the same type: one
// errors.As covers both adapters, and Provider tells them apart.
type ProviderError = provider.Error

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
		return pe.FromResponse(res)
	}
	return pe.FromTransport()
}

// transientType reports whether an error type says a retry may help.
func transientType(t string) bool {
	switch t {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}
