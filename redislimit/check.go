package redislimit

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
)

// eachMaster runs fn on every master the client writes to. A cluster
// whose masters cannot be listed (no seed answers) is ErrUnavailable.
func eachMaster(ctx context.Context, client redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := client.(type) {
	case *redis.ClusterClient:
		err := c.ForEachMaster(ctx, fn)
		if err != nil && !errors.Is(err, ratelimit.ErrUnavailable) && !errors.Is(err, ErrServerConfig) && isUnavailable(err) {
			err = fmt.Errorf("%w: %v", ratelimit.ErrUnavailable, err)
		}
		return err
	case *redis.Client:
		return fn(ctx, c)
	case *redis.Ring:
		return fmt.Errorf("%w: a *redis.Ring sends a shard's keys to another while the shard is down, where they read as full: use a *redis.Client or a *redis.ClusterClient", ratelimit.ErrInvalidOptions)
	}
	return fmt.Errorf("%w: client type %T not supported", ratelimit.ErrInvalidOptions, client)
}

// checkServers refuses masters whose settings let them lose or evict
// buckets, unless cfg accepts it.
func checkServers(ctx context.Context, client redis.UniversalClient, cfg *config) error {
	return eachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error {
		addr := c.Options().Addr
		get := func(name string) (string, error) {
			m, err := c.ConfigGet(ctx, name).Result()
			if err != nil {
				if isUnavailable(err) {
					return "", fmt.Errorf("%w: %s: %v", ratelimit.ErrUnavailable, addr, err)
				}
				return "", fmt.Errorf("%w: %s: cannot read %s (%v); if the server forbids CONFIG (managed Redis) and you know every master runs appendonly yes, appendfsync always, no-appendfsync-on-rewrite no and maxmemory-policy noeviction, pass redislimit.SkipConfigCheck()",
					ErrServerConfig, addr, name, err)
			}
			return m[name], nil
		}
		if !cfg.allowNotDurable {
			if v, err := get("appendonly"); err != nil {
				return err
			} else if v != "yes" {
				return fmt.Errorf("%w: %s: appendonly is %q: without the append-only file a restart forgets grants (set appendonly yes and appendfsync always, or pass redislimit.AllowNotDurable())", ErrServerConfig, addr, v)
			}
			if v, err := get("appendfsync"); err != nil {
				return err
			} else if v != "always" {
				return fmt.Errorf("%w: %s: appendfsync is %q: the server acknowledges grants before they are on disk, and a crash forgets them (set appendfsync always, or pass redislimit.AllowNotDurable())", ErrServerConfig, addr, v)
			}
			if v, err := get("no-appendfsync-on-rewrite"); err != nil {
				return err
			} else if v != "no" {
				return fmt.Errorf("%w: %s: no-appendfsync-on-rewrite is %q: while the server saves or rewrites its files it acknowledges grants before they are on disk (set no-appendfsync-on-rewrite no, or pass redislimit.AllowNotDurable())", ErrServerConfig, addr, v)
			}
		}
		if !cfg.allowEviction {
			if v, err := get("maxmemory-policy"); err != nil {
				return err
			} else if v != "noeviction" {
				return fmt.Errorf("%w: %s: maxmemory-policy is %q: an evicted bucket reads as full, which over-admits (set maxmemory-policy noeviction, or pass redislimit.AllowEviction())", ErrServerConfig, addr, v)
			}
		}
		return nil
	})
}

// isUnavailable tells a server that could not be reached (or did not
// answer) from one that answered with an error.
func isUnavailable(err error) bool {
	var re redis.Error
	return !errors.As(err, &re)
}
