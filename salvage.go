package ratelimit

import (
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/internal/filestate"
)

// SalvageReport says what Salvage read from a damaged file and what it
// could not.
type SalvageReport struct {
	// Buckets is the number of buckets written to the new file.
	Buckets int
	// SnapshotRecords is the number of buckets read from the file's last
	// snapshot (0 without one): those of every part of it that checks
	// out.
	SnapshotRecords int
	// LogBatches and LogRecords count the log written after that
	// snapshot that was read back.
	LogBatches, LogRecords int
	// Problems lists what could not be read: damaged pages, a snapshot or
	// log batches that failed their checks, gaps in the log. Empty means
	// the new file holds exactly what the old one last committed. A
	// bucket whose last writes a problem lost reads as an earlier part of
	// the file left it (as full, when none did): a limiter on the new file
	// may admit up to one capacity more for those keys.
	Problems []string
}

// Salvage reads what it can of the limiter's file at src, which may be
// damaged, and writes it to a new file at dst (which must not exist): the
// last snapshot, every part of it that checks out (each part has its own
// checksum and names its snapshot, so that an older snapshot's part is
// left out), plus every log batch after it that checks out. Open refuses
// a damaged file (ErrCorrupt) rather than start on part of its state;
// Salvage is how an operator accepts what is left.
// It also compacts: the new file holds the live buckets and nothing else
// (a limiter's file never shrinks by itself).
//
// The new file is written beside dst and renamed into place once
// complete, so a salvage that fails leaves nothing at dst. The report
// lists what was lost. Salvage returns an error, and writes nothing, when
// src cannot be read as a limiter's file at all (ErrCorrupt:
// no valid bbolt meta page, or another program's file; ErrVersion: a newer
// format), when a limiter has src open (ErrLocked), or when dst exists or
// cannot be written.
func Salvage(src, dst string) (SalvageReport, error) {
	c, err := filestate.Read(src)
	if err != nil {
		return SalvageReport{}, fmt.Errorf("%w: salvage %s: %w", ErrUnavailable, src, &fileError{err})
	}
	if err := filestate.Write(dst, c.Buckets); err != nil {
		return SalvageReport{}, fmt.Errorf("%w: salvage into %s: %w", ErrUnavailable, dst, &fileError{err})
	}
	rep := SalvageReport{Buckets: len(c.Buckets), SnapshotRecords: c.SnapshotRecords, LogBatches: c.LogBatches, LogRecords: c.LogRecords}
	for _, p := range c.Problems {
		rep.Problems = append(rep.Problems, p.Error())
	}
	return rep, nil
}
