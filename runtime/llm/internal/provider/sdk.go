package provider

import (
	"net/http"
	"time"

	"github.com/agentd/agentd/runtime"
)

// Middleware is an HTTP middleware of the type both SDKs' option.WithMiddleware take.
type Middleware = func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error)

// Client is what an adapter's SDK client is made from: its Config's connection settings,
// with the empty ones already read from the environment.
type Client struct {
	APIKey, BaseURL string
	HTTPClient      *http.Client
	// IdleTimeout is the Config's setting, as [IdleTimeout] reads it.
	IdleTimeout time.Duration
}

// SDKOptions are an SDK's own option constructors: each SDK has an option type of its own,
// which [ClientOptions] builds through these.
type SDKOptions[O any] struct {
	MaxRetries      func(int) O
	APIKey, BaseURL func(string) O
	HTTPClient      func(*http.Client) O
	Middleware      func(Middleware) O
}

// ClientOptions returns the options an adapter's SDK client is made with: no retries of
// the SDK's own (the adapter's [Retrier] retries, and stops at the first event), the key,
// the base URL and the HTTP client when c sets them, and the stall middleware of c's idle
// timeout.
func ClientOptions[O any](c Client, sdk SDKOptions[O]) []O {
	opts := []O{sdk.MaxRetries(0)}
	if c.APIKey != "" {
		opts = append(opts, sdk.APIKey(c.APIKey))
	}
	if c.BaseURL != "" {
		opts = append(opts, sdk.BaseURL(c.BaseURL))
	}
	if c.HTTPClient != nil {
		opts = append(opts, sdk.HTTPClient(c.HTTPClient))
	}
	if idle := IdleTimeout(c.IdleTimeout); idle > 0 {
		opts = append(opts, sdk.Middleware(StallMiddleware(idle)))
	}
	return opts
}

// SDKStream is a streamed call of either SDK (their ssestream.Stream[T]).
type SDKStream[T any] interface {
	Next() bool
	Current() T
	Err() error
	Close() error
}

// Read reads one streamed call to its end: decode takes each event of s and returns false
// to stop (the consumer stopped, or the stream said the call failed, which the decoder
// keeps); a failure of the stream is classify's; once s ends well, finish checks that
// the call ended as it should. It returns the call's failure, nil when it succeeded or
// decode stopped it, and closes s.
func Read[T any](s SDKStream[T], decode func(T) bool, finish func() *Error, classify func(error) *Error) *Error {
	defer s.Close()
	for s.Next() {
		if !decode(s.Current()) {
			return nil
		}
	}
	if err := s.Err(); err != nil {
		return classify(err)
	}
	return finish()
}

// Served holds the model a response names until the call's first event, which it
// precedes as a [runtime.ModelResponseInfo], so that a call failing before any event has
// still emitted nothing and may be retried.
type Served struct {
	name     string
	reported bool
}

// Named records the served model, the first name given that is not empty.
func (s *Served) Named(name string) {
	if s.name == "" {
		s.name = name
	}
}

// Send yields ev, preceded by the report of the served model when it is the first event.
// It returns false once yield has.
func (s *Served) Send(yield func(runtime.ModelEvent) bool, ev runtime.ModelEvent) bool {
	if !s.reported && s.name != "" {
		s.reported = true
		if !yield(runtime.ModelEvent{Kind: runtime.ModelResponseInfo, Index: -1, Name: s.name}) {
			return false
		}
	}
	return yield(ev)
}
