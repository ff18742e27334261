package snapshot

import (
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Sentinel errors. Each wraps the wal sentinel of the same meaning, so
// errors.Is(err, wal.ErrCorrupt) also holds for snapshot corruption.
var (
	// ErrCorrupt: the stored snapshot fails validation (head, chunk
	// sequence, chunk checksum or framing, record counts).
	ErrCorrupt = fmt.Errorf("snapshot: corrupt snapshot: %w", wal.ErrCorrupt)
	// ErrVersion: the stored snapshot was written by a newer format.
	ErrVersion = fmt.Errorf("snapshot: unsupported snapshot version: %w", wal.ErrVersion)
)
