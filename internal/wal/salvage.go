package wal

import "fmt"

// Entry is one key and value of a bbolt bucket, read without bbolt.
type Entry struct{ Key, Value []byte }

// SalvageLog decodes the log bucket's entries (in key order, as read from
// a damaged file) as Replay would, but goes past damage: it calls fn with
// every record of every batch numbered above after that assembles and
// decodes cleanly, in order, and lists in problems every batch it skipped
// (a bad key, a missing chunk, a checksum or framing failure) and every
// gap in the sequence. It returns the last sequence number it delivered
// and the bytes of the batches it decoded.
func SalvageLog(entries []Entry, after uint64, fn func(seq uint64, r Record)) (last uint64, bytes int64, problems []error) {
	var a assembler
	prev := after
	emit := func() {
		seq, batch := a.take()
		if seq <= after {
			return
		}
		var recs []Record
		if err := DecodeBatch(batch, func(r Record) error { recs = append(recs, r); return nil }); err != nil {
			problems = append(problems, fmt.Errorf("log batch %d: %w", seq, err))
			return
		}
		if seq != prev+1 {
			problems = append(problems, fmt.Errorf("%w: log batches %d to %d are missing", ErrCorrupt, prev+1, seq-1))
		}
		for _, r := range recs {
			fn(seq, r)
		}
		prev, last = seq, seq
		bytes += int64(len(batch))
	}
	for _, e := range entries {
		seq, chunk, err := parseLogKey(e.Key)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if a.open() && (chunk == 0 || seq != a.seq) {
			emit()
		}
		if chunk != 0 && (!a.open() || seq != a.seq) {
			problems = append(problems, fmt.Errorf("%w: log batch %d: chunk %d without its first value", ErrCorrupt, seq, chunk))
			continue
		}
		if err := a.add(seq, chunk, e.Value); err != nil {
			problems = append(problems, err)
			clear(a.parts)
			a.parts, a.size = a.parts[:0], 0 // drop the batch
		}
	}
	if a.open() {
		emit()
	}
	return last, bytes, problems
}
