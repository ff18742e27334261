package redislimit

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/store"
)

// Open returns a Limiter whose buckets live on the Redis server or
// cluster client talks to (a *redis.Client or *redis.ClusterClient; AUTH,
// TLS and timeouts are the client's). A *redis.Ring is ErrInvalidOptions:
// when a shard is down it sends that shard's keys to another, where the
// buckets read as full and are granted from. Limiters opened
// on the same servers with the same KeyPrefix share their limits' state.
//
// opts are as for ratelimit.Open, except that Path must be empty and
// MaxBuckets not above 0 (ErrInvalidOptions: the buckets live on the
// server, whose maxmemory bounds them), and Partitions is ignored;
// opts.Now, when set,
// replaces the servers' clock (see the package doc, "Time"). Open checks
// every master's persistence and eviction settings (ErrServerConfig,
// unless an Option accepts them), loads the function, and rejects limits
// the store cannot decide exactly (ErrInvalidConfig). A server that
// cannot be reached is ErrUnavailable.
//
// Close the Limiter, then the client: the Limiter does not close it.
func Open(client redis.UniversalClient, opts ratelimit.Options, ropts ...Option) (*ratelimit.Limiter, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: nil Redis client", ratelimit.ErrInvalidOptions)
	}
	if opts.Path != "" {
		return nil, fmt.Errorf("%w: Path %q is for the embedded file; a limiter on Redis keeps no file", ratelimit.ErrInvalidOptions, opts.Path)
	}
	if opts.MaxBuckets > 0 {
		return nil, fmt.Errorf("%w: MaxBuckets %d bounds the buckets of one process; on Redis they live on the server (bound them with its maxmemory)",
			ratelimit.ErrInvalidOptions, opts.MaxBuckets)
	}
	cfg := defaultConfig()
	for _, o := range ropts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for name, c := range opts.Limits { // before anything connects
		if err := checkWindow(name, c.Kind == ratelimit.FixedWindow, c.Period); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	if !cfg.skipCheck {
		if err := checkServers(ctx, client, &cfg); err != nil {
			return nil, err
		}
	}
	if err := loadLibrary(ctx, client); err != nil {
		return nil, err
	}
	var clock func() int64
	if opts.Now != nil {
		now := opts.Now
		clock = func() int64 { return unixNano(now()) }
	}
	s := newStore(client, &cfg, clock)
	l, err := store.OpenLimiter(opts, s)
	if err != nil {
		s.Close()
		return nil, err
	}
	return l.(*ratelimit.Limiter), nil
}

// loadLibrary loads the function library on every master (replacing a
// copy already there: the name is the source's hash, so a copy is the
// same code).
func loadLibrary(ctx context.Context, client redis.UniversalClient) error {
	return eachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error {
		name, err := c.FunctionLoadReplace(ctx, librarySource).Result()
		if err != nil {
			if isUnavailable(err) {
				return fmt.Errorf("%w: %s: %v", ratelimit.ErrUnavailable, c.Options().Addr, err)
			}
			return fmt.Errorf("%w: %s: loading the function library: %v (Redis 7.0 or later, or Valkey, is required)", ErrServerConfig, c.Options().Addr, err)
		}
		if name != libraryName {
			return fmt.Errorf("%w: %s: the library loaded as %q, not %q", ErrServerConfig, c.Options().Addr, name, libraryName)
		}
		return nil
	})
}

// isNil reports whether client is nil, or a nil pointer of go-redis's
// client types (a typed nil in the interface).
func isNil(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}
