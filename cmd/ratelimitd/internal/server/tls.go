package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// TLSFiles name the PEM files of the server's TLS.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, requires every client to present a
	// certificate signed by one of these CAs (mTLS).
	ClientCAFile string
}

// certificates hold the server's current certificate and client CAs,
// re-read on reload so that rotated files take effect without a
// restart.
type certificates struct {
	files TLSFiles
	cur   atomic.Pointer[loadedCerts]
}

type loadedCerts struct {
	cert *tls.Certificate
	cas  *x509.CertPool
}

func newCertificates(files TLSFiles) (*certificates, error) {
	c := &certificates{files: files}
	l, err := files.load()
	if err != nil {
		return nil, err
	}
	c.cur.Store(l)
	return c, nil
}

func (f TLSFiles) load() (*loadedCerts, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	l := &loadedCerts{cert: &cert}
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		l.cas = x509.NewCertPool()
		if !l.cas.AppendCertsFromPEM(pem) {
			return nil, errors.New("TLS client CA: no certificate in " + f.ClientCAFile)
		}
	}
	return l, nil
}

// config returns a TLS configuration, offering protos by ALPN, that
// serves the current certificate (and requires client certificates when
// a client CA is set) at each handshake.
func (c *certificates) config(protos ...string) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: protos}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		l := c.cur.Load()
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: protos, Certificates: []tls.Certificate{*l.cert}}
		if l.cas != nil {
			cfg.ClientCAs, cfg.ClientAuth = l.cas, tls.RequireAndVerifyClientCert
		}
		return cfg, nil
	}
	return base
}
