package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"
)

func sampleRecords() []Record {
	return []Record{
		{Name: "api", Key: "user-1", Value: 4.5, TS: 1_700_000_000_123_456_789},
		{Name: "", Key: "", Value: 0, TS: 0},
		{Name: "n", Key: "k", Shard: math.MaxUint32, Value: -10.25, TS: -1},
		{Name: "del", Key: "gone", Delete: true},
		{Name: "big", Key: strings.Repeat("k", 64<<10), Value: 1, TS: 2},
		{Name: strings.Repeat("n", 300), Key: string([]byte{0, 0xff, '\n'}), Shard: 300, Value: math.Inf(-1), TS: math.MaxInt64},
		{Name: "max", Key: strings.Repeat("x", MaxFieldLen), Value: math.SmallestNonzeroFloat64, TS: math.MinInt64},
	}
}

func sameRecord(a, b Record) bool {
	return a.Name == b.Name && a.Key == b.Key && a.Shard == b.Shard && a.Delete == b.Delete &&
		math.Float64bits(a.Value) == math.Float64bits(b.Value) && a.TS == b.TS
}

func decodeAll(t *testing.T, batch []byte) []Record {
	t.Helper()
	var got []Record
	if err := DecodeBatch(batch, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatalf("DecodeBatch: %v", err)
	}
	return got
}

func TestCodecRoundTrip(t *testing.T) {
	recs := append(sampleRecords(), Record{Name: "nan", Value: math.NaN()})
	for i, r := range recs {
		if got := len(AppendRecord(nil, r)); got != RecordSize(r) {
			t.Errorf("record %d: encoded %d bytes, RecordSize says %d", i, got, RecordSize(r))
		}
	}
	batch := EncodeBatch([]byte("prefix"), recs)
	if !bytes.HasPrefix(batch, []byte("prefix")) {
		t.Fatal("EncodeBatch clobbered dst")
	}
	batch = batch[len("prefix"):]
	var bb BatchBuilder
	for _, r := range recs {
		bb.Add(r)
	}
	if !bytes.Equal(bb.Bytes(), batch) {
		t.Fatal("BatchBuilder and EncodeBatch disagree")
	}
	got := decodeAll(t, batch)
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !sameRecord(got[i], recs[i]) {
			t.Errorf("record %d: got %+v", i, got[i])
		}
	}
	if n, err := BatchCount(batch); err != nil || n != len(recs) {
		t.Errorf("BatchCount = %d, %v", n, err)
	}
}

func TestEmptyBatch(t *testing.T) {
	var bb BatchBuilder
	for _, b := range [][]byte{bb.Bytes(), EncodeBatch(nil, nil)} {
		if len(b) != BatchHeaderSize {
			t.Fatalf("empty batch is %d bytes", len(b))
		}
		if got := decodeAll(t, b); len(got) != 0 {
			t.Fatalf("empty batch decoded %d records", len(got))
		}
	}
}

func TestAppendRecordDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 1024)
	r := Record{Name: "api", Key: "user-123", Shard: 3, Value: 1.5, TS: 99}
	if n := testing.AllocsPerRun(100, func() { buf = AppendRecord(buf[:0], r) }); n != 0 {
		t.Fatalf("AppendRecord allocates %v times", n)
	}
}

// craft builds a batch around payload with a valid checksum and the given
// record count, so that the record decoder itself is exercised.
func craft(count uint32, payload []byte) []byte {
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(payload))
	b[0] = BatchVersion
	binary.LittleEndian.PutUint32(b[1:], count)
	binary.LittleEndian.PutUint32(b[5:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[9:], crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

func TestDecodeBatchRejects(t *testing.T) {
	valid := EncodeBatch(nil, []Record{{Name: "a", Key: "b", Value: 1, TS: 2}, {Name: "c", Key: "d", Delete: true}})
	rec := AppendRecord(nil, Record{Name: "a", Key: "b", Value: 1, TS: 2})
	fixed := make([]byte, 16)
	withVersion := func(v byte) []byte { b := bytes.Clone(valid); b[0] = v; return b }
	cases := []struct {
		name  string
		batch []byte
	}{
		{"nil", nil},
		{"short header", valid[:BatchHeaderSize-1]},
		{"torn payload", valid[:len(valid)-1]},
		{"torn half", valid[:len(valid)/2]},
		{"trailing garbage", append(bytes.Clone(valid), 0)},
		{"version 0", withVersion(0)},
		{"newer version (damage: the file's format has BatchVersion)", withVersion(BatchVersion + 1)},
		{"bad checksum", func() []byte { b := bytes.Clone(valid); b[9] ^= 1; return b }()},
		{"count too high", craft(2, rec)},
		{"count too low", craft(0, rec)},
		{"count absurd", craft(math.MaxUint32, rec)},
		{"unknown flag", craft(1, append([]byte{0x02}, rec[1:]...))},
		{"shard over uint32", craft(1, append(append([]byte{0}, binary.AppendUvarint(nil, 1<<32)...), append([]byte{0, 0}, fixed...)...))},
		{"overlong varint", craft(1, append([]byte{0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0}, fixed...))},
		{"non-minimal varint", craft(1, append([]byte{0, 0x80, 0x00, 0, 0}, fixed...))},
		{"name past end", craft(1, append([]byte{0, 0, 50, 0}, fixed...))},
		{"key over max", craft(1, append(append([]byte{0, 0, 0}, binary.AppendUvarint(nil, MaxFieldLen+1)...), fixed...))},
		{"huge length", craft(1, append(append([]byte{0, 0}, binary.AppendUvarint(nil, math.MaxUint64)...), fixed...))},
		{"value cut", craft(1, rec[:len(rec)-1])},
		{"payload length lies", func() []byte {
			b := bytes.Clone(valid)
			binary.LittleEndian.PutUint32(b[5:], uint32(len(b)))
			return b
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			err := DecodeBatch(tc.batch, func(Record) error { called = true; return nil })
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if called {
				t.Fatal("fn called for a rejected batch")
			}
		})
	}
}

// Every truncation and every single-bit flip of a valid batch is rejected.
func TestDecodeBatchTornAndFlipped(t *testing.T) {
	valid := EncodeBatch(nil, sampleRecords()[:4])
	fn := func(Record) error { t.Fatal("fn called for a damaged batch"); return nil }
	for n := range len(valid) {
		if err := DecodeBatch(valid[:n], fn); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: err = %v", n, err)
		}
	}
	for i := range len(valid) * 8 {
		b := bytes.Clone(valid)
		b[i/8] ^= 1 << (i % 8)
		err := DecodeBatch(b, fn)
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("bit %d flipped: err = %v", i, err)
		}
	}
}

func TestDecodeBatchFnError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := DecodeBatch(EncodeBatch(nil, sampleRecords()[:3]), func(Record) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("err = %v after %d calls", err, n)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(nil, sampleRecords()[:4]))
	f.Add(EncodeBatch(nil, nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []Record
		if err := DecodeBatch(b, func(r Record) error { got = append(got, r); return nil }); err != nil {
			return
		}
		if again := EncodeBatch(nil, got); !bytes.Equal(again, b) {
			t.Fatalf("accepted batch does not re-encode to itself")
		}
	})
}
