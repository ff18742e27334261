// Package snapshot stores a fuzzy snapshot of the limiter's bucket states
// in the same bbolt file as the wal log, so the log can be truncated.
//
// # Model
//
// The caller notes the log position P (wal.Log.Position), copies each
// partition's buckets (no global stop), and calls Write with P, an each
// function that emits every bucket as a wal.Record, and alsoInTx set to
// log.TruncateTx(tx, P). Write stores the new snapshot in a staging
// bucket over several small transactions, then drops the old one, moves the
// new one in and truncates the log in one final transaction. Recovery calls
// Load, applies
// its records, then replays the log after the returned position. Records
// are absolute states, so a bucket copied after a newer log record was
// applied is simply rewritten by replay.
//
// # Guarantees
//
//   - Write is atomic: after it returns nil the new snapshot and whatever
//     alsoInTx did are durable together (the final transaction); after an
//     error (from each, emit, alsoInTx or a commit), or a crash, the stored
//     snapshot is the old one. A staging bucket a crash leaves behind is
//     ignored by Load and replaced by the next Write.
//   - Load delivers the records in emit order, each once, or fails with an
//     error wrapping ErrCorrupt (and wal.ErrCorrupt); it never panics on a
//     bad file (bbolt panics are recovered).
//
// # Concurrency
//
// Write and Load may run concurrently with a wal.Log on the same *bolt.DB.
// bbolt allows one write transaction at a time; Write's transactions each
// hold about StagingTxBytes (plus the final swap, which frees the old
// snapshot's pages), so log commits wait for one of them at a time, not for
// the whole snapshot. each should emit from copies. Load uses a read
// transaction and does not block the log.
//
// # On-disk format (Version 2)
//
// A top-level bbolt bucket "snapshot" (absent when there is no snapshot;
// while a Write runs, the new one is built as "snapshot.staging" ->
// "snapshot", with the same layout):
//
//	"snapshot" "head"   -> 32 bytes, big-endian:
//	                       version uint32 (2), pos uint64, chunks uint64,
//	                       records uint64, CRC-32C (Castagnoli) of the
//	                       first 28 bytes uint32
//	           "chunks" -> nested bucket:
//	                       chunk index then pos (each uint64 big-endian:
//	                       (0, pos), (1, pos), ...) ->
//	                       one wal batch (see package wal: BatchVersion 1
//	                       header with count, length and CRC-32C, then the
//	                       records), closed once it reaches ChunkSize (64 KiB)
//
// The position in each chunk key tells the snapshot's chunks from an older
// snapshot's, whose pages stay in the file once freed: a damaged pointer or
// a lost page write may lead to one, and its states are older than the
// file's. Version 1 is the same without the position (8-byte keys); Load
// and Salvage still read it, and Write always writes the current version.
//
// Load checks the head checksum and version, that chunk keys run 0..n-1
// without gaps and carry the head's position, every chunk as
// wal.DecodeBatch does, and that the chunk and record totals match the
// head. Write deletes and recreates the whole "snapshot" bucket.
package snapshot
