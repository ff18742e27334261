package server

import (
	"crypto/x509"
	"path/filepath"
	"testing"
)

// A reload picks up rotated files; bad ones fail the reload (counted and
// reported like a bad configuration), and the current ones stay.
func TestCertificatesReload(t *testing.T) {
	dir, f, c := testCertificates(t)
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
