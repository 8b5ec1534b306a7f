package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// CA is a certificate authority made for one test. Its fields are read-only once
// [NewCA] returns; a CA is then safe for concurrent use.
type CA struct {
	// Cert is the CA's self-signed certificate.
	Cert *x509.Certificate
	// Key signs the certificates the CA issues.
	Key *ecdsa.PrivateKey
	// Pool holds Cert alone: a tls.Config's RootCAs for clients of servers the CA
	// vouches for, or its ClientCAs for servers that verify the CA's clients.
	Pool *x509.CertPool
}

// NewCA returns a new certificate authority whose certificate has the common name name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	cert, key := newCert(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}
}

// Issue returns a certificate the CA signed for the common name cn, with a new key.
// With hosts (IP addresses or DNS names) it is a server's certificate valid for each
// of them; without, a client's certificate. The result's Leaf is set.
func (ca *CA) Issue(t testing.TB, cn string, hosts ...string) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	leaf, key := newCert(t, tmpl, ca)
	return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
}

// WriteCertFile writes the CA's certificate to path as a PEM CERTIFICATE block: a file
// of trusted roots, as x509.CertPool.AppendCertsFromPEM reads it.
func (ca *CA) WriteCertFile(t testing.TB, path string) {
	t.Helper()
	writePEM(t, path, "CERTIFICATE", ca.Cert.Raw)
}

// WriteCertFile writes cert's chain to path as PEM CERTIFICATE blocks, leaf first: the
// form tls.LoadX509KeyPair reads.
func WriteCertFile(t testing.TB, path string, cert tls.Certificate) {
	t.Helper()
	var data []byte
	for _, der := range cert.Certificate {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}

// WriteKeyFile writes cert's private key to path as a PKCS #8 PEM PRIVATE KEY block,
// the form tls.LoadX509KeyPair reads.
func WriteKeyFile(t testing.TB, path string, cert tls.Certificate) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatalf("tlstest: private key: %v", err)
	}
	writePEM(t, path, "PRIVATE KEY", der)
}

// ServeTLS starts a gRPC server that speaks TLS with cfg on a new loopback TCP port,
// and returns its address, 127.0.0.1:port. register adds the services before the server
// starts. The server stops with t.Cleanup, and a failure to serve fails the test.
func ServeTLS(t testing.TB, cfg *tls.Config, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	register(gs)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("tlstest: Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// newCert completes tmpl with a random 128-bit serial number and a validity from an
// hour ago to an hour from now, and returns the certificate made of it for a new key,
// signed by parent, or by that key itself when parent is nil.
func newCert(t testing.TB, tmpl *x509.Certificate, parent *CA) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		t.Fatalf("tlstest: serial number: %v", err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatalf("tlstest: certificate for %q: %v", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: certificate for %q: %v", tmpl.Subject.CommonName, err)
	}
	return cert, key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}
