package ratelimit

import (
	"errors"
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/internal/store"
)

// SetLimits replaces the named limits (Options.Limits) while the limiter
// runs, for a service that reloads its configuration. Every Config is
// validated first, as Open validates it (on Redis, a fixed window the
// store cannot decide is refused too): on an error (ErrInvalidConfig)
// nothing changes.
//
// Buckets keep their stored state (value and ts) and are read under the
// new config from then on, capped at its capacity: the same rule as
// reopening a file with changed Options.Limits. A fixed window whose
// period or start changed reads its stored window start as the start of
// the new config's window that holds it, so that windows keep to the new
// grid. A bucket of a limit that
// is removed, or of a shard beyond a limit's new Shards, is kept as it is
// but no longer used; if the limit comes back it is read again. Requests
// already under way when SetLimits returns may still be decided under the
// config they started with; the buckets they store are kept under the new
// one. Limits carried inline by requests are not affected. Safe for
// concurrent use; SetLimits calls are serialised.
//
// On Redis, where a bucket's key expires by the config it was written
// under, SetLimits also moves the expiries of the keys whose config
// changes for calls without a Config: a named limit that changed, a name
// named now that was not before (new, or back after a removal: inline
// configs may have written its keys), and a removed limit's name that
// falls back to its latest inline config. It first waits for the calls
// under way that may still write such a key under the earlier config
// (each bounded by the Redis client's timeouts, also one whose caller has
// given up). An error there is ErrUnavailable, with the new limits in
// place; the next SetLimits moves those names' expiries again. The keys
// of a removed limit with no inline config (and those of shards beyond a
// lowered Shards) still expire by the config they were written under: see
// redislimit's caveats.
func (l *Limiter) SetLimits(limits map[string]Config) error {
	if l.closed.Load() || l.store == nil {
		return ErrClosed
	}
	generation, err := newLimitDefs(limits)
	if err != nil {
		return err
	}
	defs := *generation
	if lc, ok := l.store.(store.LimitChecker); ok {
		for name, d := range defs {
			if err := lc.CheckLimit(name, &d.perShard); err != nil {
				return err
			}
		}
	}
	l.limitsMu.Lock()
	defer l.limitsMu.Unlock()
	l.limitsGen++
	gen := l.limitsGen
	for _, d := range defs {
		d.gen = gen
	}
	old := *l.limits.Load()
	l.limits.Store(generation)
	l.sawLimits(defs)
	if l.group == nil { // a shared store keeps no limits with its buckets
		return l.relimitShared(old, defs)
	}
	named := func(id actor.BucketID) *bucket.Limit {
		if d, ok := defs[id.Name]; ok && int(id.Shard) < d.shards {
			return &d.perShard
		}
		return nil // removed, or a shard beyond its Shards
	}
	relimit := func(id actor.BucketID, current *bucket.Limit) *bucket.Limit {
		if _, ok := defs[id.Name]; ok {
			return named(id)
		}
		if _, ok := old[id.Name]; ok {
			return nil // removed
		}
		return current // an inline limit's bucket
	}
	for i := range l.group.Partitions() {
		if !l.group.Run(i, func(p *actor.Partition) { p.Relimit(gen, relimit, named) }) {
			return ErrClosed
		}
	}
	return nil
}

// relimitShared has a shared store whose buckets expire by the limit they
// were written under move the expiries of the limits that changed. The
// new limits serve already; an error (ErrUnavailable) means some keys may
// still expire by the old ones, and the next SetLimits tries those again.
// Called with limitsMu held.
func (l *Limiter) relimitShared(old, defs map[string]*limitDef) error {
	r, ok := l.store.(store.Relimiter)
	if !ok {
		return nil
	}
	// A limit's keys expire by the last config it had, also one that a
	// SetLimits since removed. A name not named until now (new, or back
	// after a removal) may also have keys written under inline configs
	// meanwhile (by this process or another one on the same servers):
	// their expiries move too, whatever config it comes with. So do those
	// of a name an earlier SetLimits failed to move.
	var jobs []*limitDef
	wait := false
	for name, d := range defs {
		o, current := old[name]
		if current && o.sameBuckets(d) && !l.unrelimited[name] {
			continue
		}
		jobs = append(jobs, d)
		known := current // an earlier named config: current, or retired
		if !current {
			o, known = l.retired[name]
		}
		// A call that resolved the name to its earlier config may still
		// write a key under it, with that config's expiry: wait for those,
		// then move the expiries. That is a named config that changed, or
		// the latest inline one, which a call without a Config falls back
		// to while no limit names it. (A call that carries its inline
		// Config writes as later ones may: nothing to wait for. Nor does a
		// name retried from a failed SetLimits need a wait of its own:
		// that one waited, if it had to, and the calls since resolved the
		// config it set.)
		wait = wait || known && !o.sameBuckets(d) || !current && l.inlineOf(name) != nil
	}
	// A name no limit names from now on, with an inline config, falls
	// back to that config (for a call without one), which then reads the
	// keys the removed limit wrote.
	for name, o := range old {
		if _, ok := defs[name]; ok {
			continue
		}
		switch in := l.inlineOf(name); {
		case in == nil:
		case !o.sameBuckets(in):
			jobs, wait = append(jobs, in), true
		case l.unrelimited[name]:
			jobs = append(jobs, in) // calls under way resolved o: the same expiries
		}
		if l.retired == nil {
			l.retired = make(map[string]*limitDef)
		}
		l.retired[name] = o
	}
	for name := range l.unrelimited { // and not named before this call either
		if _, ok := defs[name]; !ok && old[name] == nil {
			if in := l.inlineOf(name); in != nil {
				jobs, wait = append(jobs, in), true
			}
		}
	}
	for name := range defs {
		delete(l.retired, name)
	}
	clear(l.unrelimited)
	if len(jobs) == 0 {
		return nil
	}
	if wait {
		l.gate.wait()
	}
	for i, d := range jobs {
		err := ErrClosed
		if !l.closed.Load() { // while it waited: the store, and maybe its client, are gone
			err = r.Relimited(d.name, &d.perShard, d.shards)
		}
		if err != nil {
			if l.unrelimited == nil {
				l.unrelimited = make(map[string]bool)
			}
			for _, d := range jobs[i:] {
				l.unrelimited[d.name] = true
			}
			if errors.Is(err, ErrClosed) {
				return err
			}
			l.unavailable.Add(1)
			return fmt.Errorf("%w: limit %q: moving its buckets' expiries to the new limit: %w", ErrUnavailable, d.name, err)
		}
	}
	return nil
}
