package main

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// go-redis/redis_rate, the usual Redis rate limiter in Go: GCRA in one Lua
// script per decision, on the server's clock. A GCRA limit of Rate per
// second with Burst is the token bucket of the same rate and capacity
// starting full, so its denials are comparable with ours.
func init() {
	register(&implementation{
		name: "redis_rate", mode: "redis", remote: true,
		about: "go-redis/redis_rate v10, a pool connection per caller, a script call per decision; LimitAll: Allow on " +
			"the key then the global limit (not atomic); LimitMany: one Allow after another (Allow cannot be pipelined)",
		open: openRedisRate,
		runs: redisRuns,
		skip: redisSkip,
	})
}

type redisRate struct {
	server *redisServer
	client *redis.Client
	rl     *redis_rate.Limiter
	prefix string
	limits map[*limitDef]rateLimit
	ctx    context.Context
}

// rateLimit is a limit as redis_rate takes it, and the start of its keys
// (built once, as our store builds its key prefixes once).
type rateLimit struct {
	limit     redis_rate.Limit
	keyPrefix string
}

// redisRatePrefix starts every key redis_rate writes.
const redisRatePrefix = "rate:"

var errNoReserve = errors.New("redis_rate has no reservations")

func openRedisRate(e *cellEnv) (impl, error) {
	limits := map[*limitDef]rateLimit{}
	for _, d := range e.defs {
		if d.rate != math.Trunc(d.rate) || d.capacity != math.Trunc(d.capacity) || d.rate < 1 || d.capacity < 1 {
			return nil, fmt.Errorf("redis_rate: limit %q: rate %g/s and capacity %g must be whole numbers", d.name, d.rate, d.capacity)
		}
	}
	s, c, prefix, err := redisCell(e, e.callers)
	if err != nil {
		return nil, err
	}
	for _, d := range e.defs {
		limits[d] = rateLimit{redis_rate.Limit{Rate: int(d.rate), Burst: int(d.capacity), Period: 1e9}, prefix + d.name + ":"}
	}
	return &redisRate{server: s, client: c, rl: redis_rate.NewLimiter(c), prefix: prefix, limits: limits, ctx: context.Background()}, nil
}

func (r *redisRate) allow(d *limitDef, key string) (bool, error) {
	l := r.limits[d]
	res, err := r.rl.Allow(r.ctx, l.keyPrefix+key, l.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (r *redisRate) limit(d *limitDef, key string, reserve bool) (bool, error) {
	if reserve {
		return false, errNoReserve
	}
	return r.allow(d, key)
}

// limitAll asks the key's limit, then, if it granted, the global one: two
// round trips, and a key token taken even when the global limit denies.
func (r *redisRate) limitAll(a *limitDef, ka string, b *limitDef, kb string) (bool, error) {
	ok, err := r.allow(a, ka)
	if !ok || err != nil {
		return false, err
	}
	return r.allow(b, kb)
}

// limitMany decides the requests one Allow after another.
func (r *redisRate) limitMany(w *worker, d *limitDef, keys []string, ok []bool) {
	for i, k := range keys {
		var err error
		if ok[i], err = r.allow(d, k); err != nil {
			w.fail(err)
		}
	}
}

func (r *redisRate) close() error {
	return errors.Join(r.client.Close(), r.server.release(redisRatePrefix+r.prefix))
}
