package snapshot

import (
	"errors"
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Salvage decodes a snapshot read without bbolt from a damaged file: its
// head value and its chunks bucket's entries, in key order. It keeps every
// chunk that checks out and is the snapshot's (each has its own checksum,
// and each bucket is in one chunk only) and calls fn for their records;
// err, if not nil, lists what it could not read or did not keep. With a
// damaged head, the file's truncation mark, truncated, stands for its
// position (a snapshot's last transaction sets the mark to it). It returns
// the snapshot's log position and the records it kept.
//
// A damaged pointer or a lost page write may lead to pages that are not
// the snapshot's (an older snapshot's head or chunks, log batches it
// truncated), whose states are older than the file's. A head whose
// position is below the truncation mark is an older snapshot's, and is
// read as a damaged one (of version 1: nothing is kept). Since version 2 each chunk's key
// carries its snapshot's position, so such a chunk is told apart and left
// out alone. A version 1 snapshot's chunks carry none: they must be the
// head's (as many positions as it counts, none beyond, no more records
// than it counts; with a damaged head, positions 0, 1, 2 ... in order), or
// no record is kept.
func Salvage(headValue []byte, chunks []wal.Entry, truncated uint64, fn func(wal.Record)) (pos uint64, records int, err error) {
	var problems []error
	h, herr := decodeHead(headValue)
	if herr == nil && h.pos < truncated {
		// The mark only grows, to each snapshot's position: a head below
		// it is an older snapshot's, and so are the chunks it leads to.
		herr = fmt.Errorf("%w: at %d, below the truncation mark %d: an older snapshot's", ErrCorrupt, h.pos, truncated)
		if h.version == 1 { // whose chunks carry no position to tell them by
			return truncated, 0, fmt.Errorf("the head: %w: none is kept", herr)
		}
	}
	if herr != nil {
		problems = append(problems, fmt.Errorf("the head: %w", herr))
		h = head{version: 1, pos: truncated}
		for _, c := range chunks {
			if _, p, v, ok := parseChunkKey(c.Key); ok && v == 2 && p == truncated {
				h.version = 2
				break
			}
		}
	}
	var recs, chunk []wal.Record
	positions, failed := uint64(0), 0
	foreign, next := false, uint64(0)
	for n, c := range chunks {
		i, p, v, ok := parseChunkKey(c.Key)
		switch {
		case h.version >= 2:
			if !ok || v != 2 || p != h.pos || i < next || herr == nil && i >= h.chunks {
				problems = append(problems, fmt.Errorf("%w: chunk key %x is not the snapshot's (at %d): left out", ErrCorrupt, c.Key, h.pos))
				continue
			}
		case !ok || v != 1 || herr == nil && i >= h.chunks || herr != nil && i != uint64(n):
			problems = append(problems, fmt.Errorf("%w: chunk key %x is not the snapshot's (it has %d chunks)", ErrCorrupt, c.Key, h.chunks))
			foreign = true
			continue
		}
		next = i + 1
		positions++
		chunk = chunk[:0]
		if err := wal.DecodeBatch(c.Value, func(r wal.Record) error { chunk = append(chunk, r); return nil }); err != nil {
			problems = append(problems, fmt.Errorf("%w: chunk %d: %w", ErrCorrupt, i, err))
			failed++
			continue
		}
		recs = append(recs, chunk...)
	}
	if herr == nil && (positions != h.chunks || uint64(len(recs)) > h.records || failed == 0 && uint64(len(recs)) != h.records) {
		problems = append(problems, fmt.Errorf("%w: %d chunks and %d records read, the head says %d and %d", ErrCorrupt, positions, len(recs), h.chunks, h.records))
		if h.version == 1 || uint64(len(recs)) > h.records {
			foreign = true
		}
	}
	if foreign {
		why := "more records than the snapshot holds"
		if h.version == 1 {
			why = "the chunks are not all the snapshot's"
		}
		return h.pos, 0, errors.Join(append(problems, fmt.Errorf("%w: %s: none is kept", ErrCorrupt, why))...)
	}
	for _, r := range recs {
		fn(r)
	}
	return h.pos, len(recs), errors.Join(problems...)
}
