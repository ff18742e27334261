package server

import (
	"errors"
	"log/slog"
	"time"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/rls"
)

// Options configure a Server. Zero durations and sizes mean the
// defaults below.
type Options struct {
	// ConfigPath is the rules file or directory (package config). Required.
	ConfigPath string
	// MergeDomains lets several files configure one domain.
	MergeDomains bool
	// WatchInterval is how often the configuration's files are checked
	// for changes (names, sizes, modification times and contents); < 0
	// disables polling (SIGHUP and the admin reload still work). 0 means
	// DefaultWatchInterval.
	WatchInterval time.Duration

	// Storage is where the buckets live.
	Storage Storage

	// GRPCAddr, HTTPAddr and AdminAddr are the listening addresses; ""
	// turns that listener off (HTTP and gRPC cannot both be off). Port 0
	// picks a free port; the log's "serving" line names the ports taken.
	GRPCAddr, HTTPAddr, AdminAddr string
	// AdminHosts are the host names, besides localhost and IP addresses,
	// that the admin port answers requests addressed to (the Host
	// header); any other name is refused, so that a web page whose name
	// an attacker points at the admin address (DNS rebinding) cannot
	// read it.
	AdminHosts []string
	// TLS, when CertFile is set, serves every listener over TLS.
	TLS TLSFiles

	// Limits bound each request (engine.Limits).
	Limits engine.Limits
	// MaxRequestBytes bounds a gRPC message and an HTTP body; 0 means
	// DefaultMaxRequestBytes.
	MaxRequestBytes int
	// RequestTimeout bounds a decision whose caller set no deadline (and
	// every HTTP request); 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration

	// Headers selects the rate limit headers added to responses.
	Headers rls.Headers
	// FailOpen answers OK when the limiter cannot decide (dangerous: see
	// engine.Options.FailOpen).
	FailOpen bool
	// UnknownDomainError refuses requests for an unconfigured domain
	// (gRPC NotFound, HTTP 404) instead of answering OK.
	UnknownDomainError bool

	// DrainDelay is how long, after SIGTERM, health reports NOT_SERVING
	// while requests are still served, so that load balancers stop
	// sending before the listeners close; a second SIGTERM ends it early.
	// 0 means none.
	DrainDelay time.Duration
	// DrainTimeout bounds the wait for calls in flight once the
	// listeners close; 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration

	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultWatchInterval   = 2 * time.Second
	DefaultMaxRequestBytes = 1 << 20
	DefaultRequestTimeout  = 10 * time.Second
	DefaultDrainTimeout    = 30 * time.Second
)

func (o *Options) withDefaults() (Options, error) {
	c := *o
	if c.ConfigPath == "" {
		return c, errors.New("a configuration (-config) is required")
	}
	if c.GRPCAddr == "" && c.HTTPAddr == "" {
		return c, errors.New("at least one of the gRPC and HTTP listeners must be on")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return c, errors.New("a TLS certificate and its key go together")
	}
	if c.TLS.ClientCAFile != "" && c.TLS.CertFile == "" {
		return c, errors.New("client certificates (mTLS) need a server certificate")
	}
	if err := c.Storage.Validate(); err != nil {
		return c, err
	}
	if c.WatchInterval == 0 {
		c.WatchInterval = DefaultWatchInterval
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
