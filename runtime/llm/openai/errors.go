package openai

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// ErrStalled is wrapped by the error of a call whose response stream sent no byte for
// [Config.IdleTimeout]; the error's text says for how long. It is the same error as
// package anthropic's ErrStalled, so one errors.Is check covers both adapters.
var ErrStalled = provider.ErrStalled

// DefaultIdleTimeout is [Config.IdleTimeout] when it is left 0: long enough for a
// reasoning model's quiet spells, short enough that a dead stream fails the call rather
// than holding the run until its deadline.
const DefaultIdleTimeout = provider.DefaultIdleTimeout

// ProviderError is a failed call of the API: its Provider ("openai"), the HTTP Status
// (0 when the call failed otherwise), the server's error Type and Message, the
// RetryAfter it asked for, whether it is Transient (the same call may succeed later),
// whether output was Emitted first, the Attempts made, and the underlying Err (the
// SDK's *openai.Error, a transport error, one that wraps [ErrStalled],
// [runtime.ErrMissingFinishReason]). Retryable reports whether a later call may succeed.
// Its Error text never holds a request header or the API key.
//
// It is the same type as package anthropic's ProviderError: one errors.As covers both
// adapters, and Provider tells them apart.
type ProviderError = provider.Error

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
		return pe.FromResponse(res)
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
	return pe.FromTransport()
}

// transientType reports whether an error event's type or code says a retry may help.
func transientType(t string) bool {
	t = strings.ToLower(t)
	return strings.Contains(t, "server_error") || strings.Contains(t, "rate_limit") ||
		strings.Contains(t, "overloaded") || strings.Contains(t, "timeout") || t == "api_error"
}
