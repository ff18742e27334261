// Package store is the boundary between package ratelimit and the places
// its buckets can live: the in-process partitions (package actor, with the
// write-ahead log) or a shared server (package redislimit). The root
// package validates requests, resolves limits and builds calls; a Store
// decides them.
package store

import (
	"context"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// Store decides calls on the buckets it holds. Its methods are safe for
// concurrent use.
//
// Items of a call carry their partition (Item.Part, from Route), their
// bucket's id, limit and fixed-window phase. Decide, Peek and Reset report
// per-item failures in Item.Err (actor.ErrClosed once the store is closed;
// anything else is a failure to decide or persist, which package
// ratelimit reports as ErrUnavailable).
type Store interface {
	// Partitions is the number of partitions Route maps to.
	Partitions() int
	// Route returns the partition of shard shard of the bucket whose
	// (name, key) hashes to hash (bucket.Hash). Shards 2k and 2k+1 of a
	// key share a partition.
	Route(hash uint64, shard uint32) int32
	// Decide decides c's members and stores what they grant; results are
	// in c.Members. A non-nil error means ctx ended first; abandoned then
	// reports that c still belongs to the store and must not be released.
	Decide(ctx context.Context, c *actor.Call) (abandoned bool, err error)
	// Peek fills each item's State as stored (or fresh, for an absent
	// bucket) and sets c.Now to the time it is current at.
	Peek(c *actor.Call)
	// Reset deletes the items' buckets.
	Reset(c *actor.Call)
	// Counts returns the decisions made so far.
	Counts() actor.Counts
	// Close stops the store once the calls under way are done; calls made
	// afterwards fail with actor.ErrClosed.
	Close() error
}

// LimitChecker is a Store that cannot decide every limit: CheckLimit
// reports one it cannot (wrapping ratelimit.ErrInvalidConfig), so that
// SetLimits refuses it as Open does.
type LimitChecker interface {
	CheckLimit(name string, perShard *bucket.Limit) error
}

// Relimiter is a Store whose buckets expire by the limit they were
// written under (Redis). After SetLimits changed the limit name,
// Relimited moves the expiries of its buckets (shards below shards) to
// when each is full under perShard, never earlier, so that none expires,
// and reads full, before the new limit fills it.
type Relimiter interface {
	Relimited(name string, perShard *bucket.Limit, shards int) error
}

// OpenLimiter opens a *ratelimit.Limiter whose buckets live in s; opts is
// a ratelimit.Options. Package ratelimit sets it when it is initialised,
// so that packages outside it (redislimit) can build a Limiter on another
// Store without the root package's API naming one.
var OpenLimiter func(opts any, s Store) (any, error)
