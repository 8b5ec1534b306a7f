package provider_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

func TestError_Text(t *testing.T) {
	sdk := errors.New(`POST "https://api.example/v1/messages": 529 {"type":"error"}`)
	for _, tc := range []struct {
		err  *provider.Error
		want string
	}{
		{&provider.Error{Provider: "openai", Status: 500, Type: "server_error", Message: "The server had an error", Attempts: 3, Err: sdk},
			"openai: 500 Internal Server Error (server_error): The server had an error (after 3 attempts)"},
		{&provider.Error{Provider: "anthropic", Status: 529, Type: "overloaded_error", Message: "Overloaded", Attempts: 3},
			"anthropic: 529 Overloaded (overloaded_error): Overloaded (after 3 attempts)"},
		{&provider.Error{Provider: "anthropic", Status: 520, Type: "api_error", Err: sdk}, "anthropic: 520 (api_error)"},
		{&provider.Error{Provider: "openai", Emitted: true, Err: errors.New("unexpected EOF")},
			"openai: stream failed after the first delta: unexpected EOF"},
		{&provider.Error{Provider: "openai", Err: &provider.StallError{Idle: 50_000_000}, Attempts: 1},
			"openai: call failed: model stream stalled: no bytes from the model for 50ms"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestError_Retryable(t *testing.T) {
	for _, tc := range []struct {
		err  provider.Error
		want bool
	}{
		{provider.Error{Transient: true}, true},
		{provider.Error{Transient: true, Emitted: true}, false},
		{provider.Error{Status: 400}, false},
	} {
		if got := tc.err.Retryable(); got != tc.want {
			t.Errorf("%+v: Retryable() = %t, want %t", tc.err, got, tc.want)
		}
	}
}

func TestNextMayHelp(t *testing.T) {
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"transient", t.Context(), &provider.Error{Status: 429, Transient: true}, true},
		{"the model's key", t.Context(), &provider.Error{Status: 401}, true},
		{"refused by this model", t.Context(), &provider.Error{Status: 400, Type: "invalid_request_error"}, true},
		{"not an adapter's", t.Context(), errors.New("down"), true},
		{"output emitted", t.Context(), &provider.Error{Transient: true, Emitted: true}, false},
		{"the caller gave up", done, &provider.Error{Transient: true}, false},
	} {
		if got := provider.NextMayHelp(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: NextMayHelp = %t, want %t", tc.name, got, tc.want)
		}
	}
}
