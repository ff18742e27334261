package ratelimit

import (
	"fmt"
	"math"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/store"
)

// resolve finds the limit a request names: its inline config, else a named
// limit.
func (l *Limiter) resolve(name string, inline *Config) (*limitDef, error) {
	return l.resolveIn(l.limits.Load(), name, inline)
}

// resolveIn is resolve against named, one generation of the named limits
// (l.limits, loaded once), so that the requests of one call that name a
// limit all get the same config while SetLimits replaces them.
func (l *Limiter) resolveIn(named *map[string]*limitDef, name string, inline *Config) (*limitDef, error) {
	if inline != nil {
		return l.inlineDef(name, *inline)
	}
	slot := &l.recent[recentSlot(name)]
	if d := slot.Load(); d != nil && d.in == named && d.name == name {
		return d, nil
	}
	if d, ok := namedIn(named, name); ok {
		slot.Store(d)
		return d, nil
	}
	if d := l.inlineOf(name); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownLimit, name)
}

// recentNames is the number of slots of Limiter.recent, where resolveIn
// keeps the named limits it resolved last, by a hash of their names: a
// request naming a limit found there (of the current generation, the
// same name) skips the map. A slot is written only when its name
// changes, so the few names a service uses are read, not written, on
// every request.
const recentNames = 8

// recentSlot is name's slot of Limiter.recent.
func recentSlot(name string) int {
	if name == "" {
		return 0
	}
	return (len(name) + int(name[0])*3 + int(name[len(name)-1])*5) % recentNames
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

// inlineOf is name's latest inline config (see inlineDef), or nil.
func (l *Limiter) inlineOf(name string) *limitDef {
	if v, ok := l.inlineByName.Load(name); ok {
		return v.(*limitDef)
	}
	return nil
}

// inlineDef validates an inline config once (also against a store that
// cannot decide every limit) and caches it. The name's latest config (for
// Reset, Value, Credit and Config) follows every use.
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
	if lc, ok := l.store.(store.LimitChecker); ok {
		if err := lc.CheckLimit(name, &d.perShard); err != nil {
			return nil, err
		}
	}
	d.inline, d.gen = true, math.MaxUint64
	if v, loaded := l.inline.LoadOrStore(k, d); loaded {
		d = v.(*limitDef)
	} else {
		l.sawShards(name, d.shards)
	}
	l.inlineByName.Store(name, d)
	return d, nil
}

// Config returns the named limit's config (Options.Limits, or the
// latest SetLimits) with defaults applied, and true; for a name only
// requests' inline configs (Request.Config) use, the latest of those; a
// zero Config and false for a name neither knows. It is safe for
// concurrent use.
func (l *Limiter) Config(name string) (Config, bool) {
	if l.store == nil { // a zero Limiter
		return Config{}, false
	}
	d, err := l.resolve(name, nil)
	if err != nil {
		return Config{}, false
	}
	return d.cfg, true
}

// named returns the limit of that name in Options.Limits (or the latest
// SetLimits).
func (l *Limiter) named(name string) (*limitDef, bool) { return namedIn(l.limits.Load(), name) }

// namedIn is named in one generation of the named limits (nil for a zero
// Limiter).
func namedIn(named *map[string]*limitDef, name string) (*limitDef, bool) {
	if named == nil {
		return nil, false
	}
	d, ok := (*named)[name]
	return d, ok
}
