package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// BatchVersion is the batch encoding version written in every batch header.
const BatchVersion = 1

// BatchHeaderSize is the size of a batch header: version (1 byte), record
// count (uint32 LE), payload length (uint32 LE), CRC-32C of payload (uint32 LE).
const BatchHeaderSize = 13

// MaxFieldLen bounds a record's name and key lengths (each, in bytes).
const MaxFieldLen = 1 << 20

// MaxBatchPayload bounds the payload of one batch, well below bbolt's
// largest value (2 GiB).
const MaxBatchPayload = 256 << 20

// minRecordSize is the smallest encoded record: flags, shard, two empty
// lengths, value, ts.
const minRecordSize = 1 + 1 + 1 + 1 + 8 + 8

const flagDelete = 1 << 0

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordSize returns the encoded size of r.
func RecordSize(r Record) int {
	return 1 + uvarintLen(uint64(r.Shard)) +
		uvarintLen(uint64(len(r.Name))) + len(r.Name) +
		uvarintLen(uint64(len(r.Key))) + len(r.Key) + 16
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// AppendRecord appends the encoding of r to dst and returns the result.
// It does not allocate when dst has room. It does not check MaxFieldLen:
// CheckRecord does.
func AppendRecord(dst []byte, r Record) []byte {
	var flags byte
	if r.Delete {
		flags |= flagDelete
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(r.Shard))
	dst = binary.AppendUvarint(dst, uint64(len(r.Name)))
	dst = append(dst, r.Name...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(r.Value))
	return binary.LittleEndian.AppendUint64(dst, uint64(r.TS))
}

// CheckRecord reports an error wrapping ErrTooLarge if r cannot be encoded
// within the limits the decoder enforces.
func CheckRecord(r Record) error {
	if len(r.Name) > MaxFieldLen || len(r.Key) > MaxFieldLen {
		return fmt.Errorf("%w: record name %d bytes, key %d bytes (max %d)",
			ErrTooLarge, len(r.Name), len(r.Key), MaxFieldLen)
	}
	return nil
}

// BatchBuilder packs records into one batch. The zero value is ready to use;
// Reset keeps the buffer for reuse.
type BatchBuilder struct {
	buf   []byte // header space followed by the payload
	count int
}

// Reset empties b, keeping its buffer.
func (b *BatchBuilder) Reset() {
	b.buf = b.buf[:0]
	b.count = 0
}

// Add appends r to the batch.
func (b *BatchBuilder) Add(r Record) {
	if len(b.buf) == 0 {
		b.buf = append(b.buf, make([]byte, BatchHeaderSize)...)
	}
	b.buf = AppendRecord(b.buf, r)
	b.count++
}

// Len returns the number of records added since the last Reset.
func (b *BatchBuilder) Len() int { return b.count }

// Size returns the encoded size of the batch so far, header included
// (0 when empty).
func (b *BatchBuilder) Size() int { return len(b.buf) }

// Bytes writes the header and returns the encoded batch. The slice aliases
// b's buffer: it is valid until the next Add or Reset. An empty builder
// returns a valid empty batch.
func (b *BatchBuilder) Bytes() []byte {
	if len(b.buf) == 0 {
		b.buf = append(b.buf, make([]byte, BatchHeaderSize)...)
	}
	sealBatch(b.buf, b.count)
	return b.buf
}

// sealBatch writes the header of batch (header space followed by count
// encoded records).
func sealBatch(batch []byte, count int) {
	payload := batch[BatchHeaderSize:]
	batch[0] = BatchVersion
	binary.LittleEndian.PutUint32(batch[1:], uint32(count))
	binary.LittleEndian.PutUint32(batch[5:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(batch[9:], crc32.Checksum(payload, castagnoli))
}

// EncodeBatch appends the batch encoding of recs to dst.
func EncodeBatch(dst []byte, recs []Record) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	for _, r := range recs {
		dst = AppendRecord(dst, r)
	}
	sealBatch(dst[start:], len(recs))
	return dst
}

// DecodeBatch validates batch (header, length, checksum, and every record's
// framing) and then calls fn with each record in order. If validation fails
// it returns an error wrapping ErrCorrupt and fn is never called. An error
// from fn stops decoding and is returned unchanged. DecodeBatch never
// panics on any input.
func DecodeBatch(batch []byte, fn func(Record) error) error {
	payload, _, err := checkBatch(batch)
	if err != nil {
		return err
	}
	for off := 0; off < len(payload); {
		v, n, _ := decodeRecord(payload[off:])
		off += n
		if err := fn(v.record()); err != nil {
			return err
		}
	}
	return nil
}

// BatchCount validates batch like DecodeBatch and returns its record count.
func BatchCount(batch []byte) (int, error) {
	_, count, err := checkBatch(batch)
	return count, err
}

func checkBatch(batch []byte) (payload []byte, count int, err error) {
	if len(batch) < BatchHeaderSize {
		return nil, 0, fmt.Errorf("%w: batch of %d bytes is shorter than its header", ErrCorrupt, len(batch))
	}
	if v := batch[0]; v != BatchVersion {
		// A newer encoding would come with a newer file format (the meta
		// version, which Open checks first): here it is damage.
		return nil, 0, fmt.Errorf("%w: batch version %d (this format has %d)", ErrCorrupt, v, BatchVersion)
	}
	n := binary.LittleEndian.Uint32(batch[1:])
	plen := binary.LittleEndian.Uint32(batch[5:])
	sum := binary.LittleEndian.Uint32(batch[9:])
	payload = batch[BatchHeaderSize:]
	if uint64(plen) != uint64(len(payload)) {
		return nil, 0, fmt.Errorf("%w: batch payload is %d bytes, header says %d", ErrCorrupt, len(payload), plen)
	}
	if plen > MaxBatchPayload {
		return nil, 0, fmt.Errorf("%w: batch payload of %d bytes exceeds %d", ErrCorrupt, plen, MaxBatchPayload)
	}
	if got := crc32.Checksum(payload, castagnoli); got != sum {
		return nil, 0, fmt.Errorf("%w: batch checksum %08x, header says %08x", ErrCorrupt, got, sum)
	}
	if uint64(n) > uint64(len(payload)/minRecordSize) {
		return nil, 0, fmt.Errorf("%w: batch claims %d records in %d bytes", ErrCorrupt, n, len(payload))
	}
	off := 0
	for i := uint32(0); i < n; i++ {
		_, m, err := decodeRecord(payload[off:])
		if err != nil {
			return nil, 0, fmt.Errorf("record %d at offset %d: %w", i, off, err)
		}
		off += m
	}
	if off != len(payload) {
		return nil, 0, fmt.Errorf("%w: %d trailing bytes after %d records", ErrCorrupt, len(payload)-off, n)
	}
	return payload, int(n), nil
}

// recordView is a decoded record whose name and key alias the input.
type recordView struct {
	flags     byte
	shard     uint32
	name, key []byte
	value     float64
	ts        int64
}

func (v recordView) record() Record {
	return Record{
		Name:   string(v.name),
		Key:    string(v.key),
		Shard:  v.shard,
		Delete: v.flags&flagDelete != 0,
		Value:  v.value,
		TS:     v.ts,
	}
}

// decodeRecord decodes the record at the start of p and returns it with
// its encoded length.
func decodeRecord(p []byte) (v recordView, n int, err error) {
	if len(p) < 1 {
		return v, 0, fmt.Errorf("%w: truncated record", ErrCorrupt)
	}
	v.flags = p[0]
	if v.flags&^flagDelete != 0 {
		return v, 0, fmt.Errorf("%w: unknown record flags %#x", ErrCorrupt, v.flags)
	}
	n = 1
	shard, m := binary.Uvarint(p[n:])
	if m <= 0 || m != uvarintLen(shard) || shard > math.MaxUint32 {
		return v, 0, fmt.Errorf("%w: bad shard", ErrCorrupt)
	}
	v.shard = uint32(shard)
	n += m
	if v.name, n, err = decodeField(p, n, "name"); err != nil {
		return v, 0, err
	}
	if v.key, n, err = decodeField(p, n, "key"); err != nil {
		return v, 0, err
	}
	if len(p)-n < 16 {
		return v, 0, fmt.Errorf("%w: truncated record value", ErrCorrupt)
	}
	v.value = math.Float64frombits(binary.LittleEndian.Uint64(p[n:]))
	v.ts = int64(binary.LittleEndian.Uint64(p[n+8:]))
	return v, n + 16, nil
}

// decodeField decodes a uvarint length and that many bytes at p[n:].
func decodeField(p []byte, n int, what string) ([]byte, int, error) {
	l, m := binary.Uvarint(p[n:])
	if m <= 0 || m != uvarintLen(l) {
		return nil, 0, fmt.Errorf("%w: bad %s length", ErrCorrupt, what)
	}
	n += m
	if l > MaxFieldLen {
		return nil, 0, fmt.Errorf("%w: %s of %d bytes exceeds %d", ErrCorrupt, what, l, MaxFieldLen)
	}
	if l > uint64(len(p)-n) {
		return nil, 0, fmt.Errorf("%w: truncated %s", ErrCorrupt, what)
	}
	return p[n : n+int(l)], n + int(l), nil
}
