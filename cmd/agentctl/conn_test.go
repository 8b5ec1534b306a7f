package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

func TestBearerTokenHeader(t *testing.T) {
	t.Parallel()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# agentctl's test\ns3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startAgentd(t, nil, "--auth-tokens-file", tokens)
	conn := []string{"--addr", addr, "--plaintext"}

	r := ctl{}.run(t, args(conn, "agents")...)
	if r.code != exitFailed || !strings.Contains(r.stderr, "Unauthenticated") || !strings.Contains(r.stderr, "-H 'authorization: Bearer <token>'") {
		t.Errorf("no token: %s", r)
	}
	r = ctl{}.run(t, args(conn, "-H", "Authorization: Bearer wrong", "agents")...)
	if r.code != exitFailed || !strings.Contains(r.stderr, "Unauthenticated") {
		t.Errorf("wrong token: %s", r)
	}
	r = ctl{}.run(t, args(conn, "-H", "authorization: Bearer s3cret-token", "agents")...)
	wantOutput(t, r, exitOK, "demo  demo:agentd-demo")

	// The token from the environment, kept off the command line; the run stream carries it too.
	c := ctl{env: map[string]string{"AGENTD_TOKEN": "s3cret-token", "AGENTCTL_ADDR": addr, "AGENTCTL_PLAINTEXT": "true"}}
	r = c.run(t, "run", "--expand-headers", "-H", "authorization: Bearer ${AGENTD_TOKEN}", "what is 12*7?")
	wantOutput(t, r, exitOK, "12*7 = 84")
	r = ctl{}.run(t, args(conn, "--expand-headers", "-H", "authorization: Bearer ${NOT_SET}", "agents")...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "NOT_SET not set") {
		t.Errorf("unset variable: %s", r)
	}
}

// With no agentd at --addr, every command says so, naming the address and what would
// make one answer, instead of gRPC's "connection error: desc = …".
func TestNoServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, tc := range []struct {
		args  []string
		stdin string
	}{
		{args: []string{"agents"}},
		{args: []string{"run", "hi"}},
		{args: []string{"attach", "run_3mrar9q3b937x"}},
		{args: []string{"chat"}, stdin: "hi\n"},
		{args: []string{"threads"}},
		{args: []string{"threads", "show", "thread_3mrar9q3b937x"}},
		{args: []string{"threads", "delete", "thread_3mrar9q3b937x"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := ctl{stdin: strings.NewReader(tc.stdin)}.run(t, args([]string{"--addr", addr}, tc.args...)...)
			want := "no agentd answers at " + addr + " (connection refused)\n" +
				"  start one with: go run ./cmd/agentd (in agentd's source tree), or point --addr (or AGENTCTL_ADDR) at one that runs\n"
			if r.code != exitFailed || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "desc =") {
				t.Errorf("%s\nwant exit %d and stderr with:\n%s", r, exitFailed, want)
			}
		})
	}
	t.Run("AGENTCTL_ADDR", func(t *testing.T) {
		t.Parallel()
		r := ctl{env: map[string]string{"AGENTCTL_ADDR": addr}}.run(t, "agents")
		if want := "agentctl: ListAgents: no agentd answers at " + addr + " (connection refused)\n"; !strings.HasPrefix(r.stderr, want) {
			t.Errorf("%s\nwant stderr to start with:\n%s", r, want)
		}
	})
}

// dialFailure tells a connection that could not be made from agentd's answers.
func TestDialFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   *status.Status
		want string
	}{
		{status.New(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`), "connection refused"},
		{status.New(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 192.0.2.1:50051: i/o timeout"`), "i/o timeout"},
		{status.New(codes.Unavailable, `name resolver error: produced zero addresses`), noAddress},
		{status.New(codes.Unavailable, `agentd is draining`), ""},
		{status.New(codes.Internal, `Error while dialing: connection refused`), ""},
	} {
		if got := dialFailure(tc.st); got != tc.want {
			t.Errorf("dialFailure(%v) = %q, want %q", tc.st, got, tc.want)
		}
	}
	e := env{addr: "agentd.example.com:443"}
	if got, want := e.noServer("i/o timeout"), "no agentd answers at agentd.example.com:443 (i/o timeout)\n  is agentd running there"; !strings.HasPrefix(got, want) {
		t.Errorf("noServer = %q, want it to start %q", got, want)
	}
	if got, want := e.noServer(noAddress), "check the host name in --addr (or AGENTCTL_ADDR)"; !strings.Contains(got, want) {
		t.Errorf("noServer = %q, want it to say %q", got, want)
	}
}

func TestTLSFlags(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	addr := startAgentd(t, credentials.NewTLS(&tls.Config{
		RootCAs:      pki.pool,
		ServerName:   "agentd.test",
		Certificates: []tls.Certificate{pki.clientPair},
	}), "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--client-ca", pki.caCert)
	mtls := []string{"--addr", addr, "--cacert", pki.caCert, "--servername", "agentd.test", "--cert", pki.clientCert, "--key", pki.clientKey}

	r := ctl{}.run(t, args(mtls, "run", "what is 12*7?")...)
	wantOutput(t, r, exitOK, "12*7 = 84")

	// --insecure skips verifying the server, not presenting the client's certificate.
	r = ctl{}.run(t, "--addr", addr, "--insecure", "--cert", pki.clientCert, "--key", pki.clientKey, "agents")
	wantOutput(t, r, exitOK, "demo  demo:agentd-demo")

	for name, flags := range map[string][]string{
		"unknown CA":           {"--addr", addr, "--servername", "agentd.test", "--cert", pki.clientCert, "--key", pki.clientKey},
		"wrong name":           {"--addr", addr, "--cacert", pki.caCert, "--cert", pki.clientCert, "--key", pki.clientKey},
		"no client cert":       {"--addr", addr, "--cacert", pki.caCert, "--servername", "agentd.test"},
		"plaintext to TLS":     {"--addr", addr, "--plaintext"},
		"not a PEM CA":         {"--addr", addr, "--cacert", pki.clientKey + ".missing"},
		"cert without its key": {"--addr", addr, "--cert", pki.clientCert},
	} {
		r := ctl{}.run(t, args(flags, "agents")...)
		if r.code == exitOK {
			t.Errorf("%s: agents succeeded: %s", name, r)
		}
	}
	r = ctl{}.run(t, "--addr", sharedAgentd(t), "agents") // plain text to loopback, with no flag
	wantOutput(t, r, exitOK, "demo  demo:agentd-demo")
	r = ctl{}.run(t, "--addr", sharedAgentd(t), "--plaintext=false", "agents") // TLS to a plain-text agentd
	if r.code != exitFailed || !strings.Contains(r.stderr, "add --plaintext") {
		t.Errorf("TLS to plain text: %s, want the --plaintext hint", r)
	}
}

// testPKI is a CA with a server certificate for agentd.test and a client certificate, in
// PEM files.
type testPKI struct {
	caCert, serverCert, serverKey, clientCert, clientKey string
	pool                                                 *x509.CertPool
	clientPair                                           tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "agentctl test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, name string, usage x509.ExtKeyUsage, dns []string) (certPath, keyPath string) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			DNSNames:     dns,
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := &testPKI{caCert: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.serverCert, p.serverKey = issue(2, "server", x509.ExtKeyUsageServerAuth, []string{"agentd.test"})
	p.clientCert, p.clientKey = issue(3, "client", x509.ExtKeyUsageClientAuth, nil)
	if p.clientPair, err = tls.LoadX509KeyPair(p.clientCert, p.clientKey); err != nil {
		t.Fatal(err)
	}
	return p
}
