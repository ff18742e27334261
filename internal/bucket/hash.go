package bucket

import (
	"hash/maphash"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// A bucket (name, key, shard) has two hashes, both computed once per
// request from NameHash(name) and the key:
//   - Hash, unseeded, routes the bucket to its partition (and, on a shared
//     store, to its server) and places a fixed window's phase. It is part of
//     the on-disk contract and the same in every process.
//   - TableHash, seeded per process, keys the partition's table, so that keys
//     chosen to collide cannot be prepared offline (the unseeded Hash can be
//     run backwards for short keys); ShardHash mixes in the shard.

// Hash identifies (name, key): HashWith(NameHash(name), key).
//
// It picks a bucket's partition and a fixed window's phase (Hash mod
// Period). The phase is part of the on-disk contract: changing this
// function moves every key's windows after an upgrade.
func Hash(name, key string) uint64 { return HashWith(NameHash(name), key) }

// NameHash is the part of Hash that depends on the name alone, so a limit
// computes it once.
func NameHash(name string) uint64 { return bits.RotateLeft64(xxhash.Sum64String(name), 29) }

// HashWith is Hash given NameHash(name): the xxhash of the key, xored with
// the rotated xxhash of the name, through the 64-bit finalizer of
// MurmurHash3 (a bijection that spreads every input bit over the output).
// The rotation keeps (a, b) and (b, a) apart.
func HashWith(nameHash uint64, key string) uint64 {
	h := xxhash.Sum64String(key) ^ nameHash
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Phase is the window phase, in [0, period), derived from a hash.
func Phase(hash uint64, period int64) int64 {
	return int64(hash % uint64(period))
}

// StartPhase is the window phase, in [0, period), of windows that begin at
// the Unix nanosecond start (which may be before 1970).
func StartPhase(start, period int64) int64 { return modDiff(start, 0, period) }

// tableSeed keys TableHash, per process.
var tableSeed = maphash.MakeSeed()

// TableHash is the seeded hash of (name, key), nameHash being
// NameHash(name); ShardHash(TableHash(...), shard) keys one bucket in a
// partition's table.
func TableHash(nameHash uint64, key string) uint64 {
	return maphash.String(tableSeed, key) ^ nameHash
}

// ShardHash mixes a shard into a TableHash.
func ShardHash(h uint64, shard uint32) uint64 {
	return h ^ uint64(shard)*0x9E3779B97F4A7C15
}
