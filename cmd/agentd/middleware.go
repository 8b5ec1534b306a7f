package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/service"
)

// serverOptions returns the options agentd's grpc.Server is built with: the OpenTelemetry
// stats handler, the largest message accepted, service.ServerOptions (its codec refuses
// invalid UTF-8 naming the field), TLS (and mTLS) credentials when configured, the
// transport's limits ([transportOptions]: streams per connection, the handshake timeout,
// keepalive pings sent and accepted, idle and age limits of connections; the cap on
// connections is the listener's, [limitConnections] in serve), and the interceptor chains,
// outermost first:
//
//  1. logging: a "started call" and a "finished call" line per RPC (method, peer; code,
//     duration and caller on the finish line; never payloads or metadata);
//  2. the cap on grpc.health.v1.Health/Watch streams, for that method alone
//     (--max-health-watches, --max-health-watches-per-peer; [watchLimiter]);
//  3. auth, except for grpc.health.v1.Health and server reflection: the bearer token from
//     the "authorization" metadata, checked against --auth-tokens-file (with no file every
//     call passes); it names the caller for the later interceptors and the log;
//  4. rate limiting per caller (--rate-limit, --rate-burst), except for health and
//     reflection, which a probe or a grpcurl session must always reach: one bucket per
//     identity of [limitKey], none for anonymous callers;
//  5. the hook interceptors (hooks.UnaryServerInterceptor, hooks.StreamServerInterceptor),
//     which put the server-wide hooks on the RPC's context: --audit's (audit.New(log)),
//     then hookUnary and hookStream in the order given. After auth and the limits, so a
//     refused RPC reaches no hook, and every hook sees the caller. A run's hooks are
//     these, the outermost first, then its agent's own (runtime.Chain); audit records
//     what every hook decided wherever it sits;
//  6. recovery, innermost: a panic in a handler (hooks run inside handlers) becomes
//     INTERNAL and a log line, and the server keeps serving. The interceptors around it
//     see the INTERNAL error.
func serverOptions(cfg config, log *slog.Logger, hookUnary []grpc.UnaryServerInterceptor, hookStream []grpc.StreamServerInterceptor) ([]grpc.ServerOption, error) {
	authn := &authenticator{}
	if cfg.authTokensFile != "" {
		tokens, err := loadTokens(cfg.authTokensFile)
		if err != nil {
			return nil, err
		}
		authn.tokens = tokens
	}
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return nil, err
	}

	logger := grpcLogger(log)
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.StartCall, logging.FinishCall)}
	healthWatch := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return isHealth(c) && c.Method == "Watch" })
	needsToken := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return !isHealth(c) && !isReflection(c) })
	rateLimited := needsToken // what needs no token is never limited either
	recoverOpt := recovery.WithRecoveryHandlerContext(recoverPanic(log))

	unary := []grpc.UnaryServerInterceptor{
		logging.UnaryServerInterceptor(logger, logOpts...),
		selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(authn.authenticate), needsToken),
	}
	stream := []grpc.StreamServerInterceptor{
		logging.StreamServerInterceptor(logger, logOpts...),
		selector.StreamServerInterceptor(newWatchLimiter(cfg.maxHealthWatches, cfg.maxHealthWatchesPeer).StreamServerInterceptor(), healthWatch),
		selector.StreamServerInterceptor(auth.StreamServerInterceptor(authn.authenticate), needsToken),
	}
	if cfg.rateLimit > 0 {
		limiter := newCallerLimiter(rate.Limit(cfg.rateLimit), cfg.rateBurst, func(ctx context.Context) string { return limitKey(ctx, cfg.limitByPeerIP) })
		unary = append(unary, selector.UnaryServerInterceptor(ratelimit.UnaryServerInterceptor(limiter), rateLimited))
		stream = append(stream, selector.StreamServerInterceptor(ratelimit.StreamServerInterceptor(limiter), rateLimited))
	}
	if cfg.audit {
		a := audit.New(log)
		unary = append(unary, hooks.UnaryServerInterceptor(a))
		stream = append(stream, hooks.StreamServerInterceptor(a))
	}
	unary = append(unary, hookUnary...)
	stream = append(stream, hookStream...)
	unary = append(unary, recovery.UnaryServerInterceptor(recoverOpt))
	stream = append(stream, recovery.StreamServerInterceptor(recoverOpt))

	opts := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.StatsHandler(receivedStats{}),
		grpc.InTapHandle(firstMessageTap(firstMessageTimeout(cfg.startTimeout), log)),
		grpc.MaxRecvMsgSize(cfg.maxMessageBytes),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}
	opts = append(opts, service.ServerOptions()...) // the codec: invalid UTF-8 is refused naming the field
	opts = append(opts, transportOptions(cfg)...)
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	return opts, nil
}

func isHealth(c interceptors.CallMeta) bool {
	return c.Service == healthpb.Health_ServiceDesc.ServiceName
}

// isReflection matches every version of server reflection (grpc.reflection.v1,
// grpc.reflection.v1alpha).
func isReflection(c interceptors.CallMeta) bool {
	return strings.HasPrefix(c.Service, "grpc.reflection.")
}

// grpcLogger adapts log to go-grpc-middleware's logging interface.
func grpcLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, level logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(level), msg, fields...)
	})
}

// recoverPanic returns the recovery handler: it logs the panic with its stack and gives
// the client INTERNAL without the panic's details.
func recoverPanic(log *slog.Logger) recovery.RecoveryHandlerFuncContext {
	return func(ctx context.Context, p any) error {
		method, _ := grpc.Method(ctx)
		log.ErrorContext(ctx, "panic in an RPC handler", "grpc.method", method, "caller", callerOf(ctx), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	}
}

// callerKey is the context key under which the auth interceptor stores the caller's
// identity.
type callerKey struct{}

// The prefixes of the caller identities callerOf returns.
const (
	tokenCaller = "token:" // a bearer token of --auth-tokens-file, by its SHA-256
	certCaller  = "cert:"  // a verified client certificate, by its common name or a hash
	peerCaller  = "peer:"  // the peer's IP address: nothing vouches for it
)

// callerOf returns who is calling, for logs: the identity the auth interceptor
// established ("token:…"), or else the transport's ("cert:…" for a verified client
// certificate, "peer:<ip>" otherwise).
func callerOf(ctx context.Context) string {
	if id, ok := ctx.Value(callerKey{}).(string); ok {
		return id
	}
	return transportIdentity(ctx)
}

// limitKey returns the identity that per-caller limits (--rate-limit,
// --max-runs-per-caller) key on: the caller's bearer token or verified client certificate;
// with byPeerIP, else its IP address; else "", an anonymous caller, to which no per-caller
// limit applies. Peer addresses are no identity by default: behind a proxy or a mesh
// sidecar every caller has the proxy's, and would share one limit.
func limitKey(ctx context.Context, byPeerIP bool) string {
	id := callerOf(ctx)
	switch {
	case strings.HasPrefix(id, tokenCaller), strings.HasPrefix(id, certCaller):
		return id
	case byPeerIP && strings.HasPrefix(id, peerCaller):
		return id
	}
	return ""
}

// transportIdentity names the caller from the connection: the common name of a verified
// client certificate, or the peer's IP address.
func transportIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
		leaf := ti.State.VerifiedChains[0][0]
		if cn := leaf.Subject.CommonName; cn != "" {
			return certCaller + cn
		}
		sum := sha256.Sum256(leaf.Raw)
		return certCaller + hex.EncodeToString(sum[:])
	}
	return peerCaller + peerAddress(ctx)
}

// peerAddress returns the IP address the RPC comes from (not its port, which changes with
// every connection), or "unknown".
func peerAddress(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return host
	}
	return p.Addr.String()
}

// bearerToken is one configured token, kept only as its SHA-256: comparing digests takes
// the same time whatever the presented token's length.
type bearerToken struct {
	sum [sha256.Size]byte
	id  string // tokenCaller and the whole SHA-256: what logs, limits and ownership name the caller by
}

// loadTokens reads a tokens file: one token per line; blank lines and lines starting with
// # are ignored. A file with no token is an error, since it would refuse every call.
func loadTokens(path string) ([]bearerToken, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--auth-tokens-file: %w", err)
	}
	var tokens []bearerToken
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum := sha256.Sum256([]byte(line))
		tokens = append(tokens, bearerToken{sum: sum, id: tokenCaller + hex.EncodeToString(sum[:])})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--auth-tokens-file %s: %w", path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("--auth-tokens-file %s: no tokens (one a line; blank lines and # comments are ignored)", path)
	}
	return tokens, nil
}

// authenticator is the auth interceptor's AuthFunc. With no tokens every call passes and
// the caller is named by its transport; with tokens a call needs "authorization: Bearer
// <token>" with one of them. It is safe for concurrent use.
type authenticator struct {
	tokens []bearerToken
}

// errNoToken and errBadToken never include what the client sent: it may be a real token
// sent to the wrong server, and the message ends up in logs.
var (
	errNoToken  = status.Error(codes.Unauthenticated, `missing bearer token: send the metadata "authorization: Bearer <token>"`)
	errBadToken = status.Error(codes.Unauthenticated, "invalid bearer token")
)

func (a *authenticator) authenticate(ctx context.Context) (context.Context, error) {
	var id string
	if len(a.tokens) == 0 {
		id = transportIdentity(ctx)
	} else {
		presented, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, errNoToken
		}
		var ok bool
		if id, ok = a.match(presented); !ok {
			return nil, errBadToken
		}
	}
	// The logging interceptor, outside this one, reads its fields when the call finishes:
	// AddFields changes them in place. It runs before the handler starts, so before any
	// goroutine of the call reads them.
	logging.AddFields(ctx, logging.Fields{"caller", id})
	return context.WithValue(ctx, callerKey{}, id), nil
}

// match compares the presented token with every configured one in constant time, without
// stopping at the first match, and returns the matching token's identity.
func (a *authenticator) match(presented string) (string, bool) {
	sum := sha256.Sum256([]byte(presented))
	found := -1
	for i := range a.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return "", false
	}
	return a.tokens[found].id, true
}

// callerLimiter is a token bucket per caller, as key names them; a caller key names ""
// is not limited. Buckets that have refilled completely are dropped once the map has
// grown, so a stream of new callers cannot grow it without bound. It is safe for
// concurrent use.
type callerLimiter struct {
	limit rate.Limit
	burst int
	key   func(context.Context) string
	now   func() time.Time

	mu      sync.Mutex
	callers map[string]*rate.Limiter
	sweepAt int // sweep when len(callers) reaches it
}

// minSweep is the number of callers below which callerLimiter never sweeps.
const minSweep = 1024

func newCallerLimiter(limit rate.Limit, burst int, key func(context.Context) string) *callerLimiter {
	return &callerLimiter{limit: limit, burst: burst, key: key, now: time.Now, callers: map[string]*rate.Limiter{}, sweepAt: minSweep}
}

// Limit implements ratelimit.Limiter.
func (l *callerLimiter) Limit(ctx context.Context) error {
	caller := l.key(ctx)
	if caller == "" {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	lim, ok := l.callers[caller]
	if !ok {
		if len(l.callers) >= l.sweepAt {
			l.sweep(now)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.callers[caller] = lim
	}
	allowed := lim.AllowN(now, 1)
	l.mu.Unlock()
	if !allowed {
		return fmt.Errorf("caller %s is over %g requests a second", caller, float64(l.limit))
	}
	return nil
}

// sweep drops the buckets that are full again: a new bucket would behave the same.
func (l *callerLimiter) sweep(now time.Time) {
	for caller, lim := range l.callers {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.callers, caller)
		}
	}
	l.sweepAt = max(2*len(l.callers), minSweep)
}

// serverTLS returns the TLS configuration from --tls-cert, --tls-key and --client-ca, or
// nil when agentd serves plaintext. With --client-ca every client must present a
// certificate that CA signed.
func serverTLS(cfg config) (*tls.Config, error) {
	if cfg.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.clientCA != "" {
		pemData, err := os.ReadFile(cfg.clientCA)
		if err != nil {
			return nil, fmt.Errorf("--client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("--client-ca %s: no PEM certificate in it", cfg.clientCA)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// isLoopback reports whether addr is a loopback address, one that only this machine
// reaches.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
