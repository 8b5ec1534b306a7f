package builtin

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Option configures the tools made by [Tools], [CurrentTime], [SaveNote] and
// [HTTPFetch]; each tool ignores the options that are not its own.
type Option func(*options)

type options struct {
	now            func() time.Time
	notes          *Notes
	fetchMaxBytes  int64
	fetchTimeout   time.Duration
	fetchTransport http.RoundTripper

	// The network of HTTPFetch's default transport, for tests; nil means the host's.
	fetchLookup func(ctx context.Context, host string) ([]netip.Addr, error)
	fetchDial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newOptions(opts []Option) options {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClock makes the tools read the time from now instead of [time.Now], for
// deterministic tests. A nil now keeps time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithNotes makes [Tools] store notes in n, where the caller can list them
// ([Notes.List], [Notes.ListIn]). Without it, Tools makes a store of its own that nobody
// else can read. [SaveNote] takes its store as
// an argument and ignores this option.
func WithNotes(n *Notes) Option {
	return func(o *options) { o.notes = n }
}

// WithFetchMaxBytes sets how much of a body [HTTPFetch] reads before it cuts it; n <= 0
// keeps the default, [DefaultFetchMaxBytes] (1 MiB).
func WithFetchMaxBytes(n int64) Option {
	return func(o *options) { o.fetchMaxBytes = n }
}

// WithFetchTimeout bounds one fetch of [HTTPFetch], redirects and body included; d <= 0
// keeps the default, [DefaultFetchTimeout] (10s).
func WithFetchTimeout(d time.Duration) Option {
	return func(o *options) { o.fetchTimeout = d }
}

// WithFetchTransport makes [HTTPFetch] send its requests through rt, for a proxy of the
// embedder's or a test's fake network. The allow-list is checked on every URL before rt
// sees a request, redirects included, but the addresses rt connects to are rt's
// business: the default transport's check of every address it dials (see [HTTPFetch])
// is gone with it. Nil keeps the default: [http.DefaultTransport]'s settings without
// proxies or keep-alives, dialing only addresses the allow-list allows.
func WithFetchTransport(rt http.RoundTripper) Option {
	return func(o *options) { o.fetchTransport = rt }
}
