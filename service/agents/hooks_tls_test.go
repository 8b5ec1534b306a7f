package agents_test

// Remote hooks over TLS, configured in the agents file: a real HookService on loopback
// TCP behind TLS or mTLS, with certificates of a CA made by the test.

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/tlstest"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/servicetest"
)

// hookPKI is what a test's TLS needs: two CAs, certificates they signed, and PEM files
// for the agents file.
type hookPKI struct {
	pool *x509.CertPool // the hooks CA
	// ipServer is valid for 127.0.0.1 and localhost, nameServer for policy.hooks.test
	// alone.
	ipServer, nameServer tls.Certificate
	// files by name (none a part of another): hooks-ca.pem, other-ca.pem, client.pem and client-key.pem
	// (CN agentd, signed by the hooks CA), other-key.pem (the key of a certificate in no file),
	// junk.pem (no PEM at all).
	files map[string]string
}

func newHookPKI(t *testing.T) *hookPKI {
	t.Helper()
	ca := tlstest.NewCA(t, "hooks CA")
	other := tlstest.NewCA(t, "someone else's CA")
	p := &hookPKI{
		pool:       ca.Pool,
		ipServer:   ca.Issue(t, "policy", "127.0.0.1", "localhost"),
		nameServer: ca.Issue(t, "policy", "policy.hooks.test"),
		files:      map[string]string{},
	}
	dir := t.TempDir()
	file := func(name string) string {
		p.files[name] = filepath.Join(dir, name)
		return p.files[name]
	}
	client := ca.Issue(t, "agentd")
	ca.WriteCertFile(t, file("hooks-ca.pem"))
	other.WriteCertFile(t, file("other-ca.pem"))
	tlstest.WriteCertFile(t, file("client.pem"), client)
	tlstest.WriteKeyFile(t, file("client-key.pem"), client)
	tlstest.WriteKeyFile(t, file("other-key.pem"), other.Issue(t, "stranger"))
	if err := os.WriteFile(file("junk.pem"), []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyHook is a HookService that denies every tool call, and records the common
// name of each client certificate it verified ("" for none).
type policyHook struct {
	hooksv1.UnimplementedHookServiceServer
	mu    sync.Mutex
	peers []string
}

func (h *policyHook) BeforeTool(ctx context.Context, _ *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
	name := ""
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			name = info.State.VerifiedChains[0][0].Subject.CommonName
		}
	}
	h.mu.Lock()
	h.peers = append(h.peers, name)
	h.mu.Unlock()
	return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_DENY, Reason: "by policy"}, nil
}

func (h *policyHook) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.peers)
}

func TestRemoteHookTLS_AgentsFile(t *testing.T) {
	p := newHookPKI(t)
	tlsServer := &tls.Config{Certificates: []tls.Certificate{p.ipServer}}
	mtlsServer := &tls.Config{Certificates: []tls.Certificate{p.ipServer}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool}
	namedServer := &tls.Config{Certificates: []tls.Certificate{p.nameServer}}
	mtls := "{ca_file: hooks-ca.pem, cert_file: client.pem, key_file: client-key.pem}"

	for _, tc := range []struct {
		name       string
		server     *tls.Config
		host       string // of the address; 127.0.0.1 when empty
		tls        string // the entry's tls, with file names for paths
		failClosed bool
		// wantPeer, when the server answers, is the client certificate it saw.
		wantPeer string
		// wantStop, when set, is in the stopped run's error; "" means the server
		// answered (the call was denied) unless fail-open, then the call ran.
		wantStop   string
		wantAnswer bool
	}{
		{name: "TLS with a private CA", server: tlsServer, tls: "{ca_file: hooks-ca.pem}", wantAnswer: true},
		{name: "TLS to localhost", server: tlsServer, host: "localhost", tls: "{ca_file: hooks-ca.pem}", wantAnswer: true},
		{name: "mTLS", server: mtlsServer, tls: mtls, wantAnswer: true, wantPeer: "agentd"},
		{name: "server_name", server: namedServer, tls: "{ca_file: hooks-ca.pem, server_name: policy.hooks.test}", wantAnswer: true},
		{name: "wrong CA, fail-open", server: tlsServer, tls: "{ca_file: other-ca.pem}"},
		{name: "wrong CA, fail-closed", server: tlsServer, tls: "{ca_file: other-ca.pem}", failClosed: true,
			wantStop: "hook unreachable: BeforeTool: connection error: desc = \"transport: authentication handshake failed: tls: failed to verify certificate"},
		{name: "name not in the certificate, fail-closed", server: namedServer, tls: "{ca_file: hooks-ca.pem}", failClosed: true,
			wantStop: "tls: failed to verify certificate"},
		{name: "mTLS server, no client certificate, fail-open", server: mtlsServer, tls: "{ca_file: hooks-ca.pem}"},
		{name: "mTLS server, no client certificate, fail-closed", server: mtlsServer, tls: "{ca_file: hooks-ca.pem}", failClosed: true,
			wantStop: "hook unreachable: BeforeTool"},
		{name: "TLS server, plaintext client, fail-closed", server: tlsServer, tls: "", failClosed: true,
			wantStop: "hook unreachable: BeforeTool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servicetest.CheckNoLeak(t)
			hook := &policyHook{}
			addr := tlstest.ServeTLS(t, tc.server, func(gs *grpc.Server) { hooksv1.RegisterHookServiceServer(gs, hook) })
			_, port, _ := net.SplitHostPort(addr)
			tlsLine := ""
			if tc.tls != "" {
				tlsLine = "\n          tls: " + tc.tls
				for name, path := range p.files {
					tlsLine = strings.ReplaceAll(tlsLine, name, path)
				}
			}
			path := writeAgentsFile(t, fmt.Sprintf(`
agents:
  - name: guarded
    model: script:guarded
    tools: [calculate]
    hooks:
      remote:
        - address: %s
          points: [before_tool]
          fail_closed: %t%s
`, net.JoinHostPort(cmp.Or(tc.host, "127.0.0.1"), port), tc.failClosed, tlsLine), nil)
			model := &rt.Model{Steps: []rt.Step{rt.Call(0, "calculate", `{"expression":"1+1"}`), rt.Say("2")}}
			c := serveAgents(t, loadRegistry(t, path, map[string]*rt.Model{"guarded": model}))
			s := servicetest.Open(t, c, servicetest.Input("guarded", "what is 1+1?"))
			fin, err := s.Finish()
			rs := toolResults(s.Events())

			if tc.wantStop != "" {
				if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_STOPPED || !strings.Contains(fin.GetError().GetMessage(), tc.wantStop) {
					t.Fatalf("finished %v (%v), %v; want stopped with %q", fin.GetReason(), fin.GetError(), err, tc.wantStop)
				}
				if len(rs) != 0 {
					t.Errorf("results %v; the tool must not run when the hook cannot say yes", rs)
				}
				return
			}
			if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				t.Fatalf("finished %v (%v), %v; want completed", fin.GetReason(), fin.GetError(), err)
			}
			if len(rs) != 1 {
				t.Fatalf("results %v, want one", rs)
			}
			if tc.wantAnswer {
				if !rs[0].GetIsError() || !strings.Contains(rs[0].GetText(), "by policy") {
					t.Errorf("result %v; want the call denied by the hook server", rs[0])
				}
				if got := hook.seen(); !slices.Equal(got, []string{tc.wantPeer}) {
					t.Errorf("the hook server saw the client certificates %q, want [%q]", got, tc.wantPeer)
				}
				return
			}
			if rs[0].GetIsError() || len(hook.seen()) != 0 {
				t.Errorf("result %v, %d answers from the server; fail-open runs the tool without the hook", rs[0], len(hook.seen()))
			}
		})
	}
}

// remoteHooksFile is an agents file whose agent x has the remote hooks given, with the
// file names of a hookPKI for paths.
func remoteHooksFile(t *testing.T, p *hookPKI, remotes string) string {
	t.Helper()
	vars := map[string]string{}
	for name, path := range p.files {
		vars[name] = path
	}
	vars["missing.pem"] = filepath.Join(t.TempDir(), "missing.pem")
	return writeAgentsFile(t, `
agents:
  - name: x
    model: demo
    hooks:
      remote:
`+remotes, vars)
}

func TestRemoteHookTLS_ConfigErrorsNameTheFieldAndTheFix(t *testing.T) {
	p := newHookPKI(t)
	for _, tc := range []struct {
		name    string
		remotes string
		want    []string
	}{{
		name: "plaintext beyond loopback",
		remotes: `
        - address: 127.0.0.1:7070
        - address: policy.internal:7070
`,
		want: []string{`agent "x"`, "hooks.remote[1].address: policy.internal:7070 is neither on loopback nor a Unix socket", "set tls", "plaintext: true"},
	}, {
		name: "plaintext beyond loopback, dns scheme",
		remotes: `
        - address: dns:///10.1.2.3:7070
`,
		want: []string{"hooks.remote[0].address: dns:///10.1.2.3:7070 is neither on loopback nor a Unix socket"},
	}, {
		name: "tls and plaintext",
		remotes: `
        - address: policy.internal:7070
          plaintext: true
          tls: {ca_file: hooks-ca.pem}
`,
		want: []string{"hooks.remote[0]: tls and plaintext: true exclude each other"},
	}, {
		name: "missing ca_file",
		remotes: `
        - address: policy.internal:7070
          tls: {ca_file: missing.pem}
`,
		want: []string{"hooks.remote[0].tls.ca_file: open ", "missing.pem: no such file or directory"},
	}, {
		name: "ca_file without PEM",
		remotes: `
        - address: policy.internal:7070
          tls: {ca_file: junk.pem}
`,
		want: []string{"hooks.remote[0].tls.ca_file: ", "junk.pem holds no PEM certificate"},
	}, {
		name: "cert_file without key_file",
		remotes: `
        - address: policy.internal:7070
          tls: {cert_file: client.pem}
`,
		want: []string{"hooks.remote[0].tls: cert_file and key_file go together (mTLS)"},
	}, {
		name: "missing cert_file",
		remotes: `
        - address: policy.internal:7070
          tls: {cert_file: missing.pem, key_file: client-key.pem}
`,
		want: []string{"hooks.remote[0].tls.cert_file: open ", "missing.pem: no such file or directory"},
	}, {
		name: "missing key_file",
		remotes: `
        - address: policy.internal:7070
          tls: {cert_file: client.pem, key_file: missing.pem}
`,
		want: []string{"hooks.remote[0].tls.key_file: open ", "missing.pem: no such file or directory"},
	}, {
		name: "key of another certificate",
		remotes: `
        - address: policy.internal:7070
          tls: {cert_file: client.pem, key_file: other-key.pem}
`,
		want: []string{"hooks.remote[0].tls.cert_file, key_file: ", "private key does not match public key"},
	}, {
		name: "every error at once",
		remotes: `
        - address: policy.internal:7070
          tls: {ca_file: junk.pem, cert_file: missing.pem, key_file: client-key.pem}
        - address: 10.0.0.5:7070
`,
		want: []string{"hooks.remote[0].tls.ca_file: ", "hooks.remote[0].tls.cert_file: open ", "hooks.remote[1].address: 10.0.0.5:7070"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := agents.LoadFile(remoteHooksFile(t, p, tc.remotes))
			if err != nil {
				t.Fatal(err)
			}
			reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Logger: quietLog})
			if err == nil {
				reg.Close()
				t.Fatalf("NewRegistry succeeded; want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestRemoteHookTLS_AcceptedConfigs(t *testing.T) {
	p := newHookPKI(t)
	for _, remotes := range []string{
		// Plaintext where only this machine listens: the files agentd had before TLS.
		"- address: 127.0.0.1:7070",
		"- address: localhost:7070",
		"- address: '[::1]:7070'",
		"- address: dns:///localhost:7070",
		"- address: unix:///run/agentd/hook.sock",
		// Beyond loopback: TLS, or plaintext said aloud.
		"- {address: policy.internal:7070, tls: {}}",
		"- {address: policy.internal:7070, tls: {ca_file: hooks-ca.pem, cert_file: client.pem, key_file: client-key.pem, server_name: policy.hooks.test}}",
		"- {address: policy.internal:7070, plaintext: true}",
		// TLS on loopback too.
		"- {address: 127.0.0.1:7070, tls: {ca_file: hooks-ca.pem}}",
	} {
		t.Run(remotes, func(t *testing.T) {
			cfg, err := agents.LoadFile(remoteHooksFile(t, p, "        "+remotes+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.Close(); err != nil {
				t.Errorf("Registry.Close: %v", err)
			}
		})
	}
}
