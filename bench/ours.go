package main

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func init() {
	register(&implementation{
		name: "ours", mode: "memory", variants: true,
		about: "this library, state in memory (Options.Path empty)",
		open: func(e *cellEnv) (impl, error) {
			return openOurs(ratelimit.Options{Partitions: e.cfg.partitions}, e.defs)
		},
	})
	register(&implementation{
		name: "ours", mode: "durable", variants: true,
		about: "this library, every grant group-committed to a new bbolt file before it is answered",
		open: func(e *cellEnv) (impl, error) {
			return openOurs(ratelimit.Options{
				Path:           filepath.Join(e.dir, "ours.db"),
				Partitions:     e.cfg.partitions,
				LogPreallocate: e.cfg.preallocate,
			}, e.defs)
		},
	})
}

// ours adapts the library to impl. Every limit of every scenario is
// registered in Options.Limits, so requests carry only a name and a key.
type ours struct {
	l   *ratelimit.Limiter
	ctx context.Context
}

// ourScratch is a worker's reusable request and decision buffers, so the
// harness allocates nothing per call.
type ourScratch struct {
	reqs []ratelimit.Request
	out  []ratelimit.Decision
}

func (d *limitDef) config() ratelimit.Config {
	return ratelimit.Config{
		Kind:        ratelimit.TokenBucket,
		Rate:        d.rate,
		Period:      time.Second,
		Capacity:    d.capacity,
		MaxReserved: d.maxReserved,
		Shards:      d.shards,
	}
}

// ourLimits is Options.Limits for every limit in defs.
func ourLimits(defs []*limitDef) map[string]ratelimit.Config {
	m := make(map[string]ratelimit.Config, len(defs))
	for _, d := range defs {
		m[d.name] = d.config()
	}
	return m
}

// openOurs opens the library with opts (the harness's settings) and
// every limit in defs; opts.Path "" is memory mode.
func openOurs(opts ratelimit.Options, defs []*limitDef) (impl, error) {
	opts.Limits = ourLimits(defs)
	l, err := ratelimit.Open(opts)
	if err != nil {
		return nil, err
	}
	return &ours{l: l, ctx: context.Background()}, nil
}

// decided turns the library's answer into (granted, error); a denial that
// comes back as an error wrapping ErrRateLimited is a denial.
func decided(st ratelimit.Status, err error) (bool, error) {
	if err != nil {
		if errors.Is(err, ratelimit.ErrRateLimited) {
			return false, nil
		}
		return false, err
	}
	return st.OK, nil
}

func (o *ours) limit(d *limitDef, key string, reserve bool) (bool, error) {
	return decided(o.l.Limit(o.ctx, ratelimit.Request{Name: d.name, Key: key, Count: 1, Reserve: reserve}))
}

func (o *ours) limitAll(a *limitDef, ka string, b *limitDef, kb string) (bool, error) {
	// Called the way a user would; if the variadic slice escapes inside
	// the library, the allocation is the library's and is counted.
	return decided(o.l.LimitAll(o.ctx,
		ratelimit.Request{Name: a.name, Key: ka, Count: 1},
		ratelimit.Request{Name: b.name, Key: kb, Count: 1}))
}

func (o *ours) limitMany(w *worker, d *limitDef, keys []string, ok []bool) {
	s, _ := w.scratch.(*ourScratch)
	if s == nil {
		s = &ourScratch{}
		w.scratch = s
	}
	s.reqs = s.reqs[:0]
	for _, k := range keys {
		s.reqs = append(s.reqs, ratelimit.Request{Name: d.name, Key: k, Count: 1})
	}
	s.out = o.l.LimitMany(o.ctx, s.reqs, s.out)
	for i := range ok {
		ok[i] = false
		if i >= len(s.out) {
			w.fail(errShortBatch)
			continue
		}
		var err error
		ok[i], err = decided(s.out[i].Status, s.out[i].Err)
		if err != nil {
			w.fail(err)
		}
	}
}

var errShortBatch = errors.New("LimitMany returned fewer decisions than requests")

func (o *ours) close() error { return o.l.Close() }

// logTotals are zero in memory mode.
func (o *ours) logTotals() logTotals {
	s := o.l.Stats()
	return logTotals{commits: s.WALCommits, records: s.WALRecords, time: s.WALCommitTime}
}
