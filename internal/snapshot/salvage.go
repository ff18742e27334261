package snapshot

import (
	"encoding/binary"
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Salvage decodes a snapshot read without bbolt from a damaged file: its
// head value and its chunks bucket's entries, in key order. It checks
// everything Load checks and calls fn only once the whole snapshot has
// checked out, so a snapshot is taken whole or not at all; it returns the
// snapshot's log position and record count.
func Salvage(headValue []byte, chunks []wal.Entry, fn func(wal.Record)) (pos uint64, records int, err error) {
	h, err := decodeHead(headValue)
	if err != nil {
		return 0, 0, err
	}
	var recs []wal.Record
	for i, c := range chunks {
		if len(c.Key) != 8 || binary.BigEndian.Uint64(c.Key) != uint64(i) {
			return 0, 0, fmt.Errorf("%w: chunk key %x, want chunk %d", ErrCorrupt, c.Key, i)
		}
		if err := wal.DecodeBatch(c.Value, func(r wal.Record) error { recs = append(recs, r); return nil }); err != nil {
			return 0, 0, fmt.Errorf("%w: chunk %d: %w", ErrCorrupt, i, err)
		}
	}
	if uint64(len(chunks)) != h.chunks || uint64(len(recs)) != h.records {
		return 0, 0, fmt.Errorf("%w: %d chunks and %d records, head says %d and %d", ErrCorrupt, len(chunks), len(recs), h.chunks, h.records)
	}
	for _, r := range recs {
		fn(r)
	}
	return h.pos, len(recs), nil
}
