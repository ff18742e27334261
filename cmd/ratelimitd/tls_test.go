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
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// pki is a test CA and what it signed.
type pki struct {
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &pki{ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// issue signs a certificate for 127.0.0.1 (server) or a client, and
// returns it and its key in PEM.
func (p *pki) issue(t *testing.T, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	p.serial++
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.Subject.CommonName = "ratelimitd"
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// Every port serves TLS with -tls-cert and -tls-key, and with
// -tls-client-ca only to clients whose certificate that CA signed.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newPKI(t)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sc, sk := ca.issue(t, true)
	cc, ck := ca.issue(t, false)
	cfg := writeConfig(t, dir, "e2e.yaml", testConfig)
	p := start(t, "-config", cfg, "-data", "", "-grpc-addr", "", "-admin-addr", "127.0.0.1:0",
		"-tls-cert", write("server.pem", sc), "-tls-key", write("server.key", sk), "-tls-client-ca", write("ca.pem", ca.caPEM))
	q := start(t, "-config", cfg, "-data", "", "-http-addr", "",
		"-tls-cert", filepath.Join(dir, "server.pem"), "-tls-key", filepath.Join(dir, "server.key"), "-tls-client-ca", filepath.Join(dir, "ca.pem"))

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.caPEM)
	clientCert, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}
	without := &tls.Config{RootCAs: roots}

	for _, c := range []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{{"client certificate", withCert, true}, {"no client certificate", without, false}} {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: c.tls}}
		for _, addr := range []string{p.httpAddr, p.adminAddr} {
			req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, "https://"+addr+"/healthcheck", nil)
			resp, err := client.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if (err == nil && resp.StatusCode == http.StatusOK) != c.ok {
				t.Errorf("HTTPS %s with %s: %v %v", addr, c.name, resp, err)
			}
		}
		conn, err := grpc.NewClient(q.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(c.tls)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "e2e",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "tls")}})
		conn.Close()
		if (err == nil) != c.ok {
			t.Errorf("gRPC with %s: %v", c.name, err)
		}
	}
}
