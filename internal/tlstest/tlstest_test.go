package tlstest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"go/build"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentd/agentd/internal/tlstest"
)

func TestIssue(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	other := tlstest.NewCA(t, "other CA")
	if ca.Cert.Subject.CommonName != "test CA" || !ca.Cert.IsCA {
		t.Errorf("CA certificate %q (IsCA %t), want a CA named test CA", ca.Cert.Subject.CommonName, ca.Cert.IsCA)
	}
	for _, tc := range []struct {
		name  string
		hosts []string
		// usage is what the certificate is good for, wrong what it is not.
		usage, wrong x509.ExtKeyUsage
	}{
		{name: "client", usage: x509.ExtKeyUsageClientAuth, wrong: x509.ExtKeyUsageServerAuth},
		{name: "server", hosts: []string{"127.0.0.1", "::1", "localhost", "policy.test"}, usage: x509.ExtKeyUsageServerAuth, wrong: x509.ExtKeyUsageClientAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := ca.Issue(t, "cn-"+tc.name, tc.hosts...)
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			if !leaf.Equal(cert.Leaf) {
				t.Error("Leaf is not the certificate issued")
			}
			if leaf.Subject.CommonName != "cn-"+tc.name {
				t.Errorf("common name %q, want %q", leaf.Subject.CommonName, "cn-"+tc.name)
			}
			if leaf.SerialNumber.Cmp(ca.Cert.SerialNumber) == 0 {
				t.Error("the certificate has its CA's serial number")
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Errorf("Verify against the CA's pool: %v", err)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err == nil {
				t.Error("the certificate verifies against another CA")
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: []x509.ExtKeyUsage{tc.wrong}}); err == nil {
				t.Errorf("the certificate verifies for %v too", tc.wrong)
			}
			for _, h := range tc.hosts {
				if err := leaf.VerifyHostname(h); err != nil {
					t.Errorf("VerifyHostname(%q): %v", h, err)
				}
			}
			if err := leaf.VerifyHostname("elsewhere.test"); err == nil {
				t.Error("the certificate is valid for elsewhere.test")
			}
		})
	}
}

func TestWriteFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	client := ca.Issue(t, "client")
	stranger := ca.Issue(t, "stranger")
	dir := t.TempDir()
	caFile, certFile, keyFile, strangerKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"), filepath.Join(dir, "stranger-key.pem")
	ca.WriteCertFile(t, caFile)
	tlstest.WriteCertFile(t, certFile, client)
	tlstest.WriteKeyFile(t, keyFile, client)
	tlstest.WriteKeyFile(t, strangerKey, stranger)

	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate:\n%s", caFile, pem)
	}
	if _, err := client.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("Verify against the CA file: %v", err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatalf("LoadX509KeyPair: %v", err)
	}
	if !pair.Leaf.Equal(client.Leaf) {
		t.Error("the certificate file holds another certificate")
	}
	if _, err := tls.LoadX509KeyPair(certFile, strangerKey); err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Errorf("LoadX509KeyPair with another certificate's key: %v, want a mismatch", err)
	}
}

func TestServeTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	other := tlstest.NewCA(t, "other CA")
	addr := tlstest.ServeTLS(t, &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, "server", "127.0.0.1")},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool,
	}, func(gs *grpc.Server) { healthpb.RegisterHealthServer(gs, health.NewServer()) })
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("address %q (%v), want one on 127.0.0.1", addr, err)
	}
	client := ca.Issue(t, "client")
	for _, tc := range []struct {
		name   string
		cfg    *tls.Config
		wantOK bool
	}{
		{name: "mTLS", cfg: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{client}}, wantOK: true},
		{name: "another CA", cfg: &tls.Config{RootCAs: other.Pool, Certificates: []tls.Certificate{client}}},
		{name: "no client certificate", cfg: &tls.Config{RootCAs: ca.Pool}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc.cfg)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
			if (err == nil) != tc.wantOK {
				t.Errorf("Check: %v, want success %t", err, tc.wantOK)
			}
		})
	}
}

// TestImports keeps the package's promise: it imports the standard library and grpc
// alone, and no file of agentd but a _test.go file imports it.
func TestImports(t *testing.T) {
	const self = "github.com/agentd/agentd/internal/tlstest"
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && imp != "google.golang.org/grpc" && !strings.HasPrefix(imp, "google.golang.org/grpc/") {
			t.Errorf("tlstest imports %s; it may import the standard library and grpc only", imp)
		}
	}

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no module root at %s: %v", root, err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no buildable Go files here
		}
		for _, imp := range p.Imports {
			if imp == self {
				t.Errorf("%s imports %s outside its tests", path, self)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
