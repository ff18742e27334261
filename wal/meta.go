package wal

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// FormatVersion is the version of the file layout (buckets and keys)
// stored in the meta bucket.
const FormatVersion = 1

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
// validates them in an existing one, and returns the log position.
func initMeta(db *bolt.DB) (last uint64, err error) {
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
		if err := checkMeta(meta); err != nil {
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
		return last, err
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

func checkMeta(meta *bolt.Bucket) error {
	if string(meta.Get(magicKey)) != Magic {
		return fmt.Errorf("%w: wrong magic %q", ErrCorrupt, meta.Get(magicKey))
	}
	v := meta.Get(versionKey)
	if len(v) != 4 {
		return fmt.Errorf("%w: bad format version", ErrCorrupt)
	}
	switch ver := binary.BigEndian.Uint32(v); {
	case ver > FormatVersion:
		return fmt.Errorf("%w: file format %d, this build reads %d", ErrVersion, ver, FormatVersion)
	case ver != FormatVersion:
		return fmt.Errorf("%w: file format %d", ErrCorrupt, ver)
	}
	return nil
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
		if len(k) != 8 {
			return 0, fmt.Errorf("%w: bad log key %x", ErrCorrupt, k)
		}
		last = max(last, binary.BigEndian.Uint64(k))
	}
	return last, nil
}
