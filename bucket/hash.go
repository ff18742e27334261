package bucket

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Hash is the 64-bit xxhash of (name, key): the bytes of name, the length
// of name as 8 bytes little-endian, then the bytes of key. The length makes
// the encoding unambiguous.
//
// It picks a bucket's partition and a fixed window's phase (Hash mod
// Period). The phase is part of the on-disk contract: changing this
// function moves every key's windows after an upgrade.
func Hash(name, key string) uint64 {
	var d xxhash.Digest
	d.Reset()
	d.WriteString(name)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	d.Write(n[:])
	d.WriteString(key)
	return d.Sum64()
}

// Phase is the window phase, in [0, period), derived from a hash.
func Phase(hash uint64, period int64) int64 {
	return int64(hash % uint64(period))
}
