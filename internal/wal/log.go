package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Options configures Open. The zero value is valid.
type Options struct {
	// LockTimeout is how long Open waits for another Log (in this or
	// another process) to release the file lock. 0 means 1s; a negative
	// value means do not wait at all beyond one attempt.
	LockTimeout time.Duration
	// Logger receives commit failures (Error) and open/close events
	// (Debug). nil discards.
	Logger *slog.Logger
	// BeforeCommit, if set, runs inside each log write transaction just
	// before commit, with the batch's sequence number. A non-nil error
	// aborts that commit exactly as an I/O failure would. For
	// fault-injection tests.
	BeforeCommit func(seq uint64) error
	// NoFreelistSync is passed to bbolt: commits skip writing the
	// freelist (faster), and Open rebuilds it by scanning the file
	// (slower Open on large files). false by default.
	NoFreelistSync bool
	// Preallocate is how far ahead of the pages bbolt uses the file is
	// kept extended with written and synced zeros, so that commits
	// extending the log write into space the file system has already
	// allocated, whose fdatasync needs no journal commit (see
	// preallocator). Open extends the file that far, and the writer
	// extends it again while idle; never into the last free space of the
	// file system. 0 means DefaultPreallocate; < 0 writes nothing; above
	// MaxPreallocate is ErrInvalidOptions. A failure to write the zeros (a
	// full disk) is given back and logged as a warning: it only costs
	// speed.
	Preallocate int64
}

// Log is a durable, group-committed log of Records in a bbolt file. It is
// safe for concurrent use. See the package documentation.
type Log struct {
	db     *bolt.DB
	opts   Options
	logger *slog.Logger

	mu      sync.Mutex
	pending *pendingBatch // records and waiters not yet handed to the writer
	spare   *pendingBatch // the other buffer, owned by the writer while it commits
	closing bool          // Close has begun: Append refuses
	// committing: a goroutine holds the commit role (commits, or writes
	// preallocation); what follows under "role holder only" is its.
	committing bool
	idleWriter bool // the writer goroutine waits for a signal
	// crowd: the last batch committed had several waiters, so callers
	// are not alone and CommitNow leaves the commit to the writer, whose
	// settling lets the next cohort gather.
	crowd bool
	wake  chan struct{} // 1-buffered: pending became non-empty, or closing
	done  chan struct{} // closed when the writer exits

	// Gathering a cohort (see Log.gather). want, guarded by mu, is the
	// number of lone callers (AppendOwn's waiters) pending at which an
	// append signals gathered (0: none awaited).
	want     int
	gathered chan struct{} // 1-buffered: want (or settleBytes) was reached, or closing
	cohort   int           // lone callers expected pending once the last released are back; role holder only
	typical  time.Duration // a commit's typical duration (see typicalCommit); role holder only
	skip     int           // commits left before gathering again after a miss; role holder only
	backoff  int           // the skip the last miss set (0 after a gather that met its cohort); role holder only
	late     bool          // the last gather met its cohort late (see afterGather); role holder only
	timer    *time.Timer   // bounds a gather; role holder only

	seq      uint64                // last sequence number used; role holder only
	version  uint32                // the file's format version; role holder only
	key      [chunkKeyLen]byte     // role holder only
	pageSize int                   // the file's page size
	prealloc *preallocator         // role holder only (and Open, before the writer starts)
	failure  atomic.Pointer[error] // sticky commit error
	pos      atomic.Uint64
	written  atomic.Int64
	replayed atomic.Int64
	stats    statCounters

	closeOnce sync.Once
	closeErr  error
}

// Open opens or creates the log file at path and starts its writer.
func Open(path string, opts Options) (*Log, error) {
	if opts.Preallocate > MaxPreallocate {
		return nil, fmt.Errorf("%w: Preallocate %d above %d", ErrInvalidOptions, opts.Preallocate, int64(MaxPreallocate))
	}
	if opts.Preallocate == 0 {
		opts.Preallocate = DefaultPreallocate
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	} else if opts.LockTimeout < 0 {
		opts.LockTimeout = time.Nanosecond
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file: it is %s", ErrInvalidOptions, path, FileKind(st.Mode()))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("wal: create directory: %w", err)
	}
	db, last, version, err := openDB(path, opts)
	if err != nil {
		return nil, err
	}
	l := &Log{
		db:       db,
		opts:     opts,
		logger:   logger,
		pending:  new(pendingBatch),
		spare:    new(pendingBatch),
		wake:     make(chan struct{}, 1),
		gathered: make(chan struct{}, 1),
		timer:    stoppedTimer(),
		done:     make(chan struct{}),
		seq:      last,
		version:  version,
		pageSize: db.Info().PageSize,
	}
	l.pos.Store(last)
	l.prealloc = newPreallocator(path, db, opts.Preallocate, logger)
	l.prealloc.fill(func() bool { return true })
	logger.Debug("wal: opened", "path", path, "position", last)
	go l.run()
	return l, nil
}

// openDB opens the bbolt file and validates or creates the meta bucket,
// returning the log position and the file's format version. It
// converts panics from bbolt on garbage pages (and faults on the mapped
// file) into ErrCorrupt, closing the file so its lock is released.
func openDB(path string, opts Options) (db *bolt.DB, last uint64, version uint32, err error) {
	var file *os.File
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if db != nil {
				closeQuietly(db)
			} else if file != nil {
				_ = file.Close()
			}
			db, last, version, err = nil, 0, 0, fmt.Errorf("%w: bbolt panicked: %v (file %s)", ErrCorrupt, p, path)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        opts.LockTimeout,
		NoFreelistSync: opts.NoFreelistSync,
		OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, mode)
			if err != nil {
				return nil, err
			}
			file = f
			if err := lockAndCheck(f, opts.LockTimeout); err != nil {
				file = nil
				_ = f.Close()
				return nil, err
			}
			return f, nil
		},
	})
	if err != nil {
		return nil, 0, 0, mapOpenError(path, err)
	}
	if last, version, err = initMeta(db); err != nil {
		closeQuietly(db)
		return nil, 0, 0, fmt.Errorf("%w (file %s)", err, path)
	}
	return db, last, version, nil
}

func closeQuietly(db *bolt.DB) {
	defer func() { _ = recover() }()
	_ = db.Close()
}

// mapOpenError classifies a bbolt.Open error: a lock timeout is ErrLocked,
// a failure to open the file itself (permissions, a directory, ...) is
// returned as is, and anything else concerns the file's content (bad meta
// pages, too small, bad mapping) and is ErrCorrupt.
func mapOpenError(path string, err error) error {
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, ErrLocked) || errors.Is(err, ErrCorrupt):
		return fmt.Errorf("%w (file %s)", err, path)
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("%w: %w (file %s)", ErrLocked, err, path)
	case errors.As(err, &pathErr):
		return fmt.Errorf("wal: open: %w", err)
	}
	return fmt.Errorf("%w: %w (file %s)", ErrCorrupt, err, path)
}

// Err returns the sticky error (wrapping ErrFailed) once a commit has
// failed, nil while the log is healthy.
func (l *Log) Err() error {
	if p := l.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Position returns the sequence number of the last committed batch (0 when
// none has ever been committed). It survives truncation and reopening.
func (l *Log) Position() uint64 { return l.pos.Load() }

// Written returns the encoded bytes committed to the log since Open.
func (l *Log) Written() int64 { return l.written.Load() }

// Replayed returns the encoded bytes of the batches Replay has decoded
// since Open: with Written, how much log the last snapshot does not cover
// (when Replay started from that snapshot's position).
func (l *Log) Replayed() int64 { return l.replayed.Load() }

// DB returns the underlying bbolt database, for snapshots sharing the file.
// Do not close it; use Log.Close.
func (l *Log) DB() *bolt.DB { return l.db }

// FileKind names the kind of file m describes, for errors about a path
// that is not a regular file: "a directory", "a named pipe", and so on.
func FileKind(m fs.FileMode) string {
	for _, k := range fileKinds {
		if m&k.bit != 0 {
			return k.name
		}
	}
	return "an irregular file (" + m.Type().String() + ")"
}

// fileKinds names the type bits, a character device's before the device
// bit it also has.
var fileKinds = []struct {
	bit  fs.FileMode
	name string
}{
	{fs.ModeDir, "a directory"},
	{fs.ModeSymlink, "a symbolic link"},
	{fs.ModeNamedPipe, "a named pipe"},
	{fs.ModeSocket, "a socket"},
	{fs.ModeCharDevice, "a character device"},
	{fs.ModeDevice, "a block device"},
}
