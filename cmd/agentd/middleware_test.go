package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/service"
)

// The tokens the tests configure; the log must never show any of them, nor a wrong one.
const (
	tokenA     = "tok-alpha-3f9c1d7e5b2a8064"
	tokenB     = "tok-bravo-71e0c2d94a6b385f"
	wrongToken = "tok-wrong-0000000000000000"
)

// testServer is agentd's real grpc.Server with the real service on a loopback port.
type testServer struct {
	addr string
	log  *logtest.Buffer
	svc  *service.Server
}

// hookSet is what startServer passes serverOptions in the hooks' place.
type hookSet struct {
	unary  []grpc.UnaryServerInterceptor
	stream []grpc.StreamServerInterceptor
}

// startServer serves agentd, configured by args (as on the command line), until the test
// ends; its log goes to the returned server's buffer at debug level.
func startServer(t *testing.T, args []string, hs hookSet) *testServer {
	t.Helper()
	cfg, err := parseConfig(append([]string{"--demo-delay=0"}, args...), env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	buf := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts, err := serverOptions(cfg, log, hs.unary, hs.stream)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.close() })
	gs := grpc.NewServer(opts...)
	srv.register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveTest(t, gs, lis, cfg, log)
	return &testServer{addr: lis.Addr().String(), log: buf, svc: srv.Server}
}

// dial connects to addr with the given transport credentials (nil: plaintext).
func dial(t testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// askDemo runs the demo agent's "what is 2+2?" through ExecuteRun.
func askDemo(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	out, err := agentdv1.NewAgentServiceClient(conn).ExecuteRun(ctx, &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	return out.GetResult().GetFinalText(), err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func tokensFile(t *testing.T) string {
	return writeFile(t, "tokens", "# agentd tokens\n\n"+tokenA+"\n  "+tokenB+"  \n")
}

func TestBearerAuth(t *testing.T) {
	ts := startServer(t, []string{"--auth-tokens-file", tokensFile(t)}, hookSet{})
	conn := dial(t, ts.addr, nil)
	ctx := t.Context()

	_, err := askDemo(ctx, conn)
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "missing bearer token") {
		t.Errorf("no token: %v, want UNAUTHENTICATED: missing bearer token", err)
	}
	_, err = askDemo(withToken(ctx, wrongToken), conn)
	if status.Code(err) != codes.Unauthenticated || strings.Contains(err.Error(), wrongToken) {
		t.Errorf("wrong token: %v, want UNAUTHENTICATED not naming the token", err)
	}
	_, err = askDemo(metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+tokenA), conn)
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("token under another scheme: %v, want UNAUTHENTICATED", err)
	}
	for _, tok := range []string{tokenA, tokenB} {
		if got, err := askDemo(withToken(ctx, tok), conn); err != nil || got != "2+2 = 4" {
			t.Errorf("right token: ExecuteRun = %q, %v; want 2+2 = 4", got, err)
		}
	}

	// A stream needs the token too.
	stream, err := agentdv1.NewAgentServiceClient(conn).StartRun(ctx, &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("StartRun without a token: %v, want UNAUTHENTICATED", err)
	}
	stream, err = agentdv1.NewAgentServiceClient(conn).StartRun(withToken(ctx, tokenA), &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("StartRun with a token: %v", err)
		}
	}

	// Health and reflection need none.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without a token: %v, %v; want SERVING", resp.GetStatus(), err)
	}
	if services, err := listServices(ctx, conn); err != nil || !strings.Contains(strings.Join(services, ","), "agentd.v1.AgentService") {
		t.Errorf("reflection without a token: %v, %v; want the services listed", services, err)
	}

	// The log names callers by a hash and never shows a token, right or wrong.
	logged := ts.log.String()
	for _, tok := range []string{tokenA, tokenB, wrongToken} {
		if strings.Contains(logged, tok) {
			t.Errorf("the log shows token %q:\n%s", tok, logged)
		}
	}
	callers := map[string]bool{}
	finished := 0
	for _, line := range ts.log.Records(t) {
		if line["msg"] != "finished call" {
			continue
		}
		finished++
		for _, key := range []string{"grpc.method", "grpc.code", "grpc.time_ms", "peer.address"} {
			if _, ok := line[key]; !ok {
				t.Errorf("finished call without %s: %v", key, line)
			}
		}
		if c, ok := line["caller"].(string); ok {
			callers[c] = true
		}
		if _, ok := line["grpc.request.content"]; ok {
			t.Errorf("a payload was logged: %v", line)
		}
	}
	if finished < 9 {
		t.Errorf("%d finished call lines, want one per RPC (9)", finished)
	}
	if len(callers) != 2 {
		t.Errorf("callers logged = %v, want the two tokens' identities", callers)
	}
	for c := range callers {
		if !strings.HasPrefix(c, "token:") {
			t.Errorf("caller %q, want token:<hash>", c)
		}
	}
}

func listServices(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	// End the call and wait for the server to end it too, so that its log is complete.
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); err != io.EOF {
		return nil, fmt.Errorf("after CloseSend: %v, want EOF", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names, nil
}

func TestNoTokensFileMeansNoAuth(t *testing.T) {
	ts := startServer(t, nil, hookSet{})
	conn := dial(t, ts.addr, nil)
	if got, err := askDemo(t.Context(), conn); err != nil || got != "2+2 = 4" {
		t.Errorf("ExecuteRun = %q, %v; want 2+2 = 4 with no auth configured", got, err)
	}
	if !strings.Contains(ts.log.String(), `"caller":"peer:127.0.0.1"`) {
		t.Errorf("log does not name the caller by its peer address:\n%s", ts.log.String())
	}
}

func TestRateLimitPerCaller(t *testing.T) {
	// 0.001 a second: the bucket does not refill during the test.
	ts := startServer(t, []string{"--auth-tokens-file", tokensFile(t), "--rate-limit=0.001", "--rate-burst=2"}, hookSet{})
	conn := dial(t, ts.addr, nil)
	agents := agentdv1.NewAgentServiceClient(conn)
	ctxA := withToken(t.Context(), tokenA)
	for i := range 2 {
		if _, err := agents.ListAgents(ctxA, &agentdv1.ListAgentsRequest{}); err != nil {
			t.Fatalf("call %d within the burst: %v", i+1, err)
		}
	}
	_, err := agents.ListAgents(ctxA, &agentdv1.ListAgentsRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("call past the burst: %v, want RESOURCE_EXHAUSTED", err)
	}
	stream, err := agents.StartRun(ctxA, &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("stream past the burst: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := agents.ListAgents(withToken(t.Context(), tokenB), &agentdv1.ListAgentsRequest{}); err != nil {
		t.Errorf("another caller from the same address: %v, want its own budget", err)
	}
	for range 3 {
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("health while limited: %v, want it exempt", err)
		}
	}
	if strings.Contains(ts.log.String(), tokenA) {
		t.Error("the log shows a token")
	}
}

func TestCallerLimiterForgetsRefilledBuckets(t *testing.T) {
	l := newCallerLimiter(1, 1, func(ctx context.Context) string { return limitKey(ctx, false) })
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := range minSweep {
		ctx := context.WithValue(t.Context(), callerKey{}, "token:"+string(rune('a'+i%26))+strings.Repeat("x", i))
		if err := l.Limit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Second) // every bucket is full again
	if err := l.Limit(context.WithValue(t.Context(), callerKey{}, "token:new")); err != nil {
		t.Fatal(err)
	}
	if n := len(l.callers); n != 1 {
		t.Errorf("%d buckets after the sweep, want only the new caller's", n)
	}
	busy := context.WithValue(t.Context(), callerKey{}, "token:new")
	if err := l.Limit(busy); err == nil {
		t.Error("second call within a second passed a 1/s limit with burst 1")
	}
}

// panicky is a health service whose Check and Watch panic for the service "boom".
type panicky struct {
	healthpb.UnimplementedHealthServer
}

func (panicky) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.GetService() == "boom" {
		panic("boom")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (panicky) Watch(req *healthpb.HealthCheckRequest, _ grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	panic("boom")
}

func TestPanicBecomesInternal(t *testing.T) {
	cfg, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	buf := &logtest.Buffer{}
	// The hook interceptors sit outside recovery: they see the panic as an INTERNAL error.
	var mu sync.Mutex
	var hookSaw []codes.Code
	saw := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		hookSaw = append(hookSaw, status.Code(err))
	}
	unaryHook := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		saw(err)
		return resp, err
	}
	streamHook := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		saw(err)
		return err
	}
	opts, err := serverOptions(cfg, slog.New(slog.NewJSONHandler(buf, nil)), []grpc.UnaryServerInterceptor{unaryHook}, []grpc.StreamServerInterceptor{streamHook})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, panicky{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	defer func() {
		gs.Stop()
		<-served
	}()
	health := healthpb.NewHealthClient(dial(t, lis.Addr().String(), nil))

	_, err = health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "boom"})
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "goroutine") {
		t.Errorf("unary panic: %v, want INTERNAL without the stack", err)
	}
	watch, err := health.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: "boom"})
	if err == nil {
		_, err = watch.Recv()
	}
	if status.Code(err) != codes.Internal {
		t.Errorf("stream panic: %v, want INTERNAL", err)
	}
	resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("after the panics: %v, %v; want the server still serving", resp.GetStatus(), err)
	}
	panics := 0
	for _, line := range buf.Records(t) {
		if line["msg"] == "panic in an RPC handler" {
			panics++
			if line["panic"] != "boom" || !strings.Contains(line["stack"].(string), "panicky") || line["grpc.method"] == "" {
				t.Errorf("panic log line = %v, want the panic, its stack and the method", line)
			}
		}
	}
	if panics != 2 {
		t.Errorf("%d panic log lines, want 2", panics)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []codes.Code{codes.Internal, codes.Internal, codes.OK}; !slices.Equal(hookSaw, want) {
		t.Errorf("hook interceptors saw %v, want %v: recovery runs inside them", hookSaw, want)
	}
}

// Hook interceptors run after auth and rate limiting (they see the caller's identity and
// never an unauthenticated call), --audit's first, then the others in the order given.
// That they run outside recovery is TestPanicBecomesInternal's.
func TestHookInterceptorsRunAfterAuth(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	record := func(name string, ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		audits := 0
		for _, h := range hooks.FromContext(ctx) {
			if _, ok := h.(*audit.Hook); ok {
				audits++
			}
		}
		seen = append(seen, fmt.Sprintf("%s %s audit=%d", name, callerOf(ctx), audits))
	}
	hs := hookSet{
		unary: []grpc.UnaryServerInterceptor{
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
				record("unary1", ctx)
				return handler(ctx, req)
			},
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
				record("unary2", ctx)
				return handler(ctx, req)
			},
		},
		stream: []grpc.StreamServerInterceptor{
			func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
				record("stream1", ss.Context())
				return handler(srv, ss)
			},
		},
	}
	ts := startServer(t, []string{"--audit", "--auth-tokens-file", tokensFile(t), "--rate-limit=0.001", "--rate-burst=2"}, hs)
	conn := dial(t, ts.addr, nil)
	ctx := withToken(t.Context(), tokenA)

	if _, err := askDemo(t.Context(), conn); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	if got, err := askDemo(ctx, conn); err != nil || got != "2+2 = 4" {
		t.Fatalf("ExecuteRun = %q, %v", got, err)
	}
	stream, err := agentdv1.NewAgentServiceClient(conn).StartRun(ctx, &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := askDemo(ctx, conn); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("past the rate limit: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{"unary1", "unary2", "stream1"}
	if len(seen) != len(want) {
		t.Fatalf("hooks saw %q, want %q (none for the unauthenticated or limited calls)", seen, want)
	}
	for i, s := range seen {
		name, rest, _ := strings.Cut(s, " ")
		caller, audits, _ := strings.Cut(rest, " ")
		if name != want[i] || !strings.HasPrefix(caller, "token:") || audits != "audit=1" {
			t.Errorf("hook call %d = %q, want %s with the token's identity and --audit's hook on the context", i, s, want[i])
		}
	}
}

// testPKI is a CA with a server certificate (127.0.0.1, ::1, localhost) and a client
// certificate, written as PEM files.
type testPKI struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	pool                                                 *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	issue := func(tmpl *x509.Certificate, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) *x509.Certificate {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "EC PRIVATE KEY", der)
	}

	caKey := newKey()
	ca := issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "agentd test CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, &caKey.PublicKey, caKey)
	serverKey := newKey()
	server := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "agentd"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &serverKey.PublicKey, caKey)
	clientKey := newKey()
	client := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "test-client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &clientKey.PublicKey, caKey)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{
		caFile:     write("ca.pem", "CERTIFICATE", ca.Raw),
		serverCert: write("server.pem", "CERTIFICATE", server.Raw),
		serverKey:  writeKey("server-key.pem", serverKey),
		clientCert: write("client.pem", "CERTIFICATE", client.Raw),
		clientKey:  writeKey("client-key.pem", clientKey),
		pool:       pool,
	}
}

// clientCreds trusts the test CA and, with withCert, presents the client certificate.
func (p *testPKI) clientCreds(t *testing.T, withCert bool) credentials.TransportCredentials {
	t.Helper()
	tc := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(tc)
}

func TestMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	ts := startServer(t, []string{"--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--client-ca", pki.caFile}, hookSet{})

	conn := dial(t, ts.addr, pki.clientCreds(t, true))
	if got, err := askDemo(t.Context(), conn); err != nil || got != "2+2 = 4" {
		t.Errorf("client with a certificate: ExecuteRun = %q, %v; want 2+2 = 4", got, err)
	}
	if !strings.Contains(ts.log.String(), `"caller":"cert:test-client"`) {
		t.Errorf("log does not name the caller by its certificate:\n%s", ts.log.String())
	}

	noCert := dial(t, ts.addr, pki.clientCreds(t, false))
	if _, err := askDemo(t.Context(), noCert); status.Code(err) != codes.Unavailable {
		t.Errorf("client without a certificate: %v, want the connection refused (UNAVAILABLE)", err)
	}
	if _, err := healthpb.NewHealthClient(noCert).Check(t.Context(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("client without a certificate reached health")
	}
	plain := dial(t, ts.addr, nil)
	if _, err := askDemo(t.Context(), plain); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want UNAVAILABLE", err)
	}
}

func TestTLSWithTokens(t *testing.T) {
	pki := newTestPKI(t)
	ts := startServer(t, []string{"--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--auth-tokens-file", tokensFile(t)}, hookSet{})

	conn := dial(t, ts.addr, pki.clientCreds(t, false))
	if got, err := askDemo(withToken(t.Context(), tokenA), conn); err != nil || got != "2+2 = 4" {
		t.Errorf("TLS client trusting the CA, with a token: ExecuteRun = %q, %v; want 2+2 = 4", got, err)
	}
	if _, err := askDemo(t.Context(), conn); status.Code(err) != codes.Unauthenticated {
		t.Errorf("TLS client without a token: %v, want UNAUTHENTICATED", err)
	}
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health over TLS: %v, %v; want SERVING", resp.GetStatus(), err)
	}
	untrusting := dial(t, ts.addr, credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12}))
	if _, err := askDemo(withToken(t.Context(), tokenA), untrusting); status.Code(err) != codes.Unavailable {
		t.Errorf("client not trusting the CA: %v, want UNAVAILABLE", err)
	}
}

func TestServerOptionsRejectBadFiles(t *testing.T) {
	pki := newTestPKI(t)
	empty := writeFile(t, "tokens", "# nothing yet\n\n")
	notPEM := writeFile(t, "ca.pem", "not a certificate")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing tokens file", []string{"--auth-tokens-file", filepath.Join(t.TempDir(), "none")}, "--auth-tokens-file"},
		{"tokens file without tokens", []string{"--auth-tokens-file", empty}, "no tokens"},
		{"key of another certificate", []string{"--tls-cert", pki.serverCert, "--tls-key", pki.clientKey}, "--tls-key"},
		{"client CA not PEM", []string{"--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--client-ca", notPEM}, "--client-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, env(nil), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			_, err = serverOptions(cfg, slog.New(slog.DiscardHandler), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serverOptions error = %v, want one mentioning %s", err, tc.want)
			}
		})
	}
}

func TestTokenMatchingFindsEveryToken(t *testing.T) {
	tokens, err := loadTokens(tokensFile(t))
	if err != nil {
		t.Fatal(err)
	}
	a := &authenticator{tokens: tokens}
	idA, okA := a.match(tokenA)
	idB, okB := a.match(tokenB)
	if !okA || !okB || idA == idB || !strings.HasPrefix(idA, "token:") || strings.Contains(idA, tokenA) {
		t.Errorf("match = (%q, %v), (%q, %v); want two distinct token:<hash> identities", idA, okA, idB, okB)
	}
	for _, bad := range []string{"", wrongToken, tokenA[:len(tokenA)-1], tokenA + "x", " " + tokenA} {
		if id, ok := a.match(bad); ok {
			t.Errorf("match(%q) = %q, want no match", bad, id)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "0.0.0.0:1": false, "[::]:1": false, "10.1.2.3:1": false} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := isLoopback(tcp); got != want {
			t.Errorf("isLoopback(%s) = %v, want %v", addr, got, want)
		}
	}
}

// publicListener reports a non-loopback address while it listens on loopback.
type publicListener struct{ net.Listener }

func (publicListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 50051} }

func TestServeWarnsWithoutAuthOffLoopback(t *testing.T) {
	pki := newTestPKI(t)
	for _, tc := range []struct {
		name   string
		args   []string
		public bool
		warn   bool
	}{
		{"loopback", nil, false, false},
		{"public without auth", nil, true, true},
		{"public with tokens", []string{"--auth-tokens-file", tokensFile(t)}, true, false},
		{"public with mTLS", []string{"--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--client-ca", pki.caFile}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(append([]string{"--shutdown-timeout=2s", "--drain-period=1s"}, tc.args...), env(nil), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if tc.public {
				lis = publicListener{lis}
			}
			buf := &logtest.Buffer{}
			ctx, cancel := context.WithCancel(t.Context())
			cancel() // serve starts, then shuts down at once
			if err := serve(ctx, cfg, lis, slog.New(slog.NewJSONHandler(buf, nil))); err != nil {
				t.Fatal(err)
			}
			warned := strings.Contains(buf.String(), "anyone who reaches")
			if warned != tc.warn {
				t.Errorf("warned = %v, want %v; log:\n%s", warned, tc.warn, buf.String())
			}
		})
	}
}

// serveTest serves gs on lis as agentd does (the connection cap of cfg) until the test
// ends.
func serveTest(t *testing.T, gs *grpc.Server, lis net.Listener, cfg config, log *slog.Logger) {
	t.Helper()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(limitConnections(lis, cfg.maxConnections, cfg.maxConnectionsPerIP, userTimeout(cfg), log))
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
}

// Two tokens are two callers, however alike their digests: a pair whose SHA-256 shares
// its first 32 bits (found in some tens of thousands of tries) was one caller when
// identities were that short, and could attach to, decide for and delete each other's
// runs and threads.
func TestTokenIdentitiesAreWholeDigests(t *testing.T) {
	seen := map[[4]byte]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		tok := fmt.Sprintf("tok-collide-%d", i)
		sum := sha256.Sum256([]byte(tok))
		prefix := [4]byte(sum[:4])
		if other, ok := seen[prefix]; ok {
			a, b = other, tok
		}
		seen[prefix] = tok
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(a+"\n"+b+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := loadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	authn := &authenticator{tokens: tokens}
	idA, okA := authn.match(a)
	idB, okB := authn.match(b)
	if !okA || !okB || idA == idB {
		t.Errorf("tokens %q and %q are callers %q and %q (%v, %v), want two callers", a, b, idA, idB, okA, okB)
	}
}
