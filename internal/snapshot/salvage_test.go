package snapshot

import (
	"errors"
	"slices"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Salvage keeps the chunks that are the snapshot's and check out, and
// reports the rest. A chunk of another snapshot (as a damaged pointer or a
// lost page write leaves it, with states older than the file's) is left out
// by the position its key carries; in a version 1 snapshot, whose keys
// carry none, any sign of one keeps nothing.
func TestSalvage(t *testing.T) {
	const pos = 3
	db := openDB(t)
	recs := records(5000, "r") // three chunks
	if err := Write(db, pos, emitAll(recs), nil); err != nil {
		t.Fatal(err)
	}
	head, chunks := entries(t, db)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks, want 3", len(chunks))
	}
	perChunk := make([][]wal.Record, len(chunks))
	for i, c := range chunks {
		if err := wal.DecodeBatch(c.Value, func(r wal.Record) error { perChunk[i] = append(perChunk[i], r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// but returns recs without the chunks listed.
	but := func(skip ...int) []wal.Record {
		var out []wal.Record
		for i, rs := range perChunk {
			if !slices.Contains(skip, i) {
				out = append(out, rs...)
			}
		}
		return out
	}
	older := records(len(perChunk[1]), "older") // an older snapshot's chunk 1
	var ob wal.BatchBuilder
	for _, r := range older {
		ob.Add(r)
	}
	olderChunk := func(pos uint64) wal.Entry { return wal.Entry{Key: chunkKey(1, pos), Value: ob.Bytes()} }
	damagedHead := clone(head)
	damagedHead[10] ^= 1
	with := func(i int, e wal.Entry) []wal.Entry { c := slices.Clone(chunks); c[i] = e; return c }
	flipped := clone(chunks[2].Value)
	flipped[len(flipped)/2] ^= 0x10
	v1Head, v1Chunks := v1Entries(pos, recs, len(perChunk[0]))

	for _, c := range []struct {
		name      string
		head      []byte
		chunks    []wal.Entry
		truncated uint64
		want      []wal.Record
		problems  bool
	}{
		{"intact", head, chunks, pos, recs, false},
		{"damaged head", damagedHead, chunks, pos, recs, true},
		{"a damaged chunk", head, with(2, wal.Entry{Key: chunks[2].Key, Value: flipped}), pos, but(2), true},
		{"an older snapshot's chunk in its place", head, with(1, olderChunk(pos-1)), pos, but(1), true},
		{"an older snapshot's chunk in its place, damaged head", damagedHead, with(1, olderChunk(pos-1)), pos, but(1), true},
		{"an older snapshot's chunk beside", head, slices.Insert(slices.Clone(chunks), 1, olderChunk(pos-1)), pos, recs, true},
		{"a version 1 chunk in its place", head, with(1, wal.Entry{Key: v1Chunks[1].Key, Value: ob.Bytes()}), pos, but(1), true},
		{"a chunk beyond the head's count", head, append(slices.Clone(chunks), wal.Entry{Key: chunkKey(3, pos), Value: ob.Bytes()}), pos, recs, true},
		{"chunks above the truncation mark, damaged head", damagedHead, chunks, pos + 1, nil, true},
		{"an older snapshot's head and chunks", head, chunks, pos + 1, nil, true},
		{"an older snapshot's head and chunks, version 1", v1Head, v1Chunks, pos + 1, nil, true},
		{"version 1", v1Head, v1Chunks, pos, recs, false},
		{"version 1, damaged head", func() []byte { h := clone(v1Head); h[10] ^= 1; return h }(), v1Chunks, pos, recs, true},
		{"version 1, a chunk beyond the head's count", v1Head, append(slices.Clone(v1Chunks), wal.Entry{Key: chunkKey(3, 0)[:8], Value: ob.Bytes()}), pos, nil, true},
		{"version 1, a version 2 chunk", v1Head, append(slices.Clone(v1Chunks[:2]), wal.Entry{Key: chunkKey(2, pos), Value: v1Chunks[2].Value}), pos, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []wal.Record
			p, n, err := Salvage(c.head, c.chunks, c.truncated, func(r wal.Record) { got = append(got, r) })
			if n != len(got) {
				t.Errorf("reported %d records, gave %d", n, len(got))
			}
			if p != c.truncated && c.truncated == pos {
				t.Errorf("position %d, want %d", p, pos)
			}
			if c.problems != (err != nil) || err != nil && !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want problems: %v (ErrCorrupt)", err, c.problems)
			}
			if len(got) != len(c.want) {
				t.Fatalf("kept %d records, want %d (%v)", len(got), len(c.want), err)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("record %d = %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}
