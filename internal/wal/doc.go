// Package wal is the limiter's durable log: a group-committed, append-only
// sequence of Records in a bbolt file.
//
// # Model
//
// Every granted decision becomes a Record holding a bucket's resulting
// absolute state (or its deletion), never a delta, so replaying a record
// twice is harmless and only the per-bucket order matters. Partitions call
// Log.Append once per batch of decisions; Append encodes the records into
// the pending batch at once and never waits for the disk. One writer
// goroutine takes everything pending, writes it as ONE log entry in ONE
// bbolt transaction (one value, or one per chunk of a large batch; one
// commit with its fsyncs), then calls Committed on every waiter of that
// commit. Appends that arrive while a commit runs form the next batch, so
// batches grow with load (pipelining). Before each commit the writer
// lets the callers it has just released append first and share the
// commit instead of waiting for the next one: it sleeps until the lone
// callers (AppendOwn's) it released are pending again, for a typical
// commit's duration at most, and after waits that missed it, or met it
// only after that twice running (arrivals, not returns), it only yields,
// for ever more commits (see Log.settle). A caller alone commits on
// its own goroutine instead: AppendOwn then CommitNow commits its batch
// without waking the writer while no commit runs and the last one had a
// single waiter. A caller must be acknowledged only after its waiter's
// Committed(nil).
//
// Recovery: load the snapshot (package snapshot) tagged with position P,
// then Log.Replay(P, ...). Snapshots truncate the log with Log.TruncateTx
// in the snapshot's own transaction.
//
// # Guarantees
//
//   - Committed(nil) means the records are fsynced; after a crash, Replay
//     returns them. bbolt commits are atomic, so a crash never leaves a torn
//     batch: a batch is entirely present or entirely absent.
//   - Replay returns batches in commit order and each record of a committed
//     batch exactly once (per Replay). Records of one Append stay adjacent
//     and in order; Appends by one goroutine keep their order.
//   - A failed commit is sticky: every waiter of that batch and of every
//     later Append gets an error wrapping ErrFailed, Err returns it, and
//     nothing is retried. The limiter then fails closed. Records of the
//     failed batch may or may not be on disk; callers were told "error",
//     which is conservative for a rate limiter.
//   - A checksum or framing failure on read can only mean corruption (not
//     a torn write): Replay stops with an error wrapping ErrCorrupt naming
//     the batch's sequence number, after delivering every earlier batch and
//     nothing of the bad one. Open and Replay convert bbolt panics on
//     garbage pages, and faults on the mapped file, into ErrCorrupt.
//
// # Concurrency
//
// A Log is safe for concurrent use. Append, Err, Position, Written and Stats
// may be called from any goroutine; Err, Position, Written and Stats are
// atomic loads. Committed is called from the goroutine that commits (the
// writer, or a caller in CommitNow), outside any lock of the Log, and must
// not block (nor call Close). Replay should run
// before the first Append.
//
// Two Logs on one file exclude each other with bbolt's flock, also within
// one process: the second Open fails with ErrLocked after LockTimeout.
//
// # On-disk format (FormatVersion 2)
//
// One bbolt file. Top-level buckets owned by this package:
//
//	"meta"  "magic"     -> Magic ("seed7fbd42b6/ratelimit/wal", ASCII)
//	        "version"   -> uint32 big-endian: 1, or 2 once a chunked batch
//	                       was written (FormatVersion is the newest)
//	        "truncated" -> uint64 big-endian: the highest sequence number
//	                       TruncateTx ever dropped (absent until then)
//	        "committed" -> uint64 big-endian: the last batch committed (absent
//	                       in files whose last commit predates it), so that a
//	                       log whose end is lost is ErrCorrupt
//	"log"   seq (uint64 big-endian, 1, 2, 3, ...) -> one batch (below),
//	        or its first chunk
//	        seq ++ i (uint32 big-endian, i = 1, 2, ...) -> chunk i of batch seq
//
// A batch larger than 4 pages is cut into chunks of about half a page,
// which concatenated in key order are the batch; smaller batches are one
// value. (bbolt keeps at least two entries per leaf, so a large single
// value would share an overflow leaf with earlier batches, and every commit
// would copy and write them again: see chunk.go.) Version 1 had no chunks.
// A new file is version 1, and the transaction that commits its first
// chunked batch marks it version 2, so a file without chunks stays
// readable by builds that know only version 1. Replay rejects, with
// ErrCorrupt, a key of any other shape, a chunk without its batch's first
// value, and a missing chunk.
//
// The log bucket is written with FillPercent 1.0 (keys only grow). The
// position after Open is max(last log key, "truncated"), so sequence
// numbers never repeat even when the log is empty. Other top-level buckets
// (package snapshot's "snapshot") may share the file. Open creates "meta"
// and "log" in a file with no buckets; a bbolt file with other buckets but
// no "meta", or with the wrong magic, is ErrCorrupt; a higher version is
// ErrVersion, up to 255 (a larger one, or 0, is a damaged field:
// ErrCorrupt).
//
// Batch encoding (BatchVersion 1), also used by package snapshot:
//
//	offset size
//	0      1     version, 1
//	1      4     record count, uint32 little-endian
//	5      4     payload length in bytes, uint32 little-endian
//	9      4     CRC-32C (Castagnoli) of the payload, uint32 little-endian
//	13     ...   payload: count records, back to back, nothing after
//
// Record encoding:
//
//	flags  1 byte; bit 0 = Delete; other bits must be 0
//	shard  uvarint (encoding/binary), <= 2^32-1
//	name   uvarint length, then that many bytes (length <= MaxFieldLen)
//	key    uvarint length, then that many bytes (length <= MaxFieldLen)
//	value  8 bytes, IEEE-754 bits of the float64, little-endian
//	ts     8 bytes, int64 two's complement, little-endian (Unix ns)
//
// A delete record carries Value and TS as given (normally zero). Decoding
// rejects, with ErrCorrupt and never a panic: a short header, a version of
// 0, a payload length that differs from the bytes present or exceeds
// MaxBatchPayload, a checksum mismatch, a count that the payload cannot
// hold, unknown flag bits, non-minimal or overflowing varints, a shard above
// 2^32-1, a field longer than MaxFieldLen or than the bytes left, a record
// cut short, bytes left over after the last record, and any other batch
// version: the version byte is outside the checksum, and a new encoding
// comes with a new file format (the meta version, ErrVersion), so in a
// file of this format another version is damage. An empty batch (count 0)
// is valid.
//
// # Preallocation
//
// The file is kept between half a step and a step (Options.Preallocate,
// DefaultPreallocate) of written, synced zeros ahead of the pages bbolt
// uses: Open extends it a step past them, and the writer tops it up, one
// synced 1 MiB chunk at a time, while it is idle. bbolt grows its file by
// truncating it, sparsely, so without this every commit that extends the
// log writes into blocks the file system allocates at that moment, and
// the commit's fdatasync must journal the allocation as well as flush the
// data (see prealloc.go). It never takes the last free space of its file
// system (a margin of two steps or a twentieth of it stays free), and a
// write that fails is given back. bbolt ignores everything past its
// pages.
//
// # Caveats
//
//   - Snapshot writes and TruncateTx run in their own bbolt write
//     transactions; bbolt serialises writers, so a log commit waits while
//     one of them is open (package snapshot keeps each about 1 MiB).
//   - A panic during Open on a corrupt file may leave that file's memory
//     mapping behind (the descriptor and lock are released).
package wal
