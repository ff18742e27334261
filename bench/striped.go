package main

import (
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/time/rate"
)

// The in-memory baselines are what a Go programmer would otherwise write.
// They make the same decisions as the library on the same requests (token
// buckets that start full; a reservation is granted while the debt stays
// within MaxReserved), so their denial rates are comparable.
func init() {
	register(&implementation{
		name: "striped", mode: "memory",
		about: "map of x/time/rate limiters behind 64 striped mutexes",
		open:  func(*cellEnv) (impl, error) { return newMapLimiter(64), nil },
	})
	register(&implementation{
		name: "mutex", mode: "memory",
		about: "map of x/time/rate limiters behind one mutex",
		open:  func(*cellEnv) (impl, error) { return newMapLimiter(1), nil },
	})
}

// mapLimiter is a map of x/time/rate limiters per limit, guarded by striped
// mutexes: the key's stripe is locked for the lookup (creating the limiter on
// first use) and the decision. stripes == 1 is the single-mutex baseline.
type mapLimiter struct {
	stripes []stripe
	mask    uint64
}

type stripe struct {
	mu sync.Mutex
	m  map[mapKey]*rate.Limiter
	_  [40]byte // padding: a stripe is 56 bytes, so neighbours may share a cache line
}

type mapKey struct {
	def *limitDef
	key string
}

func newMapLimiter(stripes int) *mapLimiter {
	if stripes&(stripes-1) != 0 {
		panic("stripes must be a power of two")
	}
	l := &mapLimiter{stripes: make([]stripe, stripes), mask: uint64(stripes - 1)}
	for i := range l.stripes {
		l.stripes[i].m = make(map[mapKey]*rate.Limiter)
	}
	return l
}

func (l *mapLimiter) stripeOf(key string) *stripe { return &l.stripes[l.stripeIndex(key)] }

// stripeIndex is the index of key's stripe.
func (l *mapLimiter) stripeIndex(key string) uint64 {
	if l.mask == 0 {
		return 0
	}
	return xxhash.Sum64String(key) & l.mask
}

// get returns the limiter of (d, key); the caller holds s.mu.
func (s *stripe) get(d *limitDef, key string) *rate.Limiter {
	k := mapKey{d, key}
	lim := s.m[k]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(d.rate), int(d.capacity))
		s.m[k] = lim
	}
	return lim
}

func (l *mapLimiter) limit(d *limitDef, key string, reserve bool) (bool, error) {
	s := l.stripeOf(key)
	s.mu.Lock()
	lim := s.get(d, key)
	var ok bool
	if reserve {
		// A reservation whose wait exceeds MaxReserved/rate would leave
		// more than MaxReserved tokens of debt: cancel it. ReserveN
		// returns a pointer, which stays on the stack here.
		now := time.Now()
		r := lim.ReserveN(now, 1)
		ok = r.OK() && r.DelayFrom(now) <= d.maxWait()
		if !ok {
			r.CancelAt(now)
		}
	} else {
		ok = lim.Allow()
	}
	s.mu.Unlock()
	return ok, nil
}

// limitAll grants one token from both buckets or from neither. Both stripes
// are held (in index order) so that checking both and then taking both is
// atomic; this avoids x/time/rate's allocating Reservation.
func (l *mapLimiter) limitAll(a *limitDef, ka string, b *limitDef, kb string) (bool, error) {
	ia, ib := l.stripeIndex(ka), l.stripeIndex(kb)
	sa, sb := &l.stripes[ia], &l.stripes[ib]
	first, second := sa, sb
	if ia > ib {
		first, second = sb, sa
	}
	first.mu.Lock()
	if second != first {
		second.mu.Lock()
	}
	la, lb := sa.get(a, ka), sb.get(b, kb)
	now := time.Now()
	ok := la.TokensAt(now) >= 1 && lb.TokensAt(now) >= 1
	if ok {
		la.AllowN(now, 1)
		lb.AllowN(now, 1)
	}
	if second != first {
		second.mu.Unlock()
	}
	first.mu.Unlock()
	return ok, nil
}

// limitMany decides each request on its own, one stripe lock per request:
// the map has no batch entry point.
func (l *mapLimiter) limitMany(w *worker, d *limitDef, keys []string, ok []bool) {
	for i, k := range keys {
		ok[i], _ = l.limit(d, k, false)
	}
}

func (l *mapLimiter) close() error { return nil }
