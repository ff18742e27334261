package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/redislimit"
)

// RedisStorage keeps the buckets on Redis (7.0 or later, or Valkey): one
// server, or a Redis Cluster. Every ratelimitd opened on the same
// servers with the same Prefix shares its limits with the others.
type RedisStorage struct {
	// Addrs are host:port addresses. One address is a single server (an
	// absolute path is its unix socket); several are the seeds of a Redis
	// Cluster, which finds the other nodes itself.
	Addrs []string
	// Cluster makes a single address a cluster seed too (a cluster's
	// configuration endpoint).
	Cluster bool
	// Username and Password authenticate (AUTH; Username "" is the
	// default user).
	Username, Password string
	// TLS connects over TLS, verifying the servers against the system's
	// roots, or against CAFile's certificates when it is set (which
	// implies TLS).
	TLS    bool
	CAFile string
	// Prefix starts every key (redislimit.KeyPrefix; the flag's default
	// is redislimit.DefaultKeyPrefix). Replicas that share limits use the
	// same prefix.
	Prefix string
	// AllowNotDurable, AllowEviction and SkipConfigCheck are redislimit's
	// options of the same names: each accepts servers that may forget
	// grants (over-admission after a crash or an eviction).
	AllowNotDurable, AllowEviction, SkipConfigCheck bool
}

// validate checks the options without connecting.
func (r *RedisStorage) validate() error {
	if len(r.Addrs) == 0 {
		return fmt.Errorf("%w: no Redis address", ErrInvalidStorage)
	}
	for _, a := range r.Addrs {
		if strings.TrimSpace(a) != a || a == "" {
			return fmt.Errorf("%w: Redis address %q is empty or has spaces", ErrInvalidStorage, a)
		}
		if isUnixSocket(a) && (len(r.Addrs) > 1 || r.Cluster) {
			return fmt.Errorf("%w: Redis address %q is a unix socket: a single server only, not a cluster", ErrInvalidStorage, a)
		}
	}
	if strings.ContainsAny(r.Prefix, "{}") {
		return fmt.Errorf("%w: Redis key prefix %q contains '{' or '}'", ErrInvalidStorage, r.Prefix)
	}
	if (r.TLS || r.CAFile != "") && isUnixSocket(r.Addrs[0]) {
		return fmt.Errorf("%w: TLS to a unix socket", ErrInvalidStorage)
	}
	return nil
}

func isUnixSocket(addr string) bool { return strings.HasPrefix(addr, "/") }

// isCluster reports whether the addresses are cluster seeds.
func (r *RedisStorage) isCluster() bool { return r.Cluster || len(r.Addrs) > 1 }

// tlsConfig is the client's TLS, nil for none. The server name of each
// connection is its address's host.
func (r *RedisStorage) tlsConfig() (*tls.Config, error) {
	if !r.TLS && r.CAFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: Redis TLS CA: %w", ErrInvalidStorage, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: Redis TLS CA: no certificate in %s", ErrInvalidStorage, r.CAFile)
		}
	}
	return cfg, nil
}

// client builds the go-redis client: a Client for one server, a
// ClusterClient for cluster seeds. It does not connect. A call ends when
// its context does (go-redis otherwise waits out its own read timeout),
// so a health probe of a server that does not answer takes probeTimeout.
func (r *RedisStorage) client() (redis.UniversalClient, error) {
	tc, err := r.tlsConfig()
	if err != nil {
		return nil, err
	}
	if r.isCluster() {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Addrs, Username: r.Username, Password: r.Password,
			TLSConfig: tc, ContextTimeoutEnabled: true}), nil
	}
	o := &redis.Options{Addr: r.Addrs[0], Username: r.Username, Password: r.Password, TLSConfig: tc, ContextTimeoutEnabled: true}
	if isUnixSocket(o.Addr) {
		o.Network = "unix"
	}
	return redis.NewClient(o), nil
}

// startTimeout bounds the first PING at start.
const startTimeout = 10 * time.Second

// open opens a redislimit limiter on a new client; the store's close
// closes both.
func (r *RedisStorage) open(opts ratelimit.Options) (*store, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if opts.Logger != nil {
		redis.SetLogger(redisLogger{opts.Logger})
	}
	c, err := r.client()
	if err != nil {
		return nil, err
	}
	ropts := []redislimit.Option{redislimit.KeyPrefix(r.Prefix)}
	if r.AllowNotDurable {
		ropts = append(ropts, redislimit.AllowNotDurable())
	}
	if r.AllowEviction {
		ropts = append(ropts, redislimit.AllowEviction())
	}
	if r.SkipConfigCheck {
		ropts = append(ropts, redislimit.SkipConfigCheck())
	}
	// A first PING names what is wrong with the connection (address,
	// TLS, credentials) before Open's checks.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	err = ping(ctx, c)
	cancel()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: Redis at %s does not answer PING: %w", ratelimit.ErrUnavailable, strings.Join(r.Addrs, ","), err)
	}
	lim, err := redislimit.Open(c, opts, ropts...)
	if err != nil {
		c.Close()
		if errors.Is(err, redislimit.ErrServerConfig) {
			err = fmt.Errorf("%w (ratelimitd's flags for redislimit's options: -redis-allow-not-durable, -redis-allow-eviction, -redis-skip-config-check)", err)
		}
		return nil, err
	}
	return &store{
		lim:       lim,
		close:     func() error { return errors.Join(lim.Close(), c.Close()) },
		probe:     func(ctx context.Context) error { return ping(ctx, c) },
		transient: true,
	}, nil
}

// ping checks that every master answers.
func ping(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
	}
	return c.Ping(ctx).Err()
}

// redisLogger sends go-redis's own log lines to the server's log.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.Warn("redis client", slog.String("detail", fmt.Sprintf(format, v...)))
}
