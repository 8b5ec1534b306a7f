package anthropic

import (
	"errors"
	"net/http"

	ant "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// ErrStalled is wrapped by the error of a call whose response stream sent no byte for
// [Config.IdleTimeout]. It is [github.com/agentd/agentd/runtime/llm/openai.ErrStalled], so
// one errors.Is covers both adapters.
var ErrStalled = provider.ErrStalled

// DefaultIdleTimeout is [Config.IdleTimeout] when it is left 0, as in package openai.
const DefaultIdleTimeout = provider.DefaultIdleTimeout

// ProviderError is a failed call of the API, of Provider "anthropic", with the API's error
// type ("rate_limit_error", "overloaded_error") and message, and the SDK's *anthropic.Error
// (or a transport error) as Err. It is the same type as package openai's ProviderError,
// whose documentation describes its fields: one errors.As covers both adapters.
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
