package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	goruntime "runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/logtest"
)

// healthServer is a grpc.Server built as agentd builds its own (serverOptions, and the
// connection cap on its listener) that serves a health service alone.
type healthServer struct {
	health *health.Server
	log    *logtest.Buffer
}

// serveHealth serves a healthServer configured by args (as on the command line) on lis
// until the test ends. Inside a synctest bubble lis is a bufconn.Listener made in it.
func serveHealth(t *testing.T, args []string, lis net.Listener) *healthServer {
	t.Helper()
	cfg, err := parseConfig(args, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	buf := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(buf, nil))
	opts, err := serverOptions(cfg, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	serveTest(t, gs, lis, cfg, log)
	return &healthServer{health: hs, log: buf}
}

// listenLoopback listens on a free port of 127.0.0.1.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// dialBufconn connects to lis, a bufconn listener, with opts.
func dialBufconn(t *testing.T, lis *bufconn.Listener, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///bufconn", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// secondLoopback is a loopback address other than 127.0.0.1, for a second peer; the test
// is skipped where the system has none (Linux routes all of 127.0.0.0/8 to loopback).
const secondLoopback = "127.0.0.2"

// dialFrom connects to addr in plaintext from the local address ip.
func dialFrom(t *testing.T, addr, ip string) *grpc.ClientConn {
	t.Helper()
	probe, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("no loopback address %s here: %v", ip, err)
	}
	probe.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// watch opens a health Watch of service and reads its first answer.
func watch(ctx context.Context, conn *grpc.ClientConn, service string) (grpc.ServerStreamingClient[healthpb.HealthCheckResponse], error) {
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return nil, err
	}
	if _, err := w.Recv(); err != nil {
		return nil, err
	}
	return w, nil
}

func listAgents(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := agentdv1.NewAgentServiceClient(conn).ListAgents(ctx, &agentdv1.ListAgentsRequest{})
	return err
}

// Per-caller rate limits key on who the caller is, not on where it calls from: without
// auth one address is not one caller (behind a mesh every caller is 127.0.0.1), unless
// --limit-by-peer-ip says it is.
func TestRateLimitKeysOnIdentityNotAddress(t *testing.T) {
	pki := newTestPKI(t)
	// 0.001 a second: a bucket does not refill during the test.
	limited := []string{"--rate-limit=0.001", "--rate-burst=2"}

	t.Run("anonymous callers are not limited by default", func(t *testing.T) {
		ts := startServer(t, limited, hookSet{})
		conn := dial(t, ts.addr, nil)
		for i := range 10 {
			if err := listAgents(t.Context(), conn); err != nil {
				t.Fatalf("call %d from one address without auth: %v, want no per-caller limit", i+1, err)
			}
		}
	})

	t.Run("--limit-by-peer-ip limits each address", func(t *testing.T) {
		ts := startServer(t, append(limited, "--limit-by-peer-ip"), hookSet{})
		conn := dial(t, ts.addr, nil)
		for i := range 2 {
			if err := listAgents(t.Context(), conn); err != nil {
				t.Fatalf("call %d within the burst: %v", i+1, err)
			}
		}
		err := listAgents(t.Context(), conn)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "peer:127.0.0.1") {
			t.Errorf("call past the burst: %v, want RESOURCE_EXHAUSTED naming peer:127.0.0.1", err)
		}
		if err := listAgents(t.Context(), dialFrom(t, ts.addr, secondLoopback)); err != nil {
			t.Errorf("call from another address: %v, want its own bucket", err)
		}
	})

	t.Run("a client certificate is an identity", func(t *testing.T) {
		ts := startServer(t, append(limited, "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--client-ca", pki.caFile), hookSet{})
		conn := dial(t, ts.addr, pki.clientCreds(t, true))
		for range 2 {
			if err := listAgents(t.Context(), conn); err != nil {
				t.Fatal(err)
			}
		}
		if err := listAgents(t.Context(), conn); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "cert:test-client") {
			t.Errorf("call past the burst: %v, want RESOURCE_EXHAUSTED naming cert:test-client", err)
		}
	})
}

// A probe and a grpcurl session always get through, whatever the caller's rate.
func TestRateLimitNeverAppliesToHealthOrReflection(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		ctx  func(context.Context) context.Context
	}{
		{"by peer address", []string{"--limit-by-peer-ip"}, func(ctx context.Context) context.Context { return ctx }},
		{"by token", []string{"--auth-tokens-file", tokensFile(t)}, func(ctx context.Context) context.Context { return withToken(ctx, tokenA) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, append([]string{"--rate-limit=0.001", "--rate-burst=1"}, tc.args...), hookSet{})
			conn := dial(t, ts.addr, nil)
			ctx := tc.ctx(t.Context())
			if err := listAgents(ctx, conn); err != nil {
				t.Fatal(err)
			}
			if err := listAgents(ctx, conn); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("second call: %v, want the caller throttled", err)
			}
			health := healthpb.NewHealthClient(conn)
			for i := range 5 {
				if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					t.Errorf("health Check %d of a throttled caller: %v", i+1, err)
				}
				if _, err := listServices(ctx, conn); err != nil {
					t.Errorf("reflection %d of a throttled caller: %v", i+1, err)
				}
			}
			for i := range 3 {
				if _, err := watch(ctx, conn, ""); err != nil {
					t.Errorf("health Watch %d of a throttled caller: %v", i+1, err)
				}
			}
		})
	}
}

// parkRun starts the demo agent on a Run stream with a request that needs an approval,
// and reads until the approval is asked: the run then holds its place until the stream
// ends. A refused run returns the stream's error.
func parkRun(ctx context.Context, conn *grpc.ClientConn) error {
	stream, err := agentdv1.NewAgentServiceClient(conn).Run(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: "save a note: buy milk"}}}); err != nil {
		_, err = stream.Recv()
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if resp.GetEvent().GetApprovalRequested() != nil {
			return nil
		}
		if rf := resp.GetEvent().GetRunFinished(); rf != nil {
			return status.Errorf(codes.Unknown, "run finished %v before asking an approval", rf.GetReason())
		}
	}
}

// --max-runs-per-caller applies to a token's runs, and to an anonymous caller's only with
// --limit-by-peer-ip.
func TestRunsPerCallerLimit(t *testing.T) {
	t.Run("per token", func(t *testing.T) {
		ts := startServer(t, []string{"--auth-tokens-file", tokensFile(t), "--max-runs-per-caller=1"}, hookSet{})
		conn := dial(t, ts.addr, nil)
		if err := parkRun(withToken(t.Context(), tokenA), conn); err != nil {
			t.Fatal(err)
		}
		if err := parkRun(withToken(t.Context(), tokenA), conn); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("the token's second run: %v, want RESOURCE_EXHAUSTED", err)
		}
		if err := parkRun(withToken(t.Context(), tokenB), conn); err != nil {
			t.Errorf("another token's run: %v, want its own limit", err)
		}
	})
	t.Run("anonymous callers share no limit", func(t *testing.T) {
		ts := startServer(t, []string{"--max-runs-per-caller=1"}, hookSet{})
		conn := dial(t, ts.addr, nil)
		for i := range 3 {
			if err := parkRun(t.Context(), conn); err != nil {
				t.Fatalf("anonymous run %d: %v, want no per-caller limit", i+1, err)
			}
		}
	})
	t.Run("--limit-by-peer-ip", func(t *testing.T) {
		ts := startServer(t, []string{"--max-runs-per-caller=1", "--limit-by-peer-ip"}, hookSet{})
		conn := dial(t, ts.addr, nil)
		if err := parkRun(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
		if err := parkRun(t.Context(), conn); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("the address's second run: %v, want RESOURCE_EXHAUSTED", err)
		}
		if err := parkRun(t.Context(), dialFrom(t, ts.addr, secondLoopback)); err != nil {
			t.Errorf("a run from another address: %v, want its own limit", err)
		}
	})
}

// Health Watch streams beyond the caps are refused; those open keep getting updates.
func TestHealthWatchLimit(t *testing.T) {
	lis := listenLoopback(t)
	hs := serveHealth(t, []string{"--max-health-watches=3", "--max-health-watches-per-peer=2"}, lis)
	hs.health.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	addr := lis.Addr().String()
	first, second := dial(t, addr, nil), dialFrom(t, addr, secondLoopback)
	ctx := t.Context()

	var open []grpc.ServerStreamingClient[healthpb.HealthCheckResponse]
	opened := func(conn *grpc.ClientConn) {
		t.Helper()
		w, err := watch(ctx, conn, "svc")
		if err != nil {
			t.Fatalf("Watch %d within the caps: %v", len(open)+1, err)
		}
		open = append(open, w)
	}
	opened(first)
	opened(first)
	if _, err := watch(ctx, first, "svc"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "127.0.0.1 has its limit of 2") {
		t.Errorf("a third Watch from 127.0.0.1: %v, want RESOURCE_EXHAUSTED (2 per peer)", err)
	}
	opened(second)
	if _, err := watch(ctx, second, "svc"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "agentd has its limit of 3") {
		t.Errorf("a fourth Watch: %v, want RESOURCE_EXHAUSTED (3 in all)", err)
	}
	if _, err := healthpb.NewHealthClient(first).Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"}); err != nil {
		t.Errorf("Check at the Watch cap: %v, want it served", err)
	}

	hs.health.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	for i, w := range open {
		resp, err := w.Recv()
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("Watch %d after the refusals: %v, %v; want the NOT_SERVING update", i+1, resp.GetStatus(), err)
		}
	}
}

func TestHealthWatchLimiterReleases(t *testing.T) {
	l := newWatchLimiter(2, 1)
	if err := l.acquire("a"); err != nil {
		t.Fatal(err)
	}
	if err := l.acquire("a"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second from a: %v, want RESOURCE_EXHAUSTED", err)
	}
	if err := l.acquire("b"); err != nil {
		t.Fatal(err)
	}
	if err := l.acquire("c"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("third in all: %v, want RESOURCE_EXHAUSTED", err)
	}
	l.release("a")
	if err := l.acquire("c"); err != nil {
		t.Errorf("after a release: %v", err)
	}
	l.release("b")
	l.release("c")
	if l.open != 0 || len(l.byPeer) != 0 {
		t.Errorf("after every release: %d open, peers %v; want none", l.open, l.byPeer)
	}
	unlimited := newWatchLimiter(0, 0)
	for range 100 {
		if err := unlimited.acquire("a"); err != nil {
			t.Fatalf("with no caps: %v", err)
		}
	}
}

// A client that pings more often than --keepalive-min-time is sent away with GOAWAY
// too_many_pings, and its calls end UNAVAILABLE; one that keeps to it stays connected.
func TestKeepaliveEnforcement(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		sentAway bool
	}{
		// gRPC clients ping at most every 10 s.
		{"pings faster than the minimum", []string{"--keepalive-min-time=1m"}, true},
		{"pings at the default minimum", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lis := bufconn.Listen(1 << 20)
				hs := serveHealth(t, tc.args, lis)
				conn := dialBufconn(t, lis, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}))
				// An open stream with nothing on it: the client pings every 10 s.
				w, err := watch(t.Context(), conn, "")
				if err != nil {
					t.Fatal(err)
				}
				ended := make(chan error, 1)
				go func() {
					_, err := w.Recv()
					ended <- err
				}()
				time.Sleep(5 * time.Minute)
				synctest.Wait()
				if !tc.sentAway {
					select {
					case err := <-ended:
						t.Fatalf("Watch ended: %v, want it open", err)
					default:
					}
					hs.health.Shutdown() // an update, to show the stream works
					if err := <-ended; err != nil {
						t.Errorf("Watch after 5 minutes of pings: %v, want the update", err)
					}
					return
				}
				select {
				case err := <-ended:
					if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "too_many_pings") {
						t.Errorf("Watch = %v, want UNAVAILABLE after GOAWAY too_many_pings", err)
					}
				default:
					t.Fatal("Watch still open after 5 minutes of pings every 10 s, want the client sent away")
				}
			})
		})
	}
}

// A connection carries at most --max-streams-per-connection streams: a gRPC client holds
// the next one back until a stream ends.
func TestStreamsPerConnectionLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lis := bufconn.Listen(1 << 20)
		serveHealth(t, []string{"--max-streams-per-connection=2"}, lis)
		conn := dialBufconn(t, lis)
		ctx1, cancel1 := context.WithCancel(t.Context())
		if _, err := watch(ctx1, conn, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := watch(t.Context(), conn, ""); err != nil {
			t.Fatal(err)
		}
		third := make(chan error, 1)
		go func() {
			_, err := watch(t.Context(), conn, "")
			third <- err
		}()
		synctest.Wait()
		select {
		case err := <-third:
			t.Fatalf("a third stream on the connection was served (%v), want it held back", err)
		default:
		}
		cancel1()
		if err := <-third; err != nil {
			t.Errorf("the third stream once the first ended: %v", err)
		}
	})
}

// Connections beyond --max-connections are closed at once (UNAVAILABLE); a place that
// frees up is taken again.
func TestConnectionLimit(t *testing.T) {
	lis := listenLoopback(t)
	hs := serveHealth(t, []string{"--max-connections=1"}, lis)
	addr := lis.Addr().String()
	check := func(conn *grpc.ClientConn, opts ...grpc.CallOption) error {
		_, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}, opts...)
		return err
	}
	first := dial(t, addr, nil)
	if err := check(first); err != nil {
		t.Fatal(err)
	}
	second := dial(t, addr, nil)
	if err := check(second); status.Code(err) != codes.Unavailable {
		t.Errorf("a second connection: %v, want UNAVAILABLE", err)
	}
	// The refusal is logged as the connection is closed, which the client may see first.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(hs.log.String(), "--max-connections"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the refusal is not logged:\n%s", hs.log.String())
			break
		}
	}
	first.Close()
	// The second client reconnects (after its backoff) once the server has closed the
	// first connection.
	if err := check(second, grpc.WaitForReady(true)); err != nil {
		t.Errorf("a second connection once the first closed: %v", err)
	}
}

func TestConnLimitListenerCountsEachCloseOnce(t *testing.T) {
	lis := listenLoopback(t)
	defer lis.Close()
	l := limitConnections(lis, 2, 0, 0, slog.New(slog.DiscardHandler)).(*connLimitListener)
	for range 2 {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	a.Close()
	if n := l.open.Load(); n != 1 {
		t.Errorf("%d open after closing one of two twice, want 1", n)
	}
	b.Close()
	if n := l.open.Load(); n != 0 {
		t.Errorf("%d open after closing both, want 0", n)
	}
	if got := limitConnections(lis, 0, 0, 0, nil); got != lis {
		t.Error("--max-connections=0 wrapped the listener, want it as is")
	}
}

// A connection without a stream for --max-connection-idle is sent away; its client
// reconnects when it next calls.
func TestIdleConnectionLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lis := bufconn.Listen(1 << 20)
		serveHealth(t, []string{"--max-connection-idle=1m"}, lis)
		conn := dialBufconn(t, lis)
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Second)
		synctest.Wait()
		if s := conn.GetState(); s != connectivity.Ready {
			t.Fatalf("after 50 s idle: %v, want READY", s)
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if s := conn.GetState(); s != connectivity.Idle {
			t.Errorf("after 70 s idle: %v, want IDLE (the server closed the connection)", s)
		}
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("a call after the idle close: %v, want a new connection", err)
		}
	})
}

// A connection that does not finish its handshake within --handshake-timeout is closed.
func TestHandshakeLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lis := bufconn.Listen(1 << 20)
		serveHealth(t, []string{"--handshake-timeout=10s"}, lis)
		c, err := lis.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_, _ = io.Copy(io.Discard, c) // the server's settings, then EOF when it closes
		}()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("closed within 9 s, want the connection open until the 10 s timeout")
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Error("still open 11 s into a handshake that never came, want it closed at 10 s")
		}
	})
}

func TestConfigLimitDefaults(t *testing.T) {
	cfg, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		maxRuns: 1024, maxRunsPerCaller: 256, limitByPeerIP: false,
		startTimeout: 30 * time.Second, stallTimeout: 2 * time.Minute, maxApprovalTimeout: 24 * time.Hour,
		maxConnections: 4096, maxConnectionsPerIP: 1024, maxStreamsPerConn: 1024, handshakeTimeout: 20 * time.Second,
		keepaliveMinTime: 5 * time.Second, keepaliveTime: time.Minute, keepaliveTimeout: 20 * time.Second,
		maxConnIdle: 5 * time.Minute, maxConnAge: 0, maxConnAgeGrace: 0,
		maxHealthWatches: 1024, maxHealthWatchesPeer: 64,
		maxParkedRuns: 4096, maxParkedRunsPerCaller: 1024, maxParkedBytes: 256 << 20, maxParkedBytesPerCaller: 64 << 20,
	}
	if got := limitsOf(cfg); got != want {
		t.Errorf("limits = %+v\nwant     %+v", got, want)
	}
}

// limitsOf keeps the limit fields of cfg alone.
func limitsOf(cfg config) config {
	return config{
		maxRuns: cfg.maxRuns, maxRunsPerCaller: cfg.maxRunsPerCaller, limitByPeerIP: cfg.limitByPeerIP,
		startTimeout: cfg.startTimeout, stallTimeout: cfg.stallTimeout, maxApprovalTimeout: cfg.maxApprovalTimeout,
		maxConnections: cfg.maxConnections, maxConnectionsPerIP: cfg.maxConnectionsPerIP, maxStreamsPerConn: cfg.maxStreamsPerConn, handshakeTimeout: cfg.handshakeTimeout,
		keepaliveMinTime: cfg.keepaliveMinTime, keepaliveTime: cfg.keepaliveTime, keepaliveTimeout: cfg.keepaliveTimeout,
		maxConnIdle: cfg.maxConnIdle, maxConnAge: cfg.maxConnAge, maxConnAgeGrace: cfg.maxConnAgeGrace,
		maxHealthWatches: cfg.maxHealthWatches, maxHealthWatchesPeer: cfg.maxHealthWatchesPeer,
		maxParkedRuns: cfg.maxParkedRuns, maxParkedRunsPerCaller: cfg.maxParkedRunsPerCaller,
		maxParkedBytes: cfg.maxParkedBytes, maxParkedBytesPerCaller: cfg.maxParkedBytesPerCaller,
	}
}

func TestConfigLimitsFromFlagsAndEnvironment(t *testing.T) {
	want := config{
		maxRuns: 100, maxRunsPerCaller: 7, limitByPeerIP: true,
		startTimeout: 5 * time.Second, stallTimeout: 30 * time.Second, maxApprovalTimeout: time.Hour,
		maxConnections: 10, maxConnectionsPerIP: 3, maxStreamsPerConn: 20, handshakeTimeout: 3 * time.Second,
		keepaliveMinTime: 30 * time.Second, keepaliveTime: 2 * time.Minute, keepaliveTimeout: 10 * time.Second,
		maxConnIdle: time.Hour, maxConnAge: 6 * time.Hour, maxConnAgeGrace: time.Minute,
		maxHealthWatches: 50, maxHealthWatchesPeer: 5,
		maxParkedRuns: 300, maxParkedRunsPerCaller: 30, maxParkedBytes: 1 << 20, maxParkedBytesPerCaller: 1000,
	}
	args := []string{
		"--max-runs=100", "--max-runs-per-caller=7", "--limit-by-peer-ip",
		"--start-timeout=5s", "--stall-timeout=30s", "--max-approval-timeout=1h",
		"--max-connections=10", "--max-connections-per-ip=3", "--max-streams-per-connection=20", "--handshake-timeout=3s",
		"--keepalive-min-time=30s", "--keepalive-time=2m", "--keepalive-timeout=10s",
		"--max-connection-idle=1h", "--max-connection-age=6h", "--max-connection-age-grace=1m",
		"--max-health-watches=50", "--max-health-watches-per-peer=5",
		"--max-parked-runs=300", "--max-parked-runs-per-caller=30", "--max-parked-bytes=1048576", "--max-parked-bytes-per-caller=1000",
	}
	vars := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			value = "true"
		}
		vars[envName(name)] = value
	}
	fromFlags, err := parseConfig(args, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fromEnv, err := parseConfig(nil, env(vars), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]config{"flags": fromFlags, "environment": fromEnv} {
		if got := limitsOf(cfg); got != want {
			t.Errorf("from %s: %+v\nwant %+v", name, got, want)
		}
	}
}

// --max-runs-per-caller defaults to a quarter of --max-runs, however --max-runs is set; set
// itself (0 too) it is taken as is.
func TestConfigRunsPerCallerDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want int
	}{
		{nil, nil, 256},
		{[]string{"--max-runs=2000"}, nil, 500},
		{nil, map[string]string{"AGENTD_MAX_RUNS": "512"}, 128},
		{[]string{"--max-runs=3"}, nil, 1},
		{[]string{"--max-runs-per-caller=0"}, nil, 0},
		{nil, map[string]string{"AGENTD_MAX_RUNS_PER_CALLER": "0"}, 0},
		{[]string{"--max-runs=100", "--max-runs-per-caller=100"}, nil, 100},
	} {
		cfg, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err != nil {
			t.Errorf("parseConfig(%q, %v): %v", tc.args, tc.env, err)
			continue
		}
		if cfg.maxRunsPerCaller != tc.want {
			t.Errorf("parseConfig(%q, %v): max runs per caller %d, want %d", tc.args, tc.env, cfg.maxRunsPerCaller, tc.want)
		}
	}
}

// The caps on parked runs default to 4 times --max-runs and 256 MiB, and a caller's
// share to a quarter of each, however the total is set; set themselves (0 too) they are
// taken as they are, and with the total off the share is off too unless it is set.
func TestConfigParkedDefaults(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want [4]int64 // runs, runs per caller, bytes, bytes per caller
	}{
		{nil, nil, [4]int64{4096, 1024, 256 << 20, 64 << 20}},
		{[]string{"--max-runs=64"}, nil, [4]int64{256, 64, 256 << 20, 64 << 20}},
		{nil, map[string]string{"AGENTD_MAX_PARKED_RUNS": "10", "AGENTD_MAX_PARKED_BYTES": "4000"}, [4]int64{10, 2, 4000, 1000}},
		{[]string{"--max-parked-runs=2"}, nil, [4]int64{2, 1, 256 << 20, 64 << 20}},
		{[]string{"--max-parked-runs=0", "--max-parked-bytes=0"}, nil, [4]int64{0, 0, 0, 0}},
		{[]string{"--max-parked-runs=0", "--max-parked-runs-per-caller=5"}, nil, [4]int64{0, 5, 256 << 20, 64 << 20}},
		{[]string{"--max-parked-runs-per-caller=0", "--max-parked-bytes-per-caller=0"}, nil, [4]int64{4096, 0, 256 << 20, 0}},
	} {
		cfg, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err != nil {
			t.Errorf("parseConfig(%q, %v): %v", tc.args, tc.env, err)
			continue
		}
		if got := [4]int64{int64(cfg.maxParkedRuns), int64(cfg.maxParkedRunsPerCaller), cfg.maxParkedBytes, cfg.maxParkedBytesPerCaller}; got != tc.want {
			t.Errorf("parseConfig(%q, %v): parked caps %v, want %v", tc.args, tc.env, got, tc.want)
		}
	}
}

func TestConfigRejectsBadLimits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--max-runs=0"}, want: "--max-runs (0) must be at least 1"},
		{args: []string{"--max-runs-per-caller=-1"}, want: "--max-runs-per-caller (-1) must be at least 0"},
		{args: []string{"--max-parked-runs=-1"}, want: "--max-parked-runs (-1) must be at least 0"},
		{args: []string{"--max-parked-runs-per-caller=-2"}, want: "--max-parked-runs-per-caller (-2) must be at least 0"},
		{args: []string{"--max-parked-bytes=-1"}, want: "--max-parked-bytes (-1) must be at least 0"},
		{args: []string{"--max-parked-bytes-per-caller=-1"}, want: "--max-parked-bytes-per-caller (-1) must be at least 0"},
		{args: []string{"--start-timeout=0s"}, want: "--start-timeout (0s) must be positive"},
		{args: []string{"--stall-timeout=-1s"}, want: "--stall-timeout (-1s) must be positive"},
		{args: []string{"--max-approval-timeout=0"}, want: "--max-approval-timeout (0s) must be positive"},
		{args: []string{"--max-connections=-1"}, want: "--max-connections (-1) must be at least 0"},
		{args: []string{"--max-streams-per-connection=0"}, want: "--max-streams-per-connection (0) must be at least 1"},
		{args: []string{"--max-streams-per-connection=4294967296"}, want: "--max-streams-per-connection (4294967296) must be at most 4294967295"},
		{args: []string{"--handshake-timeout=0s"}, want: "--handshake-timeout (0s) must be positive"},
		{args: []string{"--keepalive-min-time=0s"}, want: "--keepalive-min-time (0s) must be positive"},
		{args: []string{"--keepalive-time=500ms"}, want: "--keepalive-time (500ms) must be at least 1s"},
		{args: []string{"--keepalive-timeout=0s"}, want: "--keepalive-timeout (0s) must be positive"},
		{args: []string{"--max-connection-idle=-1m"}, want: "--max-connection-idle (-1m0s) must not be negative"},
		{args: []string{"--max-connection-age=-1h"}, want: "--max-connection-age (-1h0m0s) must not be negative"},
		{args: []string{"--max-connection-age-grace=-1s"}, want: "--max-connection-age-grace (-1s) must not be negative"},
		{args: []string{"--max-health-watches=-1"}, want: "--max-health-watches (-1) must be at least 0"},
		{args: []string{"--max-health-watches-per-peer=-1"}, want: "--max-health-watches-per-peer (-1) must be at least 0"},
		{args: []string{"--limit-by-peer-ip=maybe"}, want: "limit-by-peer-ip"},
		{env: map[string]string{"AGENTD_MAX_CONNECTIONS": "many"}, want: "AGENTD_MAX_CONNECTIONS"},
		{env: map[string]string{"AGENTD_STALL_TIMEOUT": "2"}, want: "AGENTD_STALL_TIMEOUT"},
		{env: map[string]string{"AGENTD_LIMIT_BY_PEER_IP": "yes please"}, want: "AGENTD_LIMIT_BY_PEER_IP"},
		{env: map[string]string{"AGENTD_KEEPALIVE_MIN_TIME": "-5s"}, want: "--keepalive-min-time (-5s) must be positive"},
	} {
		_, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseConfig(%q, %v) error = %v, want one containing %q", tc.args, tc.env, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"--max-runs-per-caller=0", "--max-connections=0", "--max-health-watches=0", "--max-health-watches-per-peer=0"},
		{"--max-connection-idle=0", "--max-connection-age=0", "--max-connection-age-grace=0"},
		{"--keepalive-time=1s", "--max-streams-per-connection=1"},
	} {
		if _, err := parseConfig(args, env(nil), io.Discard); err != nil {
			t.Errorf("parseConfig(%q) = %v, want it accepted", args, err)
		}
	}
}

// The service gets the run limits of the flags, and the caller identity they key on.
func TestServiceLimitsFromFlags(t *testing.T) {
	cfg, err := parseConfig([]string{"--max-runs=40", "--start-timeout=7s", "--stall-timeout=70s", "--max-approval-timeout=7h", "--max-message-bytes=1000"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sc := serviceLimits(cfg)
	if sc.MaxConcurrentRuns != 40 || sc.MaxRunsPerCaller != 10 || sc.StartTimeout != 7*time.Second || sc.StallTimeout != 70*time.Second || sc.MaxApprovalTimeout != 7*time.Hour || sc.MaxTranscriptBytes != 1000 {
		t.Errorf("service limits = %+v", sc)
	}
	if sc.MaxParkedRuns != 160 || sc.MaxParkedRunsPerCaller != 40 || sc.MaxParkedBytes != 256<<20 || sc.MaxParkedBytesPerCaller != 64<<20 {
		t.Errorf("parked caps = %d, %d, %d, %d; want 160, 40, 256 MiB, 64 MiB", sc.MaxParkedRuns, sc.MaxParkedRunsPerCaller, sc.MaxParkedBytes, sc.MaxParkedBytesPerCaller)
	}
	// A flag's 0 turns its cap off, which service.Config says with a negative value: its
	// 0 is the default.
	off, err := parseConfig([]string{"--max-parked-runs=0", "--max-parked-bytes=0"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if sc := serviceLimits(off); sc.MaxParkedRuns >= 0 || sc.MaxParkedRunsPerCaller >= 0 || sc.MaxParkedBytes >= 0 || sc.MaxParkedBytesPerCaller >= 0 {
		t.Errorf("parked caps turned off = %d, %d, %d, %d; want every one negative", sc.MaxParkedRuns, sc.MaxParkedRunsPerCaller, sc.MaxParkedBytes, sc.MaxParkedBytesPerCaller)
	}

	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 4321}
	anonymous := peer.NewContext(t.Context(), &peer.Peer{Addr: addr})
	token := context.WithValue(anonymous, callerKey{}, "token:1a2b3c4d")
	cert := context.WithValue(anonymous, callerKey{}, "cert:billing")
	for _, tc := range []struct {
		byPeer bool
		ctx    context.Context
		want   string
	}{
		{false, token, "token:1a2b3c4d"},
		{false, cert, "cert:billing"},
		{false, anonymous, ""},
		{false, t.Context(), ""},
		{true, token, "token:1a2b3c4d"},
		{true, anonymous, "peer:10.0.0.9"},
		{true, context.WithValue(anonymous, callerKey{}, "peer:10.0.0.9"), "peer:10.0.0.9"},
	} {
		cfg.limitByPeerIP = tc.byPeer
		if got := serviceLimits(cfg).Caller(tc.ctx); got != tc.want {
			t.Errorf("Caller with --limit-by-peer-ip=%v = %q, want %q", tc.byPeer, got, tc.want)
		}
	}
	// Logs still name an anonymous caller by its address.
	if got := callerOf(anonymous); got != "peer:10.0.0.9" {
		t.Errorf("callerOf = %q, want peer:10.0.0.9", got)
	}
}

func TestCallerLimiterLeavesAnonymousCallersAlone(t *testing.T) {
	l := newCallerLimiter(1, 1, func(ctx context.Context) string { return limitKey(ctx, false) })
	anonymous := peer.NewContext(t.Context(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
	for i := range 10 {
		if err := l.Limit(anonymous); err != nil {
			t.Fatalf("anonymous call %d: %v", i+1, err)
		}
	}
	if len(l.callers) != 0 {
		t.Errorf("%d buckets for anonymous calls, want none", len(l.callers))
	}
}

// The connection cap wraps every connection, which keeps grpc.Server from setting
// TCP_USER_TIMEOUT on it: the listener sets it instead.
func TestConnLimitListenerSetsTCPUserTimeout(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux's")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitConnections(lis, 2, 0, 20*time.Second, slog.New(slog.DiscardHandler))
	defer l.Close()
	client, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := tcpUserTimeout(t, c.(*limitedConn).Conn.(*net.TCPConn)); got != 20*time.Second {
		t.Errorf("TCP_USER_TIMEOUT = %s, want the keepalive timeout, 20s", got)
	}
}
