package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"testing"
	"time"
)

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

// A reload picks up rotated files; bad ones fail the reload (counted and
// reported like a bad configuration), and the current ones stay.
func TestCertificatesReload(t *testing.T) {
	dir := t.TempDir()
	f := selfSigned(t, dir, "one")
	c, err := newCertificates(f)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func() string {
		cfg, _ := c.config("h2").GetConfigForClient(nil)
		cert, _ := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
		return cert.Subject.CommonName
	}
	if leaf() != "one" {
		t.Fatal(leaf())
	}
	s, _ := newTestServer(t, testRules)
	r := s.reload
	r.tls = c
	selfSigned(t, dir, "two")
	if err := r.reload("test"); err != nil || leaf() != "two" || r.stats().good != 1 {
		t.Errorf("after rotation: %v, %s, %+v", err, leaf(), r.stats())
	}
	writeFile(t, f.KeyFile, "garbage")
	if err := r.reload("test"); err == nil || leaf() != "two" || r.stats().bad != 1 || r.stats().lastOK {
		t.Errorf("after a bad key: %v, %s, %+v; want a failed reload, the previous certificate serving", err, leaf(), r.stats())
	}
	f = selfSigned(t, dir, "three")
	bad := filepath.Join(dir, "ca.pem")
	writeFile(t, bad, "no certificate here")
	if _, err := newCertificates(TLSFiles{CertFile: f.CertFile, KeyFile: f.KeyFile, ClientCAFile: bad}); err == nil {
		t.Error("a client CA file without a certificate was accepted")
	}
}
