package agents

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/llm/fallback"
	"github.com/agentd/agentd/runtime/llm/openai"
	"github.com/agentd/agentd/runtime/llm/workload"
)

// ErrUnknownModel is wrapped by the errors of resolvers made by [NewModelResolver] for a
// spec that names no model they know.
var ErrUnknownModel = errors.New("unknown model")

// ModelResolver returns the model a spec names. Specs read "provider:model"; a provider
// may also accept its name alone ("demo"). It must be safe for concurrent use, and so
// must the models it returns.
type ModelResolver func(spec string) (runtime.Model, error)

// ModelProvider makes the models of one provider, for [NewModelResolver].
type ModelProvider struct {
	// Name is the part of a spec before the colon: "demo", "workload", "openai".
	Name string
	// Forms lists the specs the provider accepts, for error messages:
	// "workload:small".
	Forms []string
	// New returns the model named by the part of the spec after "<Name>:", or "" for a
	// spec that is Name alone. Its error wraps [ErrUnknownModel] when the provider has no
	// such model.
	New func(model string) (runtime.Model, error)
}

// BuiltinModelProviders returns the providers built into agentd: "demo" (the demo model,
// streaming with demoDelay between deltas) and "workload" (the benchmark workload's
// replay, one model per size).
func BuiltinModelProviders(demoDelay time.Duration) []ModelProvider {
	var sizes []string
	for _, s := range workload.Sizes() {
		sizes = append(sizes, "workload:"+s.Name)
	}
	return []ModelProvider{
		{
			Name:  "demo",
			Forms: []string{"demo", demo.ModelName},
			New: func(model string) (runtime.Model, error) {
				if model != "" && "demo:"+model != demo.ModelName {
					return nil, fmt.Errorf("%w: the demo provider has one model, %s", ErrUnknownModel, demo.ModelName)
				}
				return demo.New(demo.Config{Delay: demoDelay}), nil
			},
		},
		{
			Name:  "workload",
			Forms: sizes,
			New: func(model string) (runtime.Model, error) {
				// "<size>@<deltas a second>" paces each run as a provider would.
				name, pace, paced := strings.Cut(model, "@")
				size, err := workload.Lookup(name)
				if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrUnknownModel, err)
				}
				perSecond := 0
				if paced {
					if perSecond, err = strconv.Atoi(pace); err != nil || perSecond <= 0 {
						return nil, fmt.Errorf("%w: the workload's pace %q is not a number of deltas a second (workload:%s@50)", ErrUnknownModel, pace, name)
					}
				}
				return workload.New(size).WithPace(perSecond), nil
			},
		},
	}
}

// laterProviders are providers agentd will have, named in errors until they are added.
var laterProviders = []string{"openai", "anthropic"}

// NewModelResolver returns a resolver that hands each spec to the provider its prefix
// names. A provider listed twice: the last one wins, so a caller can replace a built-in
// one. A spec that names no provider, or whose provider's error wraps [ErrUnknownModel],
// gets an error that wraps ErrUnknownModel and lists the supported forms.
func NewModelResolver(providers ...ModelProvider) ModelResolver {
	last := map[string]int{}
	for i, p := range providers {
		last[p.Name] = i
	}
	byName := map[string]ModelProvider{}
	var forms []string
	for i, p := range providers {
		if last[p.Name] == i && p.New != nil {
			byName[p.Name] = p
			forms = append(forms, p.Forms...)
		}
	}
	supported := "supported models: " + strings.Join(forms, ", ")
	var later []string
	for _, name := range laterProviders {
		if _, ok := byName[name]; !ok {
			later = append(later, name+":…")
		}
	}
	if len(later) > 0 {
		supported += " (" + strings.Join(later, " and ") + " arrive with the provider adapters)"
	}
	return func(spec string) (runtime.Model, error) {
		if spec == "" {
			return nil, fmt.Errorf("%w: no model named; %s", ErrUnknownModel, supported)
		}
		name, model, _ := strings.Cut(spec, ":")
		p, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("model %q: %w: no provider %q; %s", spec, ErrUnknownModel, name, supported)
		}
		m, err := p.New(model)
		switch {
		case errors.Is(err, ErrUnknownModel):
			return nil, fmt.Errorf("model %q: %w; %s", spec, err, supported)
		case err != nil:
			return nil, fmt.Errorf("model %q: %w", spec, err)
		}
		return m, nil
	}
}

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
	// PromptCache, false, turns off the prompt-cache breakpoints anthropic models put on
	// the tools, the system prompt and the history (on by default: a tool loop's calls
	// then read their common prefix from the cache). OpenAI caches prompts by itself.
	PromptCache *bool `yaml:"prompt_cache,omitempty"`
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
	hosted := provider == openai.Provider || provider == openai.ResponsesProvider || provider == anthropic.Provider
	noCache := a.Settings.PromptCache != nil && !*a.Settings.PromptCache && provider == anthropic.Provider
	// The idle timeout means nothing to a model without an HTTP stream (demo, workload).
	if a.BaseURL == "" && a.APIKeyEnv == "" && (a.Settings.IdleTimeout == 0 || !hosted) && !noCache {
		return resolve(spec)
	}
	if !hosted {
		return nil, fmt.Errorf("base_url and api_key_env apply to openai:…, openai-responses:… and anthropic:… models, not %q", spec)
	}
	key := ""
	if a.APIKeyEnv != "" {
		key = os.Getenv(a.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("api_key_env: the variable %s is not set", a.APIKeyEnv)
		}
	}
	idle := time.Duration(a.Settings.IdleTimeout)
	if provider == openai.Provider || provider == openai.ResponsesProvider {
		cfg := openai.Config{BaseURL: a.BaseURL, APIKey: key, IdleTimeout: idle, Responses: provider == openai.ResponsesProvider}
		return OpenAIModelProvider(cfg).New(name)
	}
	return AnthropicModelProvider(anthropic.Config{BaseURL: a.BaseURL, APIKey: key, IdleTimeout: idle, NoPromptCache: noCache}).New(name)
}
