package wal

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// FormatVersion is the version of the file layout (buckets and keys)
// stored in the meta bucket. Version 2 added chunked batches (chunk.go);
// a version 1 file is a version 2 file without them, and Open marks it
// version 2 so that builds reading only version 1 refuse it (ErrVersion)
// instead of misreading chunk keys as corruption.
const FormatVersion = 2

// Magic identifies a file written by this package.
const Magic = "seed7fbd42b6/ratelimit/wal"

var (
	metaBucket   = []byte("meta")
	logBucket    = []byte("log")
	magicKey     = []byte("magic")
	versionKey   = []byte("version")
	truncatedKey = []byte("truncated")
)

// initMeta creates the meta and log buckets in a new (empty) file, or
// validates them in an existing one (upgrading its version), and returns
// the log position.
func initMeta(db *bolt.DB) (last uint64, err error) {
	fresh, old := false, false
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
		ver, err := checkMeta(meta)
		if err != nil {
			return err
		}
		old = ver < FormatVersion
		lb := tx.Bucket(logBucket)
		if lb == nil {
			return fmt.Errorf("%w: log bucket missing", ErrCorrupt)
		}
		last, err = position(meta, lb)
		return err
	})
	switch {
	case err != nil:
		return 0, err
	case old:
		return last, db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(metaBucket).Put(versionKey, binary.BigEndian.AppendUint32(nil, FormatVersion))
		})
	case !fresh:
		return last, nil
	}
	return 0, db.Update(func(tx *bolt.Tx) error {
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
		return meta.Put(versionKey, binary.BigEndian.AppendUint32(nil, FormatVersion))
	})
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
	switch ver := binary.BigEndian.Uint32(v); {
	case ver > FormatVersion:
		return 0, fmt.Errorf("%w: file format %d, this build reads %d", ErrVersion, ver, FormatVersion)
	case ver == 0:
		return 0, fmt.Errorf("%w: file format %d", ErrCorrupt, ver)
	default:
		return ver, nil
	}
}

// position is the larger of the last log key and the truncation mark.
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
	return last, nil
}
