package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

func init() {
	register(&implementation{
		name: "naive", mode: "durable", slow: true,
		about: "one fsynced bbolt transaction per decision",
		open: func(e *cellEnv) (impl, error) {
			n, err := openNaive(filepath.Join(e.dir, "naive.db"))
			if err != nil {
				return nil, err
			}
			return n, nil
		},
		// Its LimitMany would be -batch Updates in a row: the keys
		// scenario's cost per decision, and 1024 callers x 64 queued
		// commits would take many seconds to drain.
		runs: func(sc *scenario) bool { return !sc.batch },
	})
}

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
