package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// Options configure an Engine. The zero value is valid.
type Options struct {
	Limits Limits
	// UnknownDomainError makes a request for a domain the configuration
	// does not have an ErrUnknownDomain; false answers it OK with no
	// limit, as envoyproxy/ratelimit does.
	UnknownDomainError bool
	// FailOpen answers OK, with no limit, when the limiter cannot decide
	// (ratelimit.ErrUnavailable, ErrClosed), instead of an ErrUnavailable.
	// Dangerous: a broken limiter then limits nothing. Other errors fail
	// even so, among them a new key beyond the limiter's MaxBuckets
	// (ratelimit.ErrTooManyKeys): a flood of keys must not turn limiting
	// off.
	FailOpen bool
	// TransientFailures says the limiter's storage may fail and recover
	// (Redis): a request it cannot decide fails as always, but the engine
	// does not count the limiter as failed for good (Healthy stays true;
	// the server probes the storage for health instead). The log notes
	// when the storage starts failing and when it answers again.
	TransientFailures bool
	// Logger receives the first request of each unknown domain and
	// limiter failures; nil discards them.
	Logger *slog.Logger
	// Now is the clock for the windows' ends that statuses report; nil
	// means time.Now. The limiter has its own clock.
	Now func() time.Time
}

// Engine decides requests against a configuration with a limiter. It is
// safe for concurrent use.
type Engine struct {
	lim     *ratelimit.Limiter
	cfg     atomic.Pointer[config.Config]
	opts    Options
	limits  Limits
	now     func() time.Time
	log     *slog.Logger
	setMu   sync.Mutex // serialises SetConfig
	failed  atomic.Bool
	failing atomic.Bool // TransientFailures: the last decision failed
	stats   counters
	unknown unknownDomains
	over    overrides
	scratch sync.Pool
}

// New returns an engine that decides with lim under cfg. lim's
// Options.Limits must hold cfg.LimiterConfigs().
func New(lim *ratelimit.Limiter, cfg *config.Config, opts Options) *Engine {
	e := &Engine{lim: lim, opts: opts, limits: opts.Limits.withDefaults(), now: opts.Now, log: opts.Logger}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.over.max = e.limits.MaxOverrides
	e.cfg.Store(cfg)
	return e
}

// Config returns the configuration requests are decided under.
func (e *Engine) Config() *config.Config { return e.cfg.Load() }

// Limiter returns the engine's limiter.
func (e *Engine) Limiter() *ratelimit.Limiter { return e.lim }

// SetConfig makes cfg the configuration new requests are decided under,
// changing the limiter's limits to match (ratelimit.Limiter.SetLimits):
// buckets keep their state and are read under their limit's new
// config. On an error nothing changes. A request matched under the old
// configuration whose limit is gone is matched again.
func (e *Engine) SetConfig(cfg *config.Config) error {
	e.setMu.Lock()
	defer e.setMu.Unlock()
	next := cfg.LimiterConfigs()
	// Both generations' limits first, so that a request matched under
	// either finds its limit while the pointer changes.
	both := e.cfg.Load().LimiterConfigs()
	maps.Copy(both, next)
	if err := e.setLimits(both); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	e.cfg.Store(cfg)
	e.forgetUnknownDomains()
	if err := e.setLimits(next); err != nil {
		return fmt.Errorf("limits: %w", err) // cannot happen: both validated them
	}
	return nil
}

// setLimits is Limiter.SetLimits. ErrUnavailable from it means the limits
// serve, but a store whose keys expire by the limit they were written
// under (Redis) could not move them all: logged, not refused, since the
// limiter already decides by the new limits.
func (e *Engine) setLimits(limits map[string]ratelimit.Config) error {
	err := e.lim.SetLimits(limits)
	if errors.Is(err, ratelimit.ErrUnavailable) {
		e.log.Warn("the new limits serve, but some buckets' keys may expire by the old ones (and read full too soon)", slog.Any("err", err))
		return nil
	}
	return err
}

// Healthy reports whether the limiter can decide: false once it has
// failed (a storage error makes it refuse every grant until reopened) or
// been closed. With Options.TransientFailures it stays true.
func (e *Engine) Healthy() bool { return !e.failed.Load() }

// Limits returns the bounds requests are checked against, defaults
// applied.
func (e *Engine) Limits() Limits { return e.limits }
