package hooks

import (
	"context"
	"slices"

	"google.golang.org/grpc"

	"github.com/agentd/agentd/runtime"
)

// ctxKey is the context key of the hooks an RPC carries.
type ctxKey struct{}

// NewContext returns a copy of ctx that carries the hooks ctx already carries followed
// by hs. Nil hooks are skipped. ctx's own list is never modified, so contexts derived from
// the same parent do not see each other's hooks.
func NewContext(ctx context.Context, hs ...runtime.Hooks) context.Context {
	// The list itself, not FromContext's clone: next is the one copy, made only when there
	// is a hook to add.
	prev, _ := ctx.Value(ctxKey{}).([]runtime.Hooks)
	var next []runtime.Hooks
	for _, h := range hs {
		if h == nil {
			continue
		}
		if next == nil {
			next = make([]runtime.Hooks, len(prev), len(prev)+len(hs))
			copy(next, prev)
		}
		next = append(next, h)
	}
	if next == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, next)
}

// FromContext returns the hooks ctx carries, in the order they were installed: the first
// interceptor's hook first. The caller may modify the returned slice.
func FromContext(ctx context.Context) []runtime.Hooks {
	hs, _ := ctx.Value(ctxKey{}).([]runtime.Hooks)
	return slices.Clone(hs)
}

// UnaryServerInterceptor returns an interceptor that adds h to the hooks the RPC's
// context carries (see [NewContext]). Installed with grpc.ChainUnaryInterceptor, the
// first interceptor's hook runs first. A nil h installs nothing.
func UnaryServerInterceptor(h runtime.Hooks) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(NewContext(ctx, h), req)
	}
}

// StreamServerInterceptor returns an interceptor that adds h to the hooks the stream's
// context carries (see [NewContext]); the handler gets a stream whose Context returns the
// new context. Installed with grpc.ChainStreamInterceptor, the first interceptor's hook
// runs first. A nil h installs nothing.
func StreamServerInterceptor(h runtime.Hooks) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if h == nil {
			return handler(srv, ss)
		}
		// Rewrap rather than nest when the previous interceptor was one of ours.
		inner := ss
		if w, ok := ss.(*serverStream); ok {
			inner = w.ServerStream
		}
		return handler(srv, &serverStream{ServerStream: inner, ctx: NewContext(ss.Context(), h)})
	}
}

// serverStream is a grpc.ServerStream with a replaced context.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }
