package remote_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	"github.com/agentd/agentd/hooks/remote"
	"github.com/agentd/agentd/internal/tlstest"
	"github.com/agentd/agentd/runtime"
)

// peerName returns the common name of the client certificate the server verified, ""
// when there is none.
func peerName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 {
		return ""
	}
	return info.State.VerifiedChains[0][0].Subject.CommonName
}

func TestWithTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "hooks CA")
	other := tlstest.NewCA(t, "someone else's CA")
	serverCert := ca.Issue(t, "policy", "127.0.0.1", "localhost")
	namedCert := ca.Issue(t, "policy", "policy.hooks.test") // not valid for the address dialled
	clientCert := ca.Issue(t, "agentd")
	strangerCert := other.Issue(t, "stranger")

	tlsServer := &tls.Config{Certificates: []tls.Certificate{serverCert}}
	mtlsServer := &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}
	namedServer := &tls.Config{Certificates: []tls.Certificate{namedCert}}

	const (
		denied     = "tool t was denied: by policy"
		unverified = "hook unreachable: BeforeTool: connection error: desc = \"transport: authentication handshake failed: tls: failed to verify certificate"
	)
	for _, tc := range []struct {
		name       string
		server     *tls.Config
		client     *tls.Config
		failClosed bool
		// wantPeer is the client certificate the server saw, when it answered.
		wantPeer string
		// wantStop, when set, is what the reason of the stopped run contains; "" means
		// the server answered (the tool was denied) or, fail-open, did not (it ran).
		wantStop   string
		wantAnswer bool
	}{
		{name: "TLS", server: tlsServer, client: &tls.Config{RootCAs: ca.Pool}, wantAnswer: true},
		{name: "mTLS", server: mtlsServer, client: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{clientCert}}, wantAnswer: true, wantPeer: "agentd"},
		{name: "server name", server: namedServer, client: &tls.Config{RootCAs: ca.Pool, ServerName: "policy.hooks.test"}, wantAnswer: true},
		{name: "wrong CA, fail-open", server: tlsServer, client: &tls.Config{RootCAs: other.Pool}},
		{name: "wrong CA, fail-closed", server: tlsServer, client: &tls.Config{RootCAs: other.Pool}, failClosed: true,
			wantStop: unverified},
		{name: "system roots, fail-closed", server: tlsServer, client: nil, failClosed: true,
			wantStop: unverified},
		{name: "name not in the certificate, fail-closed", server: namedServer, client: &tls.Config{RootCAs: ca.Pool}, failClosed: true,
			wantStop: unverified},
		{name: "mTLS without a client certificate, fail-open", server: mtlsServer, client: &tls.Config{RootCAs: ca.Pool}},
		{name: "mTLS without a client certificate, fail-closed", server: mtlsServer, client: &tls.Config{RootCAs: ca.Pool}, failClosed: true,
			wantStop: "hook unreachable: BeforeTool"},
		{name: "mTLS with a certificate of another CA, fail-closed", server: mtlsServer, client: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{strangerCert}}, failClosed: true,
			wantStop: "hook unreachable: BeforeTool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var peers []string
			srv := &hookServer{beforeTool: func(ctx context.Context, _ *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
				peers = append(peers, peerName(ctx))
				return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_DENY, Reason: "by policy"}, nil
			}}
			addr := tlstest.ServeTLS(t, tc.server, func(gs *grpc.Server) { hooksv1.RegisterHookServiceServer(gs, srv) })
			h, err := remote.Dial(addr, remote.WithTLS(tc.client), remote.WithFailClosed(tc.failClosed), remote.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })

			res := run(t, h)
			switch {
			case tc.wantStop != "":
				if res.fin.Reason != runtime.EndStopped {
					t.Fatalf("run finished %v (%v), want stopped", res.fin.Reason, res.fin.Err)
				}
				se, ok := errors.AsType[*runtime.StopError](res.fin.Err)
				if !ok || se.Hook != "remote:"+addr || !strings.Contains(se.Reason, tc.wantStop) {
					t.Errorf("run error %v, want a StopError of remote:%s with a reason containing %q", res.fin.Err, addr, tc.wantStop)
				}
				if len(res.calls) != 0 {
					t.Errorf("the tool ran with %v; fail-closed must not let it run", res.calls)
				}
			case tc.wantAnswer:
				wantCompleted(t, res)
				if got := res.toolResult(t); got.Text != denied {
					t.Errorf("tool result %q, want %q from the server", got.Text, denied)
				}
				if !slices.Equal(peers, []string{tc.wantPeer}) {
					t.Errorf("the server saw the client certificates %q, want [%q]", peers, tc.wantPeer)
				}
			default: // fail-open, no answer
				wantCompleted(t, res)
				if !slices.Equal(res.calls, []string{`{"a":1}`}) || len(peers) != 0 {
					t.Errorf("the tool ran with %v and the server answered %d times; fail-open goes on without the server", res.calls, len(peers))
				}
			}
		})
	}
}

func TestDial_PlaintextOnlyToLoopbackOrUnixSocket(t *testing.T) {
	for _, tc := range []struct {
		target string
		local  bool
	}{
		{"127.0.0.1:7070", true},
		{"127.9.9.9:7070", true},
		{"localhost:7070", true},
		{"LOCALHOST.:7070", true},
		{"[::1]:7070", true},
		{"[::ffff:127.0.0.1]:7070", true},
		{":7070", true},
		{"dns:///localhost:7070", true},
		{"dns:///[::1]:7070", true},
		{"passthrough:///127.0.0.1:7070", true},
		{"ipv4:127.0.0.1:7070,127.0.0.2:7070", true},
		{"ipv6:[::1]:7070", true},
		{"unix:///run/agentd/hook.sock", true},
		{"unix:hook.sock", true},
		{"unix-abstract:agentd-hook", true},

		{"hooks.internal:7070", false},
		{"10.0.0.5:7070", false},
		{"0.0.0.0:7070", false},
		{"[::ffff:10.0.0.5]:7070", false},
		{"localhost.example.com:7070", false},
		{"127.0.0.1.nip.io:7070", false},
		{"dns:///hooks.internal:7070", false},
		{"dns://127.0.0.1:53/hooks.internal:7070", false}, // a local DNS server, a remote hook
		{"dns://127.0.0.1:53", false},
		{"ipv4:127.0.0.1:7070,10.0.0.5:7070", false},
	} {
		t.Run(tc.target, func(t *testing.T) {
			h, err := remote.Dial(tc.target)
			if tc.local {
				if err != nil {
					t.Fatalf("Dial: %v; plaintext to a loopback address or a Unix socket is the default", err)
				}
				h.Close()
				return
			}
			if !errors.Is(err, remote.ErrPlaintext) || !strings.Contains(err.Error(), tc.target) {
				if h != nil {
					h.Close()
				}
				t.Fatalf("Dial: %v; want ErrPlaintext naming the target", err)
			}
			// Credentials said aloud are honoured, TLS or plaintext.
			for _, opt := range []remote.Option{
				remote.WithTLS(nil),
				remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())),
			} {
				h, err := remote.Dial(tc.target, opt)
				if err != nil {
					t.Fatalf("Dial with credentials: %v", err)
				}
				h.Close()
			}
		})
	}
}
