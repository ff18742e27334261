package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// Bucket is the state of one descriptor's bucket.
type Bucket struct {
	Limit *config.Limit
	Key   string
	ratelimit.Value
}

// resolve finds the counting rule a descriptor of domain matches.
func (e *Engine) resolve(domain string, entries []config.Entry) (config.Match, error) {
	r := Request{Domain: domain, Descriptors: []Descriptor{{Entries: entries}}}
	if err := e.limits.validate(&r); err != nil {
		return config.Match{}, err
	}
	cfg := e.cfg.Load()
	if !cfg.HasDomain(domain) {
		return config.Match{}, fmt.Errorf("%w: %q", ErrUnknownDomain, domain)
	}
	m, ok := cfg.Match(domain, entries)
	if !ok || m.Limit.Unlimited || m.Limit.Blocked {
		return config.Match{}, fmt.Errorf("%w: domain %q", ErrUnknownDescriptor, domain)
	}
	return m, nil
}

// Value returns the state of the bucket of the descriptor entries of
// domain, projected to now. It takes nothing.
func (e *Engine) Value(ctx context.Context, domain string, entries []config.Entry) (Bucket, error) {
	m, err := e.resolve(domain, entries)
	if err != nil {
		return Bucket{}, err
	}
	v, err := e.lim.Value(ctx, m.Limit.Name, m.Key)
	if err != nil {
		return Bucket{}, e.operatorErr(err)
	}
	return Bucket{Limit: m.Limit, Key: m.Key, Value: v}, nil
}

// Credit gives count tokens back to the descriptor's bucket, up to its
// capacity, durably.
func (e *Engine) Credit(ctx context.Context, domain string, entries []config.Entry, count float64) (Bucket, error) {
	m, err := e.resolve(domain, entries)
	if err != nil {
		return Bucket{}, err
	}
	if err := e.lim.Credit(ctx, m.Limit.Name, m.Key, count); err != nil {
		return Bucket{}, e.operatorErr(err)
	}
	return Bucket{Limit: m.Limit, Key: m.Key}, nil
}

// Reset empties the descriptor's bucket of every use (it is full again),
// durably.
func (e *Engine) Reset(ctx context.Context, domain string, entries []config.Entry) (Bucket, error) {
	m, err := e.resolve(domain, entries)
	if err != nil {
		return Bucket{}, err
	}
	if err := e.lim.Reset(ctx, m.Limit.Name, m.Key); err != nil {
		return Bucket{}, e.operatorErr(err)
	}
	return Bucket{Limit: m.Limit, Key: m.Key}, nil
}

// operatorErr turns a limiter error from an operator action into the
// engine's.
func (e *Engine) operatorErr(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, ratelimit.ErrInvalidCount), errors.Is(err, ratelimit.ErrInvalidKey):
		return fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	case errors.Is(err, ratelimit.ErrUnavailable), errors.Is(err, ratelimit.ErrClosed):
		e.markFailed(err)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}
