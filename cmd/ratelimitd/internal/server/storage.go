package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// ErrInvalidStorage: the storage options contradict each other or name
// something unusable (a Redis address list with an empty entry, a CA
// file without a certificate, a file and Redis at once).
var ErrInvalidStorage = errors.New("invalid storage options")

// Storage says where the limiter keeps its buckets: a file, memory, or
// Redis.
type Storage struct {
	// Data is the limiter's bbolt file: every grant is on disk before it
	// is answered. "" keeps the buckets in memory only (or on Redis, when
	// Redis is set).
	Data string
	// MaxBuckets is ratelimit.Options.MaxBuckets (file and memory only).
	MaxBuckets int
	// Redis, when set, keeps the buckets on Redis (package redislimit):
	// replicas opened on the same servers with the same prefix share
	// their limits. Data must then be "".
	Redis *RedisStorage
}

// Kind names the storage for the log and errors.
func (s Storage) Kind() string {
	switch {
	case s.Redis != nil:
		return "redis"
	case s.Data == "":
		return "memory"
	}
	return "file"
}

// Validate checks the storage options before anything is opened: its
// errors wrap ErrInvalidStorage.
func (s Storage) Validate() error {
	if s.Redis == nil {
		return nil
	}
	if s.Data != "" {
		return fmt.Errorf("%w: a data file (%q) and Redis exclude each other", ErrInvalidStorage, s.Data)
	}
	if s.MaxBuckets != 0 {
		return fmt.Errorf("%w: the bucket bound is for a file or memory; on Redis, memory is the server's (maxmemory)", ErrInvalidStorage)
	}
	return s.Redis.validate()
}

// store is the opened storage: the limiter, what closes it, and how to
// probe it.
type store struct {
	lim *ratelimit.Limiter
	// close closes the limiter, then what it was opened on (a Redis
	// client).
	close func() error
	// probe, when set, reports whether the storage answers now (Redis:
	// every master answers PING). A file or memory limiter has none: its
	// failures are for good and the engine remembers them.
	probe func(context.Context) error
	// transient: the storage's failures may pass (Redis comes back).
	transient bool
}

// probeTimeout bounds one health probe of the storage.
const probeTimeout = time.Second

// open opens the limiter on the storage, with opts (Limits, Logger) set
// by the caller. Everything else sees only the *ratelimit.Limiter.
func (s Storage) open(opts ratelimit.Options) (*store, error) {
	if s.Redis != nil {
		return s.Redis.open(opts)
	}
	opts.Path, opts.MaxBuckets = s.Data, s.MaxBuckets
	lim, err := ratelimit.Open(opts)
	if err != nil {
		return nil, err
	}
	return &store{lim: lim, close: lim.Close}, nil
}

// hasFile reports whether the storage is a file (Backup works).
func (s Storage) hasFile() bool { return s.Redis == nil && s.Data != "" }
