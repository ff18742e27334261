package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const testRules = `domain: d
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 3}
`

// newTestServer makes a server in memory on the rules src, listening on
// free loopback ports, without running it.
func newTestServer(t *testing.T, src string) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, src)
	s, err := New(Options{ConfigPath: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.closeListeners()
		s.store.close()
	})
	return s, path
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hangBound bounds every wait for another goroutine here: a wait that
// takes longer is a hang.
const hangBound = time.Minute

// waitFor returns what ch delivers, failing t if nothing comes within
// hangBound.
func waitFor(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(hangBound):
		t.Fatalf("hang: %s still waited for after %v", what, hangBound)
		return nil
	}
}

// selfSigned writes a self-signed certificate and key named cn.
func selfSigned(t *testing.T, dir, cn string) TLSFiles {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	f := TLSFiles{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	writeFile(t, f.CertFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, f.KeyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	return f
}

// testCertificates writes a self-signed certificate and key named "one"
// in a new directory and loads them, for tests that rotate them
// (selfSigned in dir again).
func testCertificates(t *testing.T) (dir string, f TLSFiles, c *certificates) {
	t.Helper()
	dir = t.TempDir()
	f = selfSigned(t, dir, "one")
	c, err := newCertificates(f)
	if err != nil {
		t.Fatal(err)
	}
	return dir, f, c
}

// loopbackListener listens on a free loopback TCP port until the test ends.
func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
