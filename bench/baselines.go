package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/time/rate"
)

// The baselines are what a Go programmer would otherwise write. They make
// the same decisions as the library on the same requests (token buckets that
// start full; a reservation is granted while the debt stays within
// MaxReserved), so their denial rates are comparable.

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
	_  [40]byte // padding; a stripe is 56 bytes, so neighbours may share a line (padding to 64 measured no difference)
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

func (l *mapLimiter) stripeOf(key string) *stripe {
	if l.mask == 0 {
		return &l.stripes[0]
	}
	return &l.stripes[xxhash.Sum64String(key)&l.mask]
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
		// returns a pointer, which stays on the stack here (0
		// allocations measured on warm keys).
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
	sa, sb := l.stripeOf(ka), l.stripeOf(kb)
	first, second := sa, sb
	if l.mask != 0 && xxhash.Sum64String(ka)&l.mask > xxhash.Sum64String(kb)&l.mask {
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

// naiveDurable keeps each bucket's two numbers (tokens, last update in Unix
// nanoseconds) in bbolt and decides every request in its own db.Update,
// which fsyncs on commit: durable before the caller hears the answer, and
// bounded by the disk's commit rate.
type naiveDurable struct {
	db *bolt.DB
}

var naiveBucket = []byte("buckets")

func openNaive(path string) (*naiveDurable, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(naiveBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	return &naiveDurable{db: db}, nil
}

// errDenied rolls back a naive LimitAll transaction.
var errDenied = errors.New("denied")

// take refills the bucket of (d, key) in tx and takes one token (or, for a
// reservation, one token of debt within MaxReserved). It writes the new
// state only when granting and commit is set.
func naiveTake(bk *bolt.Bucket, d *limitDef, key string, reserve bool, now int64, commit bool) (bool, error) {
	var kb [128]byte
	k := append(append(append(kb[:0], d.name...), 0), key...)
	tokens, last := d.capacity, now
	if v := bk.Get(k); len(v) == 16 {
		tokens = math.Float64frombits(binary.LittleEndian.Uint64(v))
		last = int64(binary.LittleEndian.Uint64(v[8:]))
	}
	if now > last {
		tokens = min(d.capacity, tokens+d.rate*float64(now-last)/1e9)
	}
	floor := 1.0
	if reserve {
		floor = 1 - d.maxReserved
	}
	if tokens < floor {
		return false, nil
	}
	if !commit {
		return true, nil
	}
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:], math.Float64bits(tokens-1))
	binary.LittleEndian.PutUint64(v[8:], uint64(max(now, last)))
	return true, bk.Put(k, v[:])
}

func (n *naiveDurable) limit(d *limitDef, key string, reserve bool) (bool, error) {
	var ok bool
	err := n.db.Update(func(tx *bolt.Tx) error {
		var err error
		ok, err = naiveTake(tx.Bucket(naiveBucket), d, key, reserve, time.Now().UnixNano(), true)
		return err
	})
	return ok, err
}

func (n *naiveDurable) limitAll(a *limitDef, ka string, b *limitDef, kb string) (bool, error) {
	var ok bool
	err := n.db.Update(func(tx *bolt.Tx) error {
		bk, now := tx.Bucket(naiveBucket), time.Now().UnixNano()
		oka, err := naiveTake(bk, a, ka, false, now, false)
		if err != nil || !oka {
			return err
		}
		okb, err := naiveTake(bk, b, kb, false, now, false)
		if err != nil || !okb {
			return err
		}
		if _, err := naiveTake(bk, a, ka, false, now, true); err != nil {
			return err
		}
		if _, err := naiveTake(bk, b, kb, false, now, true); err != nil {
			return err
		}
		ok = true
		return nil
	})
	return ok, err
}

func (n *naiveDurable) limitMany(w *worker, d *limitDef, keys []string, ok []bool) {
	for i, k := range keys {
		var err error
		ok[i], err = n.limit(d, k, false)
		if err != nil {
			w.fail(err)
		}
	}
}

func (n *naiveDurable) close() error {
	if err := n.db.Close(); err != nil {
		return fmt.Errorf("naive: %w", err)
	}
	return nil
}
