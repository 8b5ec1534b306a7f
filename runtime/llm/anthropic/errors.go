package anthropic

import (
	"errors"
	"net/http"

	ant "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// ErrStalled is wrapped by the error of a call whose response stream sent no byte for
// [Config.IdleTimeout]; the error's text says for how long. It is the same error as
// package openai's ErrStalled, so one errors.Is check covers both adapters.
var ErrStalled = provider.ErrStalled

// DefaultIdleTimeout is [Config.IdleTimeout] when it is left 0: long enough for a
// reasoning model's quiet spells, short enough that a dead stream fails the call rather
// than holding the run until its deadline.
const DefaultIdleTimeout = provider.DefaultIdleTimeout

// ProviderError is a failed call of the API: its Provider ("anthropic"), the HTTP
// Status (0 when the call failed otherwise), the API's error Type ("rate_limit_error",
// "overloaded_error") and Message, the RetryAfter it asked for, whether it is Transient
// (the same call may succeed later), whether output was Emitted first, the Attempts
// made, and the underlying Err (the SDK's *anthropic.Error, a transport error, one that
// wraps [ErrStalled], [runtime.ErrMissingFinishReason]). Retryable reports whether a
// later call may succeed. Its Error text never holds a request header or the API key.
//
// It is the same type as package openai's ProviderError: one errors.As covers both
// adapters, and Provider tells them apart.
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
