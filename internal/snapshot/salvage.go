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
// what it could not read: damaged chunks, missing ones, a damaged head
// (whose position the file's truncation mark, truncated, then stands for:
// a snapshot's last transaction sets the mark to its position). It
// returns the snapshot's log position and the records it kept.
func Salvage(headValue []byte, chunks []wal.Entry, truncated uint64, fn func(wal.Record)) (pos uint64, records int, err error) {
	var problems []error
	h, herr := decodeHead(headValue)
	if herr != nil {
		problems = append(problems, fmt.Errorf("the head: %w", herr))
		h = head{pos: truncated}
	}
	var recs, chunk []wal.Record
	good := 0
	for _, c := range chunks {
		if len(c.Key) != 8 {
			problems = append(problems, fmt.Errorf("%w: a chunk key of %d bytes", ErrCorrupt, len(c.Key)))
			continue
		}
		i := binary.BigEndian.Uint64(c.Key)
		chunk = chunk[:0]
		if err := wal.DecodeBatch(c.Value, func(r wal.Record) error { chunk = append(chunk, r); return nil }); err != nil {
			problems = append(problems, fmt.Errorf("%w: chunk %d: %w", ErrCorrupt, i, err))
			continue
		}
		recs = append(recs, chunk...)
		good++
	}
	if herr == nil && (uint64(good) != h.chunks || uint64(len(recs)) != h.records) {
		problems = append(problems, fmt.Errorf("%w: %d chunks and %d records read, the head says %d and %d", ErrCorrupt, good, len(recs), h.chunks, h.records))
	}
	for _, r := range recs {
		fn(r)
	}
	return h.pos, len(recs), errors.Join(problems...)
}
