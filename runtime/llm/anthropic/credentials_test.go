package anthropic_test

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/config"

	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
)

// noCredentials clears every variable the SDK's credential chain reads, for the rest of
// t, and points its profile directory at an empty one.
func noCredentials(t *testing.T) {
	t.Helper()
	for _, v := range []string{
		"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE",
		"ANTHROPIC_FEDERATION_RULE_ID", "ANTHROPIC_ORGANIZATION_ID",
		"ANTHROPIC_IDENTITY_TOKEN_FILE", "ANTHROPIC_IDENTITY_TOKEN",
	} {
		// Setenv restores the variable when t ends; the SDK tells set-but-empty from
		// unset for some of them.
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv("ANTHROPIC_CONFIG_DIR", t.TempDir())
}

// offline is an HTTP client that fails t on any request: New must not let a model
// without a credential reach the network.
func offline(t *testing.T) (*http.Client, *atomic.Int64) {
	var calls atomic.Int64
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		t.Errorf("a request went out: %s %s", r.Method, r.URL)
		return nil, http.ErrUseLastResponse
	})}, &calls
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Without a key, a base URL or any other credential the SDK would find, New fails
// naming ANTHROPIC_API_KEY, as package openai's does, and nothing reaches the network.
func TestNewWithoutKey(t *testing.T) {
	noCredentials(t)
	client, calls := offline(t)
	m, err := anthropic.New(anthropic.Config{Model: adapter.Model, HTTPClient: client})
	if err == nil {
		ssetest.Collect(t, t.Context(), m, providertest.Hello)
		t.Fatalf("New without a key succeeded (and the call made %d requests)", calls.Load())
	}
	if msg := err.Error(); !strings.Contains(msg, "no API key") || !strings.Contains(msg, "ANTHROPIC_API_KEY") {
		t.Errorf("New: %v; want it to say there is no API key and name ANTHROPIC_API_KEY", err)
	}

	// A server of one's own may need no key.
	if _, err := anthropic.New(anthropic.Config{Model: adapter.Model, BaseURL: "http://localhost:4000"}); err != nil {
		t.Errorf("New for a server of one's own: %v", err)
	}
	t.Setenv("ANTHROPIC_API_KEY", providertest.Key)
	if _, err := anthropic.New(anthropic.Config{Model: adapter.Model}); err != nil {
		t.Errorf("New with ANTHROPIC_API_KEY: %v", err)
	}
}

// A credential the SDK's chain finds, other than an API key, is as good as one.
func TestNewWithTheSDKsCredentials(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T)
		wantErr []string
	}{
		{name: "auth token", setup: func(t *testing.T) { t.Setenv("ANTHROPIC_AUTH_TOKEN", "token") }},
		{name: "profile", setup: func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("ANTHROPIC_CONFIG_DIR", dir)
			t.Setenv("ANTHROPIC_PROFILE", "work")
			if err := config.SaveProfile(dir, "work", &config.Config{AuthenticationInfo: config.NewUserOAuthAuthentication("client")}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "default profile", setup: func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("ANTHROPIC_CONFIG_DIR", dir)
			if err := config.SaveProfile(dir, "default", &config.Config{AuthenticationInfo: config.NewUserOAuthAuthentication("client")}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "federation", setup: func(t *testing.T) {
			t.Setenv("ANTHROPIC_FEDERATION_RULE_ID", "fdrl_1")
			t.Setenv("ANTHROPIC_ORGANIZATION_ID", "org_1")
			t.Setenv("ANTHROPIC_IDENTITY_TOKEN", "jwt")
		}},
		// A profile named but missing fails now, naming it, not at the first call.
		{name: "missing profile", setup: func(t *testing.T) { t.Setenv("ANTHROPIC_PROFILE", "nosuch") }, wantErr: []string{`ANTHROPIC_PROFILE="nosuch"`}},
		{name: "federation in part", setup: func(t *testing.T) {
			t.Setenv("ANTHROPIC_FEDERATION_RULE_ID", "fdrl_1")
		}, wantErr: []string{"ANTHROPIC_API_KEY", "without ANTHROPIC_ORGANIZATION_ID, ANTHROPIC_IDENTITY_TOKEN_FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noCredentials(t)
			tc.setup(t)
			client, _ := offline(t)
			_, err := anthropic.New(anthropic.Config{Model: adapter.Model, HTTPClient: client})
			if tc.wantErr == nil {
				if err != nil {
					t.Errorf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New: %v; want it to say %q", err, want)
				}
			}
		})
	}
}

// ANTHROPIC_AUTH_TOKEN alone authenticates the calls, as a bearer token.
func TestAuthTokenIsSent(t *testing.T) {
	noCredentials(t)
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env")
	srv := ssetest.New(t, adapter.Path, sse("text.sse"))
	to, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The model calls the API's own address; the transport takes it to srv.
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host = to.Scheme, to.Host
		return srv.Client().Transport.RoundTrip(r)
	})}
	m, err := anthropic.New(anthropic.Config{Model: adapter.Model, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ssetest.Collect(t, t.Context(), m, providertest.Hello); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer token-from-env" {
		t.Errorf("Authorization = %q, want the token from ANTHROPIC_AUTH_TOKEN", got)
	}
}
