package service

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/fallback"
	"github.com/agentd/agentd/runtime/llm/openai"
)

// ModelSettings tunes an agent's model calls; unset fields take the provider's defaults.
type ModelSettings struct {
	Temperature *float64 `yaml:"temperature,omitempty"`
	TopP        *float64 `yaml:"top_p,omitempty"`
	MaxTokens   int64    `yaml:"max_tokens,omitempty"`
	// IdleTimeout bounds the wait for the next byte of a model's streamed answer: when
	// it passes without one, the call fails as stalled (retried if nothing was streamed
	// yet, else ending the run as failed). 0 means the adapters' default, 3 minutes;
	// negative is an error. It applies to the agent's openai and anthropic models,
	// fallbacks included; raise it for a reasoning model on a server that sends nothing
	// while it thinks.
	IdleTimeout Duration `yaml:"idle_timeout,omitempty"`
}

func (s ModelSettings) callSettings() runtime.CallSettings {
	return runtime.CallSettings{Temperature: s.Temperature, TopP: s.TopP, MaxOutputTokens: s.MaxTokens}
}

// resolveModel makes the agent's model from spec: through the registry's resolver, or,
// when the agent names a base URL, a key variable or an idle timeout of its own, through
// its provider with those; then wrapped with the agent's fallback models, tried in order
// when a model fails before it streams anything, each fallback logged to log. A fallback
// on another provider takes that provider's defaults, and the agent's idle timeout.
func (a AgentConfig) resolveModel(spec string, resolve ModelResolver, log *slog.Logger) (runtime.Model, error) {
	model, err := a.primaryModel(spec, resolve)
	if err != nil {
		return nil, err
	}
	if len(a.FallbackModels) == 0 {
		return model, nil
	}
	models := []runtime.Model{model}
	provider, _, _ := strings.Cut(spec, ":")
	// Another provider's models take its defaults; the idle timeout is the agent's.
	other := a
	other.BaseURL, other.APIKeyEnv = "", ""
	for i, fb := range a.FallbackModels {
		// A fallback on the agent's provider uses the agent's server and key too.
		from := other
		if p, _, _ := strings.Cut(fb, ":"); p == provider {
			from = a
		}
		m, err := from.primaryModel(fb, resolve)
		if err != nil {
			return nil, fmt.Errorf("fallback_models[%d]: %w", i, err)
		}
		models = append(models, m)
	}
	return &fallback.Chain{Models: models, Logger: log}, nil
}

func (a AgentConfig) primaryModel(spec string, resolve ModelResolver) (runtime.Model, error) {
	provider, name, _ := strings.Cut(spec, ":")
	hosted := provider == openai.Provider || provider == anthropic.Provider
	// The idle timeout means nothing to a model without an HTTP stream (demo, workload).
	if a.BaseURL == "" && a.APIKeyEnv == "" && (a.Settings.IdleTimeout == 0 || !hosted) {
		return resolve(spec)
	}
	if !hosted {
		return nil, fmt.Errorf("base_url and api_key_env apply to openai:… and anthropic:… models, not %q", spec)
	}
	key := ""
	if a.APIKeyEnv != "" {
		key = os.Getenv(a.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("api_key_env: the variable %s is not set", a.APIKeyEnv)
		}
	}
	idle := time.Duration(a.Settings.IdleTimeout)
	if provider == openai.Provider {
		return OpenAIModelProvider(openai.Config{BaseURL: a.BaseURL, APIKey: key, IdleTimeout: idle}).New(name)
	}
	return AnthropicModelProvider(anthropic.Config{BaseURL: a.BaseURL, APIKey: key, IdleTimeout: idle}).New(name)
}
