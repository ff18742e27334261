package server

import (
	"github.com/seed7fbd42b6/ratelimit"
)

// Storage says where the limiter keeps its buckets.
type Storage struct {
	// Data is the limiter's bbolt file: every grant is on disk before it
	// is answered. "" keeps the buckets in memory only.
	Data string
	// MaxBuckets is ratelimit.Options.MaxBuckets.
	MaxBuckets int
}

// Kind names the storage for the log and errors.
func (s Storage) Kind() string {
	if s.Data == "" {
		return "memory"
	}
	return "file"
}

// open opens the limiter on the storage, with opts (Limits, Logger) set
// by the caller. Another backend (a Redis client for redislimit.Open) is
// chosen here from a field of Storage; everything else sees only the
// *ratelimit.Limiter.
func (s Storage) open(opts ratelimit.Options) (*ratelimit.Limiter, error) {
	opts.Path, opts.MaxBuckets = s.Data, s.MaxBuckets
	return ratelimit.Open(opts)
}

// hasFile reports whether the storage is a file (Backup works).
func (s Storage) hasFile() bool { return s.Data != "" }
