package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	bolt "go.etcd.io/bbolt"
)

// DefaultPreallocate is Options.Preallocate's default.
const DefaultPreallocate = 8 << 20

// MaxPreallocate is the largest Options.Preallocate accepted.
const MaxPreallocate = 1 << 30

// zeroChunk is how many zero bytes a preallocation step writes (and
// syncs) at a time, so that the writer, extending the file while idle,
// is never away from new appends for long.
const zeroChunk = 1 << 20

// zeros is what a chunk writes: never written to, so its pages stay the
// kernel's shared zero page.
var zeros [zeroChunk]byte

// writeZeros writes preallocation's zeros; tests replace it to fail.
var writeZeros = (*os.File).WriteAt

// freeSpace reports the free and total bytes of the file system holding
// path; tests replace it.
var freeSpace = statfsFree

// preallocator keeps the file extended with written zeros ahead of the
// pages bbolt uses.
//
// Why: bbolt grows its file by truncating it, which leaves a sparse file,
// so each commit that extends the log writes into blocks the file system
// allocates then, and the commit's fdatasync must also get that
// allocation into the file system's journal. Into blocks written (and
// synced) before, an fdatasync only flushes the data; fallocate is not
// enough, since unwritten extents need journalling too. PostgreSQL
// zero-fills its WAL segments for the same reason.
//
// It keeps between step/2 and step bytes of zeros past bbolt's high-water
// mark: Open extends the file to step past it, and the writer goroutine,
// whenever it is idle and less than half a step is left, writes more, one
// synced chunk at a time, so that it is never away from a commit for
// longer than a chunk takes. It never
// leaves its file system less than a margin free (the larger of two steps
// and a twentieth of the file system): preallocation is an optimisation,
// and must not fill a disk other programs share. A write that fails is
// given back (the file is truncated to where the attempt began) and
// preallocation stops for this Log, with a warning.
//
// It cannot meet bbolt's own writes: it writes inside a bbolt write
// transaction that it rolls back, so no other transaction (a log commit, a
// snapshot's) grows the file or writes past its pages meanwhile. bbolt's
// own growth (by truncation, when the log outgrows the zeros) only ever
// extends the file.
type preallocator struct {
	path      string
	db        *bolt.DB
	step      int64
	pageSize  int64
	logger    *slog.Logger
	f         *os.File // opened at the first write
	stopped   bool
	warned    bool
	full      int64 // the used size at which the margin stopped the last fill; -1: none
	wroteLast bool  // the last fill wrote a chunk
	// used and size are the end of the pages bbolt used and the file's
	// size as last seen (by a fill, or used by a commit: see saw), so that
	// due needs no system call; size < 0: unknown.
	used, size int64
}

func newPreallocator(path string, db *bolt.DB, step int64, logger *slog.Logger) *preallocator {
	return &preallocator{path: path, db: db, step: step, pageSize: int64(db.Info().PageSize), logger: logger, stopped: step <= 0, full: -1, size: -1}
}

// saw records used, the end of the pages bbolt uses as a commit saw it.
func (p *preallocator) saw(used int64) { p.used = max(p.used, used) }

// due reports whether less than half a step of zeros is left (and the
// margin did not stop a fill since the log last grew), as far as the last
// fill and commits saw: bbolt's own growth may have left more, which the
// fill then finds.
func (p *preallocator) due() bool {
	if p.stopped {
		return false
	}
	return p.size < 0 || p.size-p.used < p.step/2 && p.used != p.full
}

// fillChunk extends the file by one chunk towards a step past the used
// pages, and reports whether it wrote one.
func (p *preallocator) fillChunk() bool {
	first := true
	p.fill(func() bool { more := first; first = false; return more })
	return p.wroteLast
}

// fill extends the file to a step past the used pages, a chunk at a time,
// while more() is true (it is asked before each chunk).
func (p *preallocator) fill(more func() bool) {
	p.wroteLast = false
	for !p.stopped && more() {
		done := false
		// Inside a write transaction, rolled back: bbolt's writer lock
		// keeps every other transaction (a log commit, a snapshot's) from
		// growing the file or writing past its pages meanwhile.
		err := p.db.Update(func(tx *bolt.Tx) error {
			done = p.chunk(tx.Size())
			return errRollback
		})
		if err != nil && !errors.Is(err, errRollback) {
			p.stop(err)
		}
		if done {
			return
		}
	}
}

// errRollback rolls back fill's transaction, which writes no page.
var errRollback = errors.New("rollback")

// chunk writes the next chunk of zeros past used, the end of the pages
// bbolt uses, and reports whether the fill is done (nothing left to
// write, the margin reached, or preallocation stopped).
func (p *preallocator) chunk(used int64) (done bool) {
	st, err := os.Stat(p.path)
	if err != nil {
		p.stop(err)
		return true
	}
	size := st.Size()
	p.used, p.size = used, size
	end := (used + p.step + p.pageSize - 1) / p.pageSize * p.pageSize
	if size >= end {
		return true
	}
	n := min(end-size, zeroChunk)
	free, total, err := freeSpace(p.path)
	if err != nil {
		p.stop(fmt.Errorf("free space unknown: %w", err))
		return true
	}
	if margin := max(2*p.step, int64(total/20)); int64(free)-n < margin {
		p.full = used
		if !p.warned {
			p.warned = true
			p.logger.Warn("wal: not preallocating: the file system is nearly full", "path", p.path, "free", free, "margin", margin)
		}
		return true
	}
	if err := p.write(size, n); err != nil {
		p.stop(err)
		return true
	}
	p.size = size + n
	p.wroteLast = true
	return false
}

// write writes n zeros at off (the end of the file) and syncs them; on a
// failure it truncates the file back to off.
func (p *preallocator) write(off, n int64) error {
	if p.f == nil {
		f, err := os.OpenFile(p.path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		p.f = f
	}
	_, err := writeZeros(p.f, zeros[:n], off)
	if err == nil {
		err = p.f.Sync()
	}
	if err != nil {
		if terr := p.f.Truncate(off); terr != nil {
			return fmt.Errorf("writing zeros at %d: %w (and giving them back: %v)", off, err, terr)
		}
		_ = p.f.Sync()
		return fmt.Errorf("writing zeros at %d: %w", off, err)
	}
	return nil
}

func (p *preallocator) stop(err error) {
	p.stopped = true
	p.logger.Warn("wal: preallocation stopped; commits that grow the file will be slower", "path", p.path, "err", err)
}

func (p *preallocator) close() {
	if p.f != nil {
		_ = p.f.Close()
	}
}
