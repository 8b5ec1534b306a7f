package anthropic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// Provider is the provider part of the names of this package's models.
const Provider = "anthropic"

// DefaultMaxTokens is max_tokens when neither the request nor the Config sets it.
const DefaultMaxTokens = 8192

// Config configures a [Model].
type Config struct {
	// Model is the model's name: "claude-sonnet-4-5", "claude-opus-4-1"; required.
	Model string
	// APIKey authenticates the calls; empty means ANTHROPIC_API_KEY, else the SDK's
	// credential chain (ANTHROPIC_AUTH_TOKEN, ANTHROPIC_PROFILE, …).
	APIKey string
	// BaseURL is the API's root; empty means ANTHROPIC_BASE_URL, else
	// https://api.anthropic.com.
	BaseURL string
	// HTTPClient makes the requests; nil means the SDK's default, with a connection pool
	// of the Model's own. Its timeout, if any, bounds a whole streamed call. Its transport
	// must end a request when the request's context ends, as net/http's does: the idle
	// timeout works by cancelling it.
	HTTPClient *http.Client
	// IdleTimeout bounds the wait for the next byte of a streamed response, once its
	// headers have come: when it passes without one, the call fails with an error that
	// wraps [ErrStalled] (see the package documentation). 0 means
	// [DefaultIdleTimeout]; negative means no bound. Only time spent waiting for the
	// server counts, not time the consumer takes between events.
	IdleTimeout time.Duration

	// MaxTokens is each call's max_tokens; 0 means DefaultMaxTokens, plus the thinking
	// budget. A request's CallSettings.MaxOutputTokens takes precedence.
	MaxTokens int64
	// ThinkingBudget, when positive, turns extended thinking on with that many tokens
	// (thinking.type "enabled"); it must be less than max_tokens.
	ThinkingBudget int64
	// AdaptiveThinking lets the model decide how much to think (thinking.type
	// "adaptive"), on models that support it; it takes precedence over ThinkingBudget.
	AdaptiveThinking bool

	// NoPromptCache turns prompt caching off: by default every call marks the tool
	// definitions, the system prompt and the history for the API's prompt cache (see
	// markCache), so that the calls of a tool loop read their common prefix from the
	// cache at a tenth of the input price, having written it once at 1.25 times.
	// Usage.CacheReadInputTokens and CacheCreationInputTokens report both.
	NoPromptCache bool

	// MaxRetries bounds the retries of a call that failed before its first event: 0
	// means 2, negative none (see package openai's documentation, which this package
	// follows).
	MaxRetries int
	// RetryBackoff is the wait before the first retry, doubled for each next one, with
	// jitter, at most 30 s; a server's retry-after replaces it. 0 means 500 ms.
	RetryBackoff time.Duration
}

// Model is a Messages API model. It is safe for concurrent use.
type Model struct {
	cfg    Config
	name   string
	client ant.Client
	retry  provider.Retrier
}

var _ runtime.Model = (*Model)(nil)

// sdkOptions are the SDK's option constructors, for provider.ClientOptions.
var sdkOptions = provider.SDKOptions[option.RequestOption]{
	MaxRetries: option.WithMaxRetries, APIKey: option.WithAPIKey, BaseURL: option.WithBaseURL,
	HTTPClient: func(c *http.Client) option.RequestOption { return option.WithHTTPClient(c) },
	Middleware: func(m provider.Middleware) option.RequestOption { return option.WithMiddleware(m) },
}

// New returns a model for cfg. The API key and base URL left empty in cfg are read from
// ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL now. With neither, the SDK's credential chain
// must find a credential now (ANTHROPIC_AUTH_TOKEN, a profile, federation), or New fails
// naming ANTHROPIC_API_KEY, since the API would refuse every call.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic: Config.Model is required")
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens + max(cfg.ThinkingBudget, 0)
	}
	if cfg.ThinkingBudget > 0 && !cfg.AdaptiveThinking && cfg.ThinkingBudget >= cfg.MaxTokens {
		return nil, fmt.Errorf("anthropic: ThinkingBudget %d must be less than MaxTokens %d", cfg.ThinkingBudget, cfg.MaxTokens)
	}
	key := cmp.Or(cfg.APIKey, os.Getenv("ANTHROPIC_API_KEY"))
	base := cmp.Or(cfg.BaseURL, os.Getenv("ANTHROPIC_BASE_URL"))
	if key == "" && base == "" {
		if err := checkCredentialChain(); err != nil {
			return nil, err
		}
	}
	opts := provider.ClientOptions(provider.Client{APIKey: key, BaseURL: base, HTTPClient: cfg.HTTPClient, IdleTimeout: cfg.IdleTimeout}, sdkOptions)
	return &Model{
		cfg:    cfg,
		name:   Provider + ":" + cfg.Model,
		client: ant.NewClient(opts...),
		retry:  provider.Retrier{Provider: Provider, Policy: provider.NewPolicy(cfg.MaxRetries, cfg.RetryBackoff)},
	}, nil
}

// Name returns "anthropic:<model>".
// ForcesTool reports whether the model can be made to call a named tool
// (runtime.ModelRequest.ToolChoice): not with extended thinking on, which the API
// refuses a forced tool_choice with.
func (m *Model) ForcesTool() bool { return !m.cfg.AdaptiveThinking && m.cfg.ThinkingBudget <= 0 }

func (m *Model) Name() string { return m.name }

// Stream calls the model, retrying as the package documentation says. The sequence ends
// with a ModelFinish event, or with an error: a [*ProviderError], or ctx's error when ctx
// is done. It is single-use and starts no goroutine; breaking out of it closes the HTTP
// stream.
func (m *Model) Stream(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	return provider.Stream(ctx, &m.retry, req, m.params, m.once)
}

// once makes one call and yields its events. It returns the call's failure, nil when it
// succeeded or the consumer stopped.
func (m *Model) once(ctx context.Context, params ant.MessageNewParams, yield func(runtime.ModelEvent) bool) *ProviderError {
	var res *http.Response
	d := decoder{yield: yield}
	stream := m.client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&res))
	return provider.Read(stream, d.event, d.finish, func(err error) *ProviderError { return classify(err, res) })
}
