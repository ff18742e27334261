package wal

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// FormatVersion is the newest version of the file layout (buckets and
// keys) this build reads and writes; the meta bucket stores a file's.
// Version 2 added chunked batches (chunk.go). A file is created at
// version 1 and marked version 2 by the transaction that commits its
// first chunked batch, so a file without chunks stays readable by builds
// that know only version 1, and one with chunks is refused by them
// (ErrVersion) instead of misread as corrupt.
const FormatVersion = 2

// createdVersion is a new file's version, and chunkedVersion the first
// whose log may hold chunked batches.
const (
	createdVersion = 1
	chunkedVersion = 2
)

// Magic identifies a file written by this package.
const Magic = "seed7fbd42b6/ratelimit/wal"

var (
	metaBucket   = []byte("meta")
	logBucket    = []byte("log")
	magicKey     = []byte("magic")
	versionKey   = []byte("version")
	truncatedKey = []byte("truncated")
	committedKey = []byte("committed")
)

// initMeta creates the meta and log buckets in a new (empty) file, or
// validates them in an existing one, and returns the log position and the
// file's format version.
func initMeta(db *bolt.DB) (last uint64, version uint32, err error) {
	fresh := false
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			empty := tx.ForEach(func([]byte, *bolt.Bucket) error { return errStop }) == nil
			if !empty {
				return fmt.Errorf("%w: bbolt file without a wal meta bucket", ErrCorrupt)
			}
			fresh = true
			return nil
		}
		if version, err = checkMeta(meta); err != nil {
			return err
		}
		lb := tx.Bucket(logBucket)
		if lb == nil {
			return fmt.Errorf("%w: log bucket missing", ErrCorrupt)
		}
		last, err = position(meta, lb)
		return err
	})
	if err != nil || !fresh {
		return last, version, err
	}
	return 0, createdVersion, db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket(logBucket); err != nil {
			return err
		}
		if err := meta.Put(magicKey, []byte(Magic)); err != nil {
			return err
		}
		return putVersion(meta, createdVersion)
	})
}

func putVersion(meta *bolt.Bucket, v uint32) error {
	return meta.Put(versionKey, binary.BigEndian.AppendUint32(nil, v))
}

var errStop = errors.New("stop")

// checkMeta validates the meta bucket and returns the file's format
// version (1 or 2).
func checkMeta(meta *bolt.Bucket) (uint32, error) {
	if string(meta.Get(magicKey)) != Magic {
		return 0, fmt.Errorf("%w: wrong magic %q", ErrCorrupt, meta.Get(magicKey))
	}
	v := meta.Get(versionKey)
	if len(v) != 4 {
		return 0, fmt.Errorf("%w: bad format version", ErrCorrupt)
	}
	ver := binary.BigEndian.Uint32(v)
	return ver, CheckVersion(ver)
}

// CheckVersion reports whether a file of format version ver can be read:
// nil for 1 to FormatVersion, ErrVersion for a later version a newer
// build may have written (up to 255), and ErrCorrupt for 0 or anything
// larger, which no build writes (a damaged field).
func CheckVersion(ver uint32) error {
	switch {
	case ver == 0 || ver > 255:
		return fmt.Errorf("%w: file format %d", ErrCorrupt, ver)
	case ver > FormatVersion:
		return fmt.Errorf("%w: file format %d, this build reads %d", ErrVersion, ver, FormatVersion)
	}
	return nil
}

// position is the larger of the last log key and the truncation mark. A
// log that ends before the last batch committed (its tail lost to damage
// that bbolt cannot see) is ErrCorrupt.
func position(meta, lb *bolt.Bucket) (uint64, error) {
	var last uint64
	if t := meta.Get(truncatedKey); t != nil {
		if len(t) != 8 {
			return 0, fmt.Errorf("%w: bad truncation mark", ErrCorrupt)
		}
		last = binary.BigEndian.Uint64(t)
	}
	if k, _ := lb.Cursor().Last(); k != nil {
		seq, _, err := parseLogKey(k)
		if err != nil {
			return 0, err
		}
		last = max(last, seq)
	}
	if c := meta.Get(committedKey); c != nil {
		if len(c) != 8 {
			return 0, fmt.Errorf("%w: bad committed mark", ErrCorrupt)
		}
		if err := CheckTail(last, binary.BigEndian.Uint64(c)); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// CheckTail reports, wrapping ErrCorrupt, a log whose position (the larger
// of its last batch and its truncation mark) is below the last batch
// committed: its end is lost.
func CheckTail(position, committed uint64) error {
	if committed > position {
		return fmt.Errorf("%w: the log ends at batch %d, but batch %d was committed: its end is lost", ErrCorrupt, position, committed)
	}
	return nil
}

// CheckSnapshotPos reports, wrapping ErrCorrupt, a snapshot at log
// position pos below the log's truncation mark: the batches between were
// dropped, so the snapshot that held them is missing or damaged.
func CheckSnapshotPos(pos, truncated uint64) error {
	if truncated > pos {
		return fmt.Errorf("%w: the log was truncated up to batch %d, beyond the snapshot's position %d (a missing or damaged snapshot)",
			ErrCorrupt, truncated, pos)
	}
	return nil
}
