package mcp

import (
	"context"
	"log/slog"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Option configures a [Source] made by [Connect].
type Option func(*options)

type options struct {
	reserved   map[string]bool
	logger     *slog.Logger
	minBackoff time.Duration
	maxBackoff time.Duration
	dial       func(context.Context) (sdk.Transport, error)
}

// The restart delays without [WithBackoff].
const (
	defaultMinBackoff = 250 * time.Millisecond
	defaultMaxBackoff = 30 * time.Second
)

func newOptions(opts []Option) options {
	o := options{minBackoff: defaultMinBackoff, maxBackoff: defaultMaxBackoff}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o
}

// WithReservedNames names tools the source's tools must not be exposed as, typically the
// agent's other tools. A tool of the server with one of these names is exposed as
// "<server>__<tool>" instead. The option adds to the names of earlier ones.
func WithReservedNames(names ...string) Option {
	return func(o *options) {
		if o.reserved == nil {
			o.reserved = map[string]bool{}
		}
		for _, n := range names {
			o.reserved[n] = true
		}
	}
}

// WithLogger makes the source log to l: restarts, failed relistings, skipped tools
// (warnings) and the server process's standard error, line by line (debug). A nil l
// keeps the default, [slog.Default].
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithBackoff sets the delays between attempts to reconnect to a server whose session
// ended: the first attempt waits minDelay, each further one twice as long as the one
// before, up to maxDelay. The defaults are 250ms and 30s. Values that are not positive,
// or a maxDelay below minDelay, keep the defaults.
func WithBackoff(minDelay, maxDelay time.Duration) Option {
	return func(o *options) {
		if minDelay > 0 && maxDelay >= minDelay {
			o.minBackoff, o.maxBackoff = minDelay, maxDelay
		}
	}
}

// WithTransport makes the source connect over the transports dial returns instead of
// starting ServerConfig.Command or reaching ServerConfig.URL, which must then both be
// empty. dial is called for the first connection and again for every reconnection, so
// each call must return a fresh transport. It exists for tests and embedders (an
// in-memory server made with [sdk.NewInMemoryTransports]); the operator's config has no
// way to reach it.
func WithTransport(dial func(ctx context.Context) (sdk.Transport, error)) Option {
	return func(o *options) { o.dial = dial }
}
