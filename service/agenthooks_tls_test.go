package service_test

// Remote hooks over TLS, configured in the agents file: a real HookService on loopback
// TCP behind TLS or mTLS, with certificates of a CA made by the test.

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
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
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
)

// hookPKI is what a test's TLS needs: two CAs, certificates they signed, and PEM files
// for the agents file.
type hookPKI struct {
	pool *x509.CertPool // the hooks CA
	// ipServer is valid for 127.0.0.1 and localhost, nameServer for policy.hooks.test
	// alone.
	ipServer, nameServer tls.Certificate
	// files by name (none a part of another): hooks-ca.pem, other-ca.pem, client.pem and client-key.pem
	// (CN agentd, signed by the hooks CA), other-key.pem (a key of no certificate here),
	// junk.pem (no PEM at all).
	files map[string]string
}

func newHookPKI(t *testing.T) *hookPKI {
	t.Helper()
	dir := t.TempDir()
	p := &hookPKI{files: map[string]string{}}
	write := func(name, typ string, der []byte) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		p.files[name] = path
	}
	newKey := func() *ecdsa.PrivateKey {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	marshalKey := func(key *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	serial := int64(0)
	sign := func(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, parentKey *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return cert, der
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key := newKey()
		cert, der := sign(&x509.Certificate{Subject: pkix.Name{CommonName: name}, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}, nil, &key.PublicKey, key)
		return cert, key, der
	}
	ca, caKey, caDER := newCA("hooks CA")
	_, _, otherDER := newCA("someone else's CA")
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	write("hooks-ca.pem", "CERTIFICATE", caDER)
	write("other-ca.pem", "CERTIFICATE", otherDER)

	server := func(ips []net.IP, names []string) tls.Certificate {
		key := newKey()
		_, der := sign(&x509.Certificate{
			Subject: pkix.Name{CommonName: "policy"}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: ips, DNSNames: names,
		}, ca, &key.PublicKey, caKey)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p.ipServer = server([]net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	p.nameServer = server(nil, []string{"policy.hooks.test"})

	clientKey := newKey()
	_, clientDER := sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "agentd"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &clientKey.PublicKey, caKey)
	write("client.pem", "CERTIFICATE", clientDER)
	write("client-key.pem", "PRIVATE KEY", marshalKey(clientKey))
	write("other-key.pem", "PRIVATE KEY", marshalKey(newKey()))
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.files["junk.pem"] = junk
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

// serveHookTLS serves h over TLS with cfg on a loopback TCP port and returns the port.
func serveHookTLS(t *testing.T, h hooksv1.HookServiceServer, cfg *tls.Config) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	hooksv1.RegisterHookServiceServer(gs, h)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	return port
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
			checkNoLeak(t)
			hook := &policyHook{}
			port := serveHookTLS(t, hook, tc.server)
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
			s := open(t, c, input("guarded", "what is 1+1?"))
			fin, err := s.finish()
			rs := toolResults(s.events)

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
			cfg, err := service.LoadAgentsFile(remoteHooksFile(t, p, tc.remotes))
			if err != nil {
				t.Fatal(err)
			}
			reg, err := service.NewRegistry(cfg, service.RegistryOptions{Logger: quietLog})
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
			cfg, err := service.LoadAgentsFile(remoteHooksFile(t, p, "        "+remotes+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			reg, err := service.NewRegistry(cfg, service.RegistryOptions{Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.Close(); err != nil {
				t.Errorf("Registry.Close: %v", err)
			}
		})
	}
}
