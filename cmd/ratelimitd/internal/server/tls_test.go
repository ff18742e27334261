package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
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

// A reload picks up rotated files, and keeps the current ones when the
// new ones are bad.
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
	selfSigned(t, dir, "two")
	var log bytes.Buffer
	c.reload(slog.New(slog.NewTextHandler(&log, nil)))
	if leaf() != "two" {
		t.Errorf("after rotation: %s", leaf())
	}
	writeFile(t, f.KeyFile, "garbage")
	c.reload(slog.New(slog.NewTextHandler(&log, nil)))
	if leaf() != "two" || !bytes.Contains(log.Bytes(), []byte("TLS files refused")) {
		t.Errorf("after a bad key: %s\n%s", leaf(), log.String())
	}
	f = selfSigned(t, dir, "three")
	bad := filepath.Join(dir, "ca.pem")
	writeFile(t, bad, "no certificate here")
	if _, err := newCertificates(TLSFiles{CertFile: f.CertFile, KeyFile: f.KeyFile, ClientCAFile: bad}); err == nil {
		t.Error("a client CA file without a certificate was accepted")
	}
}
