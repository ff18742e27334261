package ratelimit

import (
	"fmt"
	"math"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// limitDef is a validated limit: its config with defaults and the
// per-shard arithmetic parameters.
type limitDef struct {
	name     string
	nameHash uint64       // bucket.NameHash(name)
	cfg      Config       // with defaults applied
	perShard bucket.Limit // one shard's rate, capacity and maxReserved
	shards   int
	phase    int64 // fixed-window phase from cfg.Start
	hasStart bool
	// hashedPhase: a fixed window without Start, whose phase comes from a
	// hash of (name, key).
	hashedPhase bool
	inline      bool   // from a Request.Config, not Options.Limits
	gen         uint64 // the SetLimits that made it (0: Open); inline ones are never replaced
	// in is the generation of the named limits it belongs to (the map
	// Limiter.limits held), nil for an inline one (see Limiter.recent).
	in *map[string]*limitDef
	// most is the largest count full buckets grant (two full shards of a
	// sharded limit), without and with a reservation: bucket.Limit.Fits's
	// bound, computed once.
	most [2]float64
}

// newLimitDefs validates every named limit: one generation of them.
func newLimitDefs(limits map[string]Config) (*map[string]*limitDef, error) {
	defs := make(map[string]*limitDef, len(limits))
	for name, c := range limits {
		d, err := newLimitDef(name, c)
		if err != nil {
			return nil, err
		}
		defs[name] = d
	}
	for _, d := range defs {
		d.in = &defs
	}
	return &defs, nil
}

func newLimitDef(name string, c Config) (*limitDef, error) {
	if err := c.validate(name); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	n := float64(c.Shards)
	d := &limitDef{
		name:     name,
		nameHash: bucket.NameHash(name),
		cfg:      c,
		perShard: bucket.Limit{
			Kind:        bucket.Kind(c.Kind),
			Rate:        c.Rate / n,
			Period:      int64(c.Period),
			Capacity:    c.Capacity / n,
			MaxReserved: c.MaxReserved / n,
		},
		shards: c.Shards,
	}
	if !c.Start.IsZero() {
		d.phase, d.hasStart = bucket.StartPhase(c.Start.UnixNano(), int64(c.Period)), true
	}
	d.hashedPhase = c.Kind == FixedWindow && !d.hasStart
	if d.perShard.Capacity <= 0 || d.perShard.Rate <= 0 || math.IsInf(d.perShard.Capacity, 0) {
		return nil, fmt.Errorf("%w: limit %q: capacity and rate per shard must be > 0", ErrInvalidConfig, name)
	}
	if c.MaxReserved > 0 && d.perShard.MaxReserved == 0 { // 0 would mean unlimited
		return nil, fmt.Errorf("%w: limit %q: maxReserved per shard must be > 0 when set", ErrInvalidConfig, name)
	}
	d.most = [2]float64{d.perShard.MostFitting(false, d.shards > 1), d.perShard.MostFitting(true, d.shards > 1)}
	return d, nil
}

// sameBuckets reports whether d and e, limits of one name, decide its
// buckets alike: same per-shard arithmetic, shard count and phase.
func (d *limitDef) sameBuckets(e *limitDef) bool {
	return d == e || d.perShard == e.perShard && d.shards == e.shards && d.hasStart == e.hasStart && d.phase == e.phase
}

// count validates a request's count: 0 means 1; it must be finite, >= 0 and
// grantable by full buckets (two full shards of a sharded limit), as the
// decision itself computes it.
func (d *limitDef) count(n float64, reserve bool) (float64, error) {
	n, err := tokens(n)
	if err != nil {
		return 0, err
	}
	if most := d.mostCount(reserve); n > most {
		return 0, fmt.Errorf("%w: %v exceeds the most limit %q can grant at once (%v)", ErrInvalidCount, n, d.name, most)
	}
	return n, nil
}

// tokens is a request's count as a number of tokens: 0 means 1; NaN,
// infinite and negative counts are ErrInvalidCount.
func tokens(n float64) (float64, error) {
	if n == 0 {
		n = 1
	}
	if !finite(n) || n < 0 {
		return 0, fmt.Errorf("%w: %v", ErrInvalidCount, n)
	}
	return n, nil
}

// mostCount is the largest count full buckets grant.
func (d *limitDef) mostCount(reserve bool) float64 {
	if reserve {
		return d.most[1]
	}
	return d.most[0]
}

// checkKey rejects keys the log could not record, before anything is
// decided.
func checkKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}
