package main

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// checkLimits returns an error for every limit flag whose value agentd cannot serve with,
// each naming the flag.
func (cfg config) checkLimits() []error {
	var errs []error
	atLeast := func(flag string, v, least int, hint string) {
		if v < least {
			errs = append(errs, fmt.Errorf("--%s (%d) must be at least %d%s", flag, v, least, hint))
		}
	}
	positive := func(flag string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s (%s) must be positive", flag, d))
		}
	}
	notNegative := func(flag string, d time.Duration, hint string) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("--%s (%s) must not be negative%s", flag, d, hint))
		}
	}
	atLeast("max-runs", cfg.maxRuns, 1, "")
	atLeast("max-runs-per-caller", cfg.maxRunsPerCaller, 0, "; 0 turns the limit off")
	atLeast("max-run-depth", cfg.maxRunDepth, 1, "")
	atLeast("max-children-per-run", cfg.maxChildren, 1, "")
	atLeast("max-tree-tokens", int(max(min(cfg.maxTreeTokens, 1<<40), -1)), 0, "; 0 turns the budget off")
	atLeast("max-attachments-per-run", cfg.maxAttachPerRun, 1, "")
	atLeast("max-attachments-per-caller", cfg.maxAttachPerCaller, 1, "")
	atLeast("max-parked-runs", cfg.maxParkedRuns, 0, "; 0 turns the cap off")
	atLeast("max-parked-runs-per-caller", cfg.maxParkedRunsPerCaller, 0, "; 0 turns the cap off")
	atLeast("max-parked-bytes", int(max(cfg.maxParkedBytes, -1)), 0, "; 0 turns the cap off")
	atLeast("max-parked-bytes-per-caller", int(max(cfg.maxParkedBytesPerCaller, -1)), 0, "; 0 turns the cap off")
	positive("start-timeout", cfg.startTimeout)
	positive("stall-timeout", cfg.stallTimeout)
	positive("max-approval-timeout", cfg.maxApprovalTimeout)
	atLeast("max-connections", cfg.maxConnections, 0, "; 0 turns the cap off")
	atLeast("max-connections-per-ip", cfg.maxConnectionsPerIP, 0, "; 0 turns the cap off")
	atLeast("max-streams-per-connection", cfg.maxStreamsPerConn, 1, "")
	if cfg.maxStreamsPerConn > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("--max-streams-per-connection (%d) must be at most %d", cfg.maxStreamsPerConn, uint32(math.MaxUint32)))
	}
	positive("handshake-timeout", cfg.handshakeTimeout)
	positive("keepalive-min-time", cfg.keepaliveMinTime)
	if cfg.keepaliveTime < time.Second {
		errs = append(errs, fmt.Errorf("--keepalive-time (%s) must be at least 1s", cfg.keepaliveTime))
	}
	positive("keepalive-timeout", cfg.keepaliveTimeout)
	notNegative("max-connection-idle", cfg.maxConnIdle, "; 0 keeps idle connections open")
	notNegative("max-connection-age", cfg.maxConnAge, "; 0 means no age limit")
	notNegative("max-connection-age-grace", cfg.maxConnAgeGrace, "; 0 lets the streams finish")
	atLeast("max-health-watches", cfg.maxHealthWatches, 0, "; 0 turns the cap off")
	atLeast("max-health-watches-per-peer", cfg.maxHealthWatchesPeer, 0, "; 0 turns the cap off")
	positive("run-retention", cfg.runRetention)
	positive("park-timeout", cfg.parkTimeout)
	notNegative("park-after", cfg.parkAfter, "; 0 waits live while a stream can answer")
	positive("thread-retention", cfg.threadRetention)
	if cfg.storeMaxBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--store-max-bytes (%d) must be at least 1 MiB", cfg.storeMaxBytes))
	}
	if cfg.journalMaxRunBytes < 64<<10 || cfg.journalMaxRunBytes > cfg.storeMaxBytes {
		errs = append(errs, fmt.Errorf("--journal-max-run-bytes (%d) must be at least 64 KiB and at most --store-max-bytes", cfg.journalMaxRunBytes))
	}
	return errs
}

// transportOptions returns the limits of agentd's connections, all gRPC's own: streams per
// connection; the time a new connection has for its handshake; keepalive pings agentd
// sends to find dead peers, and those it accepts from clients (at most one every
// --keepalive-min-time, with or without a stream: a client may keep its connection warm
// between runs, and --max-connection-idle, which counts streams and not pings, still
// closes it); and the idle and age limits of a connection. A zero idle, age or grace
// duration is gRPC's infinity.
func transportOptions(cfg config) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(cfg.maxStreamsPerConn)),
		grpc.ConnectionTimeout(cfg.handshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  cfg.keepaliveTime,
			Timeout:               cfg.keepaliveTimeout,
			MaxConnectionIdle:     cfg.maxConnIdle,
			MaxConnectionAge:      cfg.maxConnAge,
			MaxConnectionAgeGrace: cfg.maxConnAgeGrace,
		}),
	}
}

// limitConnections returns lis capped at limit open connections, and at perIP of them
// from one IP address (see [connLimitListener]; 0: no cap), or lis itself with neither
// cap. userTimeout, when positive, is the TCP_USER_TIMEOUT of every connection it
// accepts (the keepalive timeout, as grpc.Server would set it on a connection it sees
// unwrapped).
func limitConnections(lis net.Listener, limit, perIP int, userTimeout time.Duration, log *slog.Logger) net.Listener {
	if limit <= 0 && perIP <= 0 {
		return lis
	}
	return &connLimitListener{Listener: lis, limit: int64(limit), perIP: perIP, userTimeout: userTimeout, log: log, byIP: map[string]int{}}
}

// connLimitListener is a net.Listener that keeps at most limit of the connections it
// accepted open at once, and at most perIP from one IP address (0: no cap). A connection
// beyond either is closed as soon as it is accepted, before any handshake: its client
// fails at once with UNAVAILABLE and may retry, or try another replica.
// golang.org/x/net/netutil.LimitListener stops accepting instead, which leaves new
// connections (a kubelet's probe among them) waiting unanswered in the kernel's backlog
// until their clients time out. Accept and Close may be called from separate goroutines,
// as grpc.Server does.
type connLimitListener struct {
	net.Listener
	limit       int64
	perIP       int
	userTimeout time.Duration
	log         *slog.Logger
	open        atomic.Int64
	refused     atomic.Int64

	mu   sync.Mutex
	byIP map[string]int // only addresses with a connection open
}

// Accept returns the next connection under the caps, closing those beyond them.
func (l *connLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		why := l.admit(ip)
		if why == "" {
			if tc, ok := c.(*net.TCPConn); ok && l.userTimeout > 0 {
				if err := setTCPUserTimeout(tc, l.userTimeout); err != nil {
					l.log.Debug("setting TCP_USER_TIMEOUT failed", "error", err)
				}
			}
			return &limitedConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		_ = c.Close()
		// Logged at the 1st, 2nd, 4th, 8th… refusal: a flood of connections cannot flood
		// the log.
		if n := l.refused.Add(1); n&(n-1) == 0 {
			l.log.Warn("connection closed as soon as accepted: "+why, "max_connections", l.limit, "max_connections_per_ip", l.perIP, "refused_total", n, "remote", c.RemoteAddr().String())
		}
	}
}

// admit counts a connection from ip, or says which cap it is beyond.
func (l *connLimitListener) admit(ip string) string {
	if l.limit > 0 && l.open.Add(1) > l.limit {
		l.open.Add(-1)
		return "--max-connections connections are open"
	}
	if l.limit <= 0 {
		l.open.Add(1)
	}
	if l.perIP > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.byIP[ip] >= l.perIP {
			l.open.Add(-1)
			return "--max-connections-per-ip connections from its address are open"
		}
		l.byIP[ip]++
	}
	return ""
}

// release gives back the places of a connection from ip.
func (l *connLimitListener) release(ip string) {
	l.open.Add(-1)
	if l.perIP > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.byIP[ip]--; l.byIP[ip] <= 0 {
			delete(l.byIP, ip)
		}
	}
}

// remoteIP is the IP address a connection comes from, without its port.
func remoteIP(c net.Conn) string {
	if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		return host
	}
	return c.RemoteAddr().String()
}

// limitedConn gives its places under the caps back when it is first closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// watchLimiter caps the grpc.health.v1.Health/Watch streams open at once: total in all,
// perPeer from one IP address (0: no cap). A Watch needs no token and lasts as long as its
// client likes, so without a cap anyone who reaches agentd could hold any number open;
// Check, what probes use, is never capped. It is safe for concurrent use.
type watchLimiter struct {
	total, perPeer int

	mu     sync.Mutex
	open   int
	byPeer map[string]int // only peers with a stream open
}

func newWatchLimiter(total, perPeer int) *watchLimiter {
	return &watchLimiter{total: total, perPeer: perPeer, byPeer: map[string]int{}}
}

// StreamServerInterceptor refuses a stream beyond the caps with RESOURCE_EXHAUSTED, and
// holds a place under them while the stream's handler runs.
func (l *watchLimiter) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		peer := peerAddress(ss.Context())
		if err := l.acquire(peer); err != nil {
			return err
		}
		defer l.release(peer)
		return handler(srv, ss)
	}
}

func (l *watchLimiter) acquire(peer string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total > 0 && l.open >= l.total {
		return status.Errorf(codes.ResourceExhausted, "agentd has its limit of %d health Watch streams open: use Check, or retry later", l.total)
	}
	if l.perPeer > 0 && l.byPeer[peer] >= l.perPeer {
		return status.Errorf(codes.ResourceExhausted, "%s has its limit of %d health Watch streams open: use Check, or close one", peer, l.perPeer)
	}
	l.open++
	l.byPeer[peer]++
	return nil
}

func (l *watchLimiter) release(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byPeer[peer]--; l.byPeer[peer] == 0 {
		delete(l.byPeer, peer)
	}
}

// userTimeout is the TCP_USER_TIMEOUT grpc.Server gives a connection with keepalive pings
// on: the keepalive timeout.
func userTimeout(cfg config) time.Duration {
	if cfg.keepaliveTime <= 0 {
		return 0
	}
	return cfg.keepaliveTimeout
}
