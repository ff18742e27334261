package ratelimit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// limitDef is a validated limit: its config with defaults and the
// per-shard arithmetic parameters.
type limitDef struct {
	name     string
	nameHash uint64       // bucket.NameHash(name)
	cfg      Config       // with defaults applied
	perShard    bucket.Limit // one shard's rate, capacity and maxReserved
	shards   int
	phase    int64 // fixed-window phase from cfg.Start
	hasStart bool
	inline   bool // from a Request.Config, not Options.Limits
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
	if d.perShard.Capacity <= 0 || d.perShard.Rate <= 0 || math.IsInf(d.perShard.Capacity, 0) {
		return nil, fmt.Errorf("%w: limit %q: capacity and rate per shard must be > 0", ErrInvalidConfig, name)
	}
	if c.MaxReserved > 0 && d.perShard.MaxReserved == 0 { // 0 would mean unlimited
		return nil, fmt.Errorf("%w: limit %q: maxReserved per shard must be > 0 when set", ErrInvalidConfig, name)
	}
	return d, nil
}

// sameBuckets reports whether d and e, limits of one name, decide its
// buckets alike: same per-shard arithmetic, shard count and phase.
func (d *limitDef) sameBuckets(e *limitDef) bool {
	return d == e || d.perShard == e.perShard && d.shards == e.shards && d.hasStart == e.hasStart && d.phase == e.phase
}

// phaseFor is the fixed-window phase of the key whose (name, key) hash is h.
func (d *limitDef) phaseFor(h uint64) int64 {
	if d.hasStart {
		return d.phase
	}
	return bucket.Phase(h, d.perShard.Period)
}

// count validates a request's count: 0 means 1; it must be finite, >= 0 and
// at most what the limit can ever grant one request (two shards' worth for a
// sharded limit).
func (d *limitDef) count(n float64, reserve bool) (float64, error) {
	if n == 0 {
		n = 1
	}
	if !finite(n) || n < 0 {
		return 0, fmt.Errorf("%w: %v", ErrInvalidCount, n)
	}
	most := d.perShard.MaxCount(reserve)
	if d.shards > 1 {
		most *= 2
	}
	if n > most {
		return 0, fmt.Errorf("%w: %v exceeds the most limit %q can grant at once (%v)", ErrInvalidCount, n, d.name, most)
	}
	return n, nil
}

// checkKey rejects keys the log could not record, before anything is
// decided.
func checkKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// resolve finds the limit a request names: its inline config, else a named
// limit.
func (l *Limiter) resolve(name string, inline *Config) (*limitDef, error) {
	if inline != nil {
		return l.inlineDef(name, *inline)
	}
	if d, ok := l.limits[name]; ok {
		return d, nil
	}
	if d, ok := l.inlineByName.Load(name); ok {
		return d.(*limitDef), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownLimit, name)
}

// inlineKey identifies an inline config by value. Start enters as Unix
// seconds and nanoseconds (defined for any time, unlike UnixNano): a
// time.Time also carries a monotonic reading and a location, which would
// make equal instants distinct keys and let the cache grow.
type inlineKey struct {
	name                        string
	kind                        Kind
	rate, capacity, maxReserved float64
	period                      time.Duration
	shards                      int
	startSec                    int64
	startNsec                   int
	hasStart                    bool
}

func keyOf(name string, c Config) inlineKey {
	k := inlineKey{name: name, kind: c.Kind, rate: c.Rate, capacity: c.Capacity, maxReserved: c.MaxReserved,
		period: c.Period, shards: c.Shards, hasStart: !c.Start.IsZero()}
	if k.hasStart {
		k.startSec, k.startNsec = c.Start.Unix(), c.Start.Nanosecond()
	}
	return k
}

// inlineDef validates an inline config once and caches it. The name's
// latest config (for Reset, Value, Credit and Config) follows every use.
func (l *Limiter) inlineDef(name string, c Config) (*limitDef, error) {
	k := keyOf(name, c)
	if v, ok := l.inline.Load(k); ok {
		d := v.(*limitDef)
		if cur, ok := l.inlineByName.Load(name); !ok || cur != d {
			l.inlineByName.Store(name, d)
		}
		return d, nil
	}
	d, err := newLimitDef(name, c)
	if err != nil {
		return nil, err
	}
	d.inline = true
	if v, loaded := l.inline.LoadOrStore(k, d); loaded {
		d = v.(*limitDef)
	}
	l.inlineByName.Store(name, d)
	return d, nil
}

// addMember adds to c a member for one request on (d, key): one item, or two
// distinct random shards for a sharded limit (power of two choices).
func (l *Limiter) addMember(c *actor.Call, d *limitDef, key string, op actor.Op, count float64, reserve bool) {
	m := int32(len(c.Members))
	h := bucket.HashWith(d.nameHash, key)
	item := actor.Item{ID: actor.BucketID{Name: d.name, Key: key}, Lim: &d.perShard, Phase: d.phaseFor(h)}
	mem := actor.Member{Op: op, Count: count, Reserve: reserve, Second: -1, Def: d}
	if d.shards == 1 {
		item.Part, item.Hash = l.group.Route(h, 0), actor.TableHash(d.nameHash, key, 0)
		mem.First = c.AddItem(item, m, false)
	} else {
		i, j := twoShards(d.shards)
		item.ID.Shard, item.Part, item.Hash = uint32(i), l.group.Route(h, uint32(i)), actor.TableHash(d.nameHash, key, uint32(i))
		mem.First = c.AddItem(item, m, false)
		item.ID.Shard, item.Part, item.Hash = uint32(j), l.group.Route(h, uint32(j)), actor.TableHash(d.nameHash, key, uint32(j))
		mem.Second = c.AddItem(item, m, true)
	}
	c.Members = append(c.Members, mem)
}

// addShards adds one item per shard of (d, key), for reads and resets.
func (l *Limiter) addShards(c *actor.Call, d *limitDef, key string) {
	h := bucket.HashWith(d.nameHash, key)
	for s := 0; s < d.shards; s++ {
		c.AddItem(actor.Item{
			ID:    actor.BucketID{Name: d.name, Key: key, Shard: uint32(s)},
			Lim:   &d.perShard,
			Phase: d.phaseFor(h),
			Part:  l.group.Route(h, uint32(s)),
			Hash:  actor.TableHash(d.nameHash, key, uint32(s)),
		}, -1, false)
	}
}

func nanos(d int64) time.Duration { return time.Duration(d) }

// status turns a member's outcome into a Status.
func (d *limitDef) status(m *actor.Member) Status {
	left := m.Left
	if m.Second >= 0 { // two shards: report their average, scaled to the limit
		left /= 2
	}
	return Status{
		OK:         m.OK,
		RetryAfter: nanos(m.RetryAfter),
		Limit:      d.name,
		Remaining:  left * float64(d.shards),
		ResetAfter: nanos(m.UntilFull),
	}
}

// twoShards draws two distinct random shards of n, for the power of two
// choices: a uniformly random shard i and its pair mate i^1, which shares
// i's partition (see actor.Group.Route), so that the request is decided by
// one partition in one step instead of a reservation across two. Each pair
// balances its two shards; the pairs are drawn uniformly. Only the last
// shard of an odd n has no mate: it is paired with a random other shard,
// usually on another partition (the hold-free path of actor.twoChoices).
func twoShards(n int) (i, j int) {
	i = rand.IntN(n)
	if j = i ^ 1; j < n {
		return i, j
	}
	j = rand.IntN(n - 1)
	if j >= i {
		j++
	}
	return i, j
}
