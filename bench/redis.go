package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
	"github.com/seed7fbd42b6/ratelimit/redislimit"
)

// The Redis cells: this library on Redis (package redislimit) against
// go-redis/redis_rate (redisrate.go), on the same server and the same keys.
// The harness starts one redis-server per run, on loopback TCP with the
// durability the store requires (appendonly yes, appendfsync always), in a
// directory of the run's temporary directory, and stops it when the run
// ends; -redis ADDR uses a server of yours instead. Without either, the
// Redis cells are skipped with a line on stderr.

var redisAddr = flag.String("redis", "", "run the Redis cells (mode redis) on the server at `ADDR` (host:port, appendonly yes, appendfsync always, maxmemory-policy noeviction) instead of starting a redis-server; it is not flushed: each cell uses keys of its own, deleted after it")

// redisPool is the go-redis pool of ours on Redis: the store batches
// concurrent calls into a few function calls, so it needs few connections
// (the same size as redislimit's own benchmarks).
const redisPool = 64

func init() {
	register(&implementation{
		name: "ours", mode: "redis", remote: true,
		about: "this library on Redis (redislimit.Open; go-redis pool of 64), on a redis-server with appendfsync always",
		open:  openOursRedis,
		runs:  redisRuns,
		skip:  redisSkip,
	})
}

// redisRuns is the scenarios of the Redis cells: Limit on Zipf keys,
// LimitAll and LimitMany (redis_rate has no reservations, and a hot key
// would measure a single Redis key's serial rate).
func redisRuns(sc *scenario) bool {
	return slices.Contains([]string{"keys", "limitall", "limitmany"}, sc.name)
}

// redisSkip leaves the Redis cells out when there is no server to run
// them on.
func redisSkip() string {
	if *redisAddr != "" {
		return ""
	}
	if _, err := redistest.LookPath("redis-server"); err != nil {
		return fmt.Sprintf("bench: Redis cells skipped: %v, or -redis ADDR", err)
	}
	return ""
}

// redisServer is the run's Redis: one the harness started, or -redis's.
type redisServer struct {
	addr  string
	owned bool          // started by the harness: flushed before and after every cell
	admin *redis.Client // FLUSHALL
	cells int           // cells opened so far, for key prefixes
}

// redisFor returns the run's server, starting it on first use.
func redisFor(e *cellEnv) (*redisServer, error) {
	v, err := e.run.resource("redis", func() (any, func(), error) {
		if *redisAddr != "" {
			s := &redisServer{addr: *redisAddr, admin: redis.NewClient(&redis.Options{Addr: *redisAddr})}
			if err := s.admin.Ping(context.Background()).Err(); err != nil {
				s.admin.Close()
				return nil, nil, fmt.Errorf("-redis %s: %w", *redisAddr, err)
			}
			e.run.note("bench: Redis cells on %s (-redis; not flushed: each cell uses keys of its own, deleted after it)", s.addr)
			return s, func() { s.admin.Close() }, nil
		}
		return startRedis(filepath.Join(e.run.dir, "redis-server"), e.run.note)
	})
	if err != nil {
		return nil, err
	}
	return v.(*redisServer), nil
}

// startRedis starts a redis-server on 127.0.0.1 at a free port, with its
// files in dir and the settings the store requires, and returns it with
// the function that stops it and removes dir.
func startRedis(dir string, note func(string, ...any)) (*redisServer, func(), error) {
	srv, err := redistest.Start(redistest.Config{Dir: dir, Args: redistest.Durable()})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	s := &redisServer{addr: srv.Addr(), owned: true, admin: redis.NewClient(&redis.Options{Addr: srv.Addr()})}
	stop := func() {
		s.admin.Close()
		srv.Stop()
		os.RemoveAll(dir)
	}
	version := ""
	if info, err := s.admin.InfoMap(context.Background(), "server").Result(); err == nil {
		version = " " + info["Server"]["redis_version"]
	}
	note("bench: started redis-server%s on %s (appendonly yes, appendfsync always, save \"\") in %s, removed at exit",
		version, s.addr, dir)
	return s, stop, nil
}

// prepare readies the server for a new cell and returns the cell's key
// prefix: every cell starts from empty state, the harness's own server
// flushed, and on any server under keys no earlier cell used.
func (s *redisServer) prepare() (string, error) {
	s.cells++
	if s.owned {
		if err := s.admin.FlushAll(context.Background()).Err(); err != nil {
			return "", fmt.Errorf("FLUSHALL: %w", err)
		}
	}
	return fmt.Sprintf("rlbench:%d:%d:", os.Getpid(), s.cells), nil
}

// release, after a cell, deletes its keys: the harness's own server is
// flushed, so that its keys do not expire during the cells that follow (an
// expiry is the server's work, and a DEL fsynced to its append-only file,
// which would fall on whichever cell runs next); from -redis's, the keys
// that start with prefix are deleted, so that -redis leaves nothing behind.
func (s *redisServer) release(prefix string) error {
	ctx := context.Background()
	if s.owned {
		return s.admin.FlushAll(ctx).Err()
	}
	it := s.admin.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := s.admin.Unlink(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// client returns a go-redis client of the server with a pool of pool
// connections, all of them dialed (so that no cell pays for dialing).
func (s *redisServer) client(pool int) (*redis.Client, error) {
	c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: pool, ReadTimeout: 10 * time.Second})
	var wg sync.WaitGroup
	errs := make([]error, pool)
	for i := range pool {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Ping(context.Background()).Err()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// oursRedis is ours on Redis, with its client to close after it.
type oursRedis struct {
	*ours
	client *redis.Client
	server *redisServer
	prefix string
}

// redisCell readies the run's server for a cell (see prepare) and
// returns it, a client with a pool of pool connections, and the cell's
// key prefix.
func redisCell(e *cellEnv, pool int) (*redisServer, *redis.Client, string, error) {
	s, err := redisFor(e)
	if err != nil {
		return nil, nil, "", err
	}
	prefix, err := s.prepare()
	if err != nil {
		return nil, nil, "", err
	}
	c, err := s.client(pool)
	if err != nil {
		return nil, nil, "", err
	}
	return s, c, prefix, nil
}

func openOursRedis(e *cellEnv) (impl, error) {
	s, c, prefix, err := redisCell(e, redisPool)
	if err != nil {
		return nil, err
	}
	l, err := redislimit.Open(c, ratelimit.Options{Limits: ourLimits(e.defs)}, redislimit.KeyPrefix(prefix))
	if err != nil {
		c.Close()
		return nil, err
	}
	return &oursRedis{ours: &ours{l: l, ctx: context.Background()}, client: c, server: s, prefix: prefix}, nil
}

func (o *oursRedis) close() error {
	return errors.Join(o.ours.close(), o.client.Close(), o.server.release(o.prefix))
}
