package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Salvage decodes a snapshot read without bbolt from a damaged file: its
// head value and its chunks bucket's entries, in key order. It keeps every
// chunk that checks out (each has its own checksum, and each bucket is in
// one chunk only) and calls fn for their records; err, if not nil, lists
// what it could not read. With a damaged head, the file's truncation
// mark, truncated, stands for its position (a snapshot's last transaction
// sets the mark to it). It returns the snapshot's log position and the
// records it kept.
//
// The chunks must be the head's: as many positions as it counts (checked
// or not), none beyond, and no more records than it counts; with a
// damaged head, positions 0, 1, 2 ... in order. Otherwise a damaged
// pointer may have led to pages that are not this snapshot's (an older
// snapshot's chunks, log batches it truncated), whose states are older
// than the file's, and no record is kept.
func Salvage(headValue []byte, chunks []wal.Entry, truncated uint64, fn func(wal.Record)) (pos uint64, records int, err error) {
	var problems []error
	h, herr := decodeHead(headValue)
	if herr != nil {
		problems = append(problems, fmt.Errorf("the head: %w", herr))
		h = head{pos: truncated}
	}
	var recs, chunk []wal.Record
	positions, failed := uint64(0), 0
	foreign := false
	for n, c := range chunks {
		if len(c.Key) != 8 {
			problems = append(problems, fmt.Errorf("%w: a chunk key of %d bytes", ErrCorrupt, len(c.Key)))
			foreign = true
			continue
		}
		i := binary.BigEndian.Uint64(c.Key)
		if herr == nil && i >= h.chunks || herr != nil && i != uint64(n) {
			problems = append(problems, fmt.Errorf("%w: chunk %d is not the snapshot's (it has %d)", ErrCorrupt, i, h.chunks))
			foreign = true
			continue
		}
		positions++
		chunk = chunk[:0]
		if err := wal.DecodeBatch(c.Value, func(r wal.Record) error { chunk = append(chunk, r); return nil }); err != nil {
			problems = append(problems, fmt.Errorf("%w: chunk %d: %w", ErrCorrupt, i, err))
			failed++
			continue
		}
		recs = append(recs, chunk...)
	}
	if !foreign && herr == nil && (positions != h.chunks || uint64(len(recs)) > h.records || failed == 0 && uint64(len(recs)) != h.records) {
		problems = append(problems, fmt.Errorf("%w: %d chunks and %d records read, the head says %d and %d", ErrCorrupt, positions, len(recs), h.chunks, h.records))
		foreign = true
	}
	if foreign {
		return h.pos, 0, errors.Join(append(problems, fmt.Errorf("%w: the chunks are not all the snapshot's: none is kept", ErrCorrupt))...)
	}
	for _, r := range recs {
		fn(r)
	}
	return h.pos, len(recs), errors.Join(problems...)
}
