package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/tap"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// Every call's first message must arrive whole within --start-timeout of its headers, on
// either listener: before it has, no interceptor has run (a unary call's token is checked
// with its message), so a caller that sends headers and part of a body and then nothing
// would hold its stream, and its connection, for as long as it liked. The gRPC listener
// enforces it with a tap handle (firstMessageTap) that [receivedStats] disarms; the HTTP
// listener with a read deadline on the body ([httpBodies]).

// firstMessageGrace is how much longer than --start-timeout a Run stream's first message
// may take on the listeners: the service ends such a stream itself, with START_TIMEOUT,
// and the listener's deadline is only the backstop.
const firstMessageGrace = 5 * time.Second

// firstMessageTimeout returns the deadline of a call's first message, by method.
func firstMessageTimeout(startTimeout time.Duration) func(method string) time.Duration {
	return func(method string) time.Duration {
		if method == agentdv1.AgentService_Run_FullMethodName {
			return startTimeout + firstMessageGrace
		}
		return startTimeout
	}
}

// firstMessageTap returns the gRPC listener's tap handle: it ends a call whose first
// message has not arrived within timeout(method) DEADLINE_EXCEEDED. The stream's context
// it returns is the one gRPC reads the call's messages with.
func firstMessageTap(timeout func(method string) time.Duration, log *slog.Logger) tap.ServerInHandle {
	var refused atomic.Int64
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		inner, cancel := context.WithCancel(ctx)
		fc := &firstMessageCtx{Context: inner}
		method := info.FullMethodName
		t := time.AfterFunc(timeout(method), func() {
			fc.expired.Store(true)
			cancel()
			// Logged at the 1st, 2nd, 4th, 8th… time: a flood of stalled calls cannot
			// flood the log.
			if n := refused.Add(1); n&(n-1) == 0 {
				log.Warn("a call's first message did not arrive within --start-timeout: the call is ended", "grpc.method", method, "refused_total", n)
			}
		})
		return context.WithValue(fc, receivedKey{}, func() { t.Stop() }), nil
	}
}

// firstMessageCtx is a call's context that firstMessageTap ends: once expired, its Err
// is context.DeadlineExceeded, which gRPC reports as DEADLINE_EXCEEDED.
type firstMessageCtx struct {
	context.Context
	expired atomic.Bool
}

func (c *firstMessageCtx) Err() error {
	if err := c.Context.Err(); err != nil && c.expired.Load() {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// receivedStats is a stats handler that tells a call's listener (receivedKey) each time
// gRPC has decoded one of the call's messages.
type receivedStats struct{}

func (receivedStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (receivedStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.InPayload); ok && !p.IsClient() {
		if f, ok := ctx.Value(receivedKey{}).(func()); ok {
			f()
		}
	}
}

func (receivedStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (receivedStats) HandleConn(context.Context, stats.ConnStats) {}
