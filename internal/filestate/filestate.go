// Package filestate reads the state a limiter's file holds without opening
// it with bbolt (so without trusting its pages), and writes a state into a
// new file: for salvaging a damaged file and for inspecting one.
package filestate

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/seed7fbd42b6/ratelimit/internal/boltcheck"
	"github.com/seed7fbd42b6/ratelimit/internal/snapshot"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
	bolt "go.etcd.io/bbolt"
)

// Contents is what a file holds.
type Contents struct {
	FileBytes     int64
	PageSize      int
	Pages         uint64 // pages in use
	FormatVersion uint32

	// HasSnapshot: the file holds a snapshot; SnapshotErr says what of it
	// could not be read (the buckets of those parts are then missing from
	// Buckets; SnapshotRecords counts those read).
	HasSnapshot     bool
	SnapshotErr     error
	SnapshotPos     uint64 // the log position it covers
	SnapshotRecords int
	SnapshotBytes   int64
	SnapshotNewest  int64 // the latest ts among its records (Unix ns), 0 if none

	Truncated  uint64 // the highest log position a snapshot ever dropped
	LogBatches int    // batches after the snapshot that decoded cleanly (with records)
	LogRecords int
	LogBytes   int64
	LogLast    uint64 // the last batch's sequence number
	LogNewest  int64  // the latest ts among its records (Unix ns), 0 if none

	// Buckets is the state: every bucket stored (not deleted), in order of
	// name, key and shard.
	Buckets []wal.Record
	// Problems lists what could not be read. Empty means the file holds
	// exactly what its limiter last committed.
	Problems []error
}

// Read reads the file at path leniently: damage it can go past is listed in
// Contents.Problems. It fails with an error wrapping wal.ErrLocked while a
// limiter has the file open, wal.ErrCorrupt when the file is not a
// limiter's file (or no meta page is valid), and wal.ErrVersion when a
// newer version wrote it.
func Read(path string) (*Contents, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadFile(f)
}

// Open opens the file at path for reading, holding a shared lock on it
// until it is closed, so that no limiter writes it meanwhile; the error
// wraps wal.ErrLocked while a limiter has the file open. Anything but a
// regular file (a directory, a FIFO, a device) is refused, and never
// waited on (opening a FIFO for reading waits for a writer).
func Open(path string) (*os.File, error) {
	f, err := openRead(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = regular(path, st)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := lockShared(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// regular refuses what st describes unless it is a regular file.
func regular(path string, st os.FileInfo) error {
	if st.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is not a regular file (it is %s): not a limiter's file", path, wal.FileKind(st.Mode()))
}

// ReadFile is Read of a file opened with Open.
func ReadFile(f *os.File) (*Contents, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var (
		meta            = map[string][]byte{}
		logEntries      []wal.Entry
		head            []byte
		chunks          []wal.Entry
		top             = map[string]bool{}
		snapshotEntries int64
	)
	problems, err := boltcheck.Walk(f, st.Size(), func(path [][]byte, key, value []byte, bucket bool) {
		switch p := pathString(path); {
		case p == "":
			top[string(key)] = true
		case p == "meta" && !bucket:
			meta[string(key)] = value
		case p == "log" && !bucket:
			logEntries = append(logEntries, wal.Entry{Key: key, Value: value})
		case p == "snapshot" && !bucket && string(key) == "head":
			head = value
		case p == "snapshot/chunks" && !bucket:
			chunks = append(chunks, wal.Entry{Key: key, Value: value})
			snapshotEntries += int64(len(value))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wal.ErrCorrupt, err)
	}
	fs, _ := boltcheck.Open(f, st.Size(), false)
	c := &Contents{FileBytes: st.Size(), PageSize: fs.PageSize(), Pages: fs.Pages(), Problems: problems}
	if !top["meta"] || string(meta["magic"]) != wal.Magic {
		if len(problems) == 0 {
			return nil, fmt.Errorf("%w: not a limiter's file (no %q magic)", wal.ErrCorrupt, wal.Magic)
		}
		c.Problems = append(c.Problems, fmt.Errorf("%w: the meta bucket is unreadable", wal.ErrCorrupt))
	}
	if v := meta["version"]; len(v) == 4 {
		c.FormatVersion = binary.BigEndian.Uint32(v)
		if err := wal.CheckVersion(c.FormatVersion); errors.Is(err, wal.ErrVersion) {
			return nil, err
		} else if err != nil {
			c.Problems = append(c.Problems, err)
		}
	}
	if t := meta["truncated"]; len(t) == 8 {
		c.Truncated = binary.BigEndian.Uint64(t)
	}

	state := map[bucketID]wal.Record{}
	apply := func(r wal.Record) {
		id := bucketID{r.Name, r.Key, r.Shard}
		if r.Delete {
			delete(state, id)
		} else {
			state[id] = r
		}
	}
	c.HasSnapshot = top["snapshot"]
	if c.HasSnapshot {
		c.SnapshotPos, c.SnapshotRecords, c.SnapshotErr = snapshot.Salvage(head, chunks, c.Truncated, func(r wal.Record) {
			c.SnapshotNewest = max(c.SnapshotNewest, r.TS)
			apply(r)
		})
		c.SnapshotBytes = snapshotEntries
		if c.SnapshotErr != nil {
			c.Problems = append(c.Problems, fmt.Errorf("the snapshot is damaged, so the buckets its damaged parts held are missing (%d read): %w", c.SnapshotRecords, c.SnapshotErr))
		}
	}
	after := c.SnapshotPos
	if c.SnapshotErr != nil {
		after = c.Truncated // the batches up to it went with the snapshot
	}
	var prevSeq uint64
	last, n, logProblems := wal.SalvageLog(logEntries, after, func(seq uint64, r wal.Record) {
		if seq != prevSeq {
			c.LogBatches++
			prevSeq = seq
		}
		c.LogRecords++
		c.LogNewest = max(c.LogNewest, r.TS)
		apply(r)
	})
	c.LogLast, c.LogBytes = last, n
	c.Problems = append(c.Problems, logProblems...)
	// What wal.Open and Log.Continues refuse, reported here too.
	if cm := meta["committed"]; len(cm) == 8 {
		if err := wal.CheckTail(max(last, c.Truncated), binary.BigEndian.Uint64(cm)); err != nil {
			c.Problems = append(c.Problems, err)
		}
	}
	if c.SnapshotErr == nil {
		if err := wal.CheckSnapshotPos(c.SnapshotPos, c.Truncated); err != nil {
			c.Problems = append(c.Problems, err)
		}
	}
	for _, r := range state {
		c.Buckets = append(c.Buckets, r)
	}
	slices.SortFunc(c.Buckets, func(a, b wal.Record) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Shard, b.Shard))
	})
	return c, nil
}

type bucketID struct {
	name, key string
	shard     uint32
}

func pathString(path [][]byte) string { return string(bytes.Join(path, []byte("/"))) }

// Write creates a limiter's file at path, which must not exist, holding
// exactly recs (as one snapshot). It writes a file beside path and renames
// it into place once complete, so that on an error there is no file at
// path. The snapshot stands at log position 1, above a truncation mark of
// 1 (one batch repeating a record it holds), so that recovery can tell a
// lost snapshot from none (wal.Log.Continues).
func Write(path string, recs []wal.Record) (err error) {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s: %w", path, os.ErrExist)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	os.Remove(tmp) // a leftover of an earlier attempt
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := writeTo(tmp, recs); err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s: %w", path, os.ErrExist)
	}
	return os.Rename(tmp, path)
}

func writeTo(path string, recs []wal.Record) (err error) {
	log, err := wal.Open(path, wal.Options{NoFreelistSync: true, Preallocate: -1, LockTimeout: -1})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := log.Close(); err == nil {
			err = cerr
		}
	}()
	if len(recs) > 0 {
		done := make(waiter, 1)
		log.Append(recs[:1], done)
		if err := <-done; err != nil {
			return err
		}
	}
	pos := log.Position()
	return snapshot.Write(log.DB(), pos, func(emit func(wal.Record) error) error {
		for _, r := range recs {
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}, func(tx *bolt.Tx) error { return log.TruncateTx(tx, pos) })
}

// waiter delivers a commit's outcome on a channel (buffer it by 1).
type waiter chan error

func (w waiter) Committed(err error) { w <- err }
