package builtin

import (
	"context"
	"net"
	"net/netip"
)

// WithFetchLookup makes HTTPFetch's default transport resolve host names with lookup.
func WithFetchLookup(lookup func(ctx context.Context, host string) ([]netip.Addr, error)) Option {
	return func(o *options) { o.fetchLookup = lookup }
}

// WithFetchDial makes HTTPFetch's default transport connect with dial, to the addresses
// it has checked.
func WithFetchDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.fetchDial = dial }
}
