package openai

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"net/http"
	"os"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// Provider is the provider part of the names of this package's models.
const Provider = "openai"

// Config configures a [Model].
type Config struct {
	// Model is the model's name at the server: "gpt-4.1-mini", "llama3.2"; required.
	Model string
	// APIKey authenticates the calls; empty means OPENAI_API_KEY. The OpenAI API needs
	// one; a local server such as Ollama takes any, or none.
	APIKey string
	// BaseURL is the API's root, such as "http://localhost:11434/v1" for Ollama; empty
	// means OPENAI_BASE_URL, else the OpenAI API (https://api.openai.com/v1).
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

	// MaxTokens bounds each call's output (max_completion_tokens); 0 leaves it to the
	// server. A request's CallSettings.MaxOutputTokens takes precedence.
	MaxTokens int64
	// Temperature and TopP, when set, are each call's; a request's CallSettings take
	// precedence.
	Temperature, TopP *float64
	// ReasoningEffort ("minimal", "low", "medium", "high") is sent to reasoning models;
	// empty leaves it out.
	ReasoningEffort string
	// OmitReasoning leaves the transcript's reasoning out of requests. By default an
	// assistant message's reasoning goes back as its reasoning_content, the field in
	// which compatible servers (vLLM, llama.cpp, DeepSeek) stream it and read it back.
	OmitReasoning bool

	// Responses speaks the Responses API (POST /responses) instead of Chat Completions:
	// for OpenAI's reasoning models, whose reasoning then carries over from step to step
	// and turn to turn (see responses.go); the model is named "openai-responses:<model>".
	// Servers that mimic OpenAI mostly speak Chat Completions only.
	Responses bool

	// MaxRetries bounds the retries of a call that failed before its first event: 0
	// means 2, negative none (see the package documentation).
	MaxRetries int
	// RetryBackoff is the wait before the first retry, doubled for each next one, with
	// jitter, at most 30 s; a server's Retry-After replaces it. 0 means 500 ms.
	RetryBackoff time.Duration
}

// Model is a Chat Completions model. It is safe for concurrent use.
type Model struct {
	cfg    Config
	name   string
	client oai.Client
	retry  provider.Retrier
}

var _ runtime.Model = (*Model)(nil)

// sdkOptions are the SDK's option constructors, for provider.ClientOptions.
var sdkOptions = provider.SDKOptions[option.RequestOption]{
	MaxRetries: option.WithMaxRetries, APIKey: option.WithAPIKey, BaseURL: option.WithBaseURL,
	HTTPClient: func(c *http.Client) option.RequestOption { return option.WithHTTPClient(c) },
	Middleware: func(m provider.Middleware) option.RequestOption { return option.WithMiddleware(m) },
}

// New returns a model for cfg. The API key and base URL left empty in cfg are read
// from OPENAI_API_KEY and OPENAI_BASE_URL now; with neither a key nor a base URL, New
// fails, since the OpenAI API would refuse every call.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: Config.Model is required")
	}
	key := cmp.Or(cfg.APIKey, os.Getenv("OPENAI_API_KEY"))
	base := cmp.Or(cfg.BaseURL, os.Getenv("OPENAI_BASE_URL"))
	if key == "" && base == "" {
		return nil, errors.New("openai: no API key: set OPENAI_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server")
	}
	opts := provider.ClientOptions(provider.Client{APIKey: key, BaseURL: base, HTTPClient: cfg.HTTPClient, IdleTimeout: cfg.IdleTimeout}, sdkOptions)
	prefix := Provider
	if cfg.Responses {
		prefix = ResponsesProvider
	}
	return &Model{
		cfg:    cfg,
		name:   prefix + ":" + cfg.Model,
		client: oai.NewClient(opts...),
		retry:  provider.Retrier{Provider: prefix, Policy: provider.NewPolicy(cfg.MaxRetries, cfg.RetryBackoff)},
	}, nil
}

// Name returns "openai:<model>", or "openai-responses:<model>" with Config.Responses.
// NativeOutput reports that the model constrains a reply to a JSON Schema
// (runtime.ModelRequest.Output): a typed run asks it for its answer as
// response_format, or text.format on the Responses API. A compatible server that
// ignores it is caught all the same: the run validates every reply.
func (m *Model) NativeOutput() bool { return true }

func (m *Model) Name() string { return m.name }

// Stream calls the model, retrying as the package documentation says. The sequence ends
// with a ModelFinish event, or with an error: a [*ProviderError], or ctx's error when ctx
// is done. It is single-use and starts no goroutine; breaking out of it closes the HTTP
// stream.
func (m *Model) Stream(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	if m.cfg.Responses {
		return provider.Stream(ctx, &m.retry, req, m.responsesParams, m.responsesOnce)
	}
	return provider.Stream(ctx, &m.retry, req, m.params, m.once)
}

// once makes one call and yields its events. It returns the call's failure, nil when it
// succeeded or the consumer stopped.
func (m *Model) once(ctx context.Context, params oai.ChatCompletionNewParams, yield func(runtime.ModelEvent) bool) *ProviderError {
	var res *http.Response
	d := decoder{yield: yield}
	stream := m.client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&res))
	return provider.Read(stream, d.chunk, d.finish, func(err error) *ProviderError { return classify(err, res) })
}
