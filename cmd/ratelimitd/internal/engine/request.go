package engine

import (
	"fmt"
	"unicode/utf8"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// MaxHits is the largest hits a descriptor may carry: the largest integer
// a float64 (the limiter's count) holds exactly.
const MaxHits = 1 << 53

// Request is one decision to make: Envoy's RateLimitRequest, with the
// hits resolved per descriptor.
type Request struct {
	Domain      string
	Descriptors []Descriptor
	// Reserve grants parts even when tokens are short, leaving debt
	// (within the rule's max_reserved); the status's RetryAfter then says
	// how long to wait. Envoy's protocol never reserves.
	Reserve bool
	// CheckOnly decides without taking anything.
	CheckOnly bool
}

// Descriptor is one descriptor of a Request.
type Descriptor struct {
	Entries []config.Entry
	// Hits is the count to take; 0 checks without taking.
	Hits uint64
	// Override, when set, is the request's own limit for the descriptor
	// (Envoy's RateLimitDescriptor.limit): it replaces any rule, in a
	// configured domain.
	Override *Override
}

// Override is a limit a request sets for one descriptor.
type Override struct {
	RequestsPerUnit uint32
	Unit            config.Unit
	Multiplier      uint32 // 0 means 1
}

// Limits bound what one request may carry. Zero fields mean the defaults.
type Limits struct {
	// MaxDescriptors per request; 0 means DefaultMaxDescriptors.
	MaxDescriptors int
	// MaxEntries per descriptor; 0 means DefaultMaxEntries.
	MaxEntries int
	// MaxEntryBytes bounds a domain, a key and a value, in bytes; 0 means
	// DefaultMaxEntryBytes.
	MaxEntryBytes int
	// MaxOverrides bounds the distinct limit overrides (domain, requests
	// per unit, unit, multiplier) the engine accepts over its lifetime,
	// since the limiter keeps each one; 0 means DefaultMaxOverrides, < 0
	// refuses every override.
	MaxOverrides int
}

// Defaults of Limits.
const (
	DefaultMaxDescriptors = 64
	DefaultMaxEntries     = 32
	DefaultMaxEntryBytes  = 4096
	DefaultMaxOverrides   = 1024
)

func (l Limits) withDefaults() Limits {
	if l.MaxDescriptors <= 0 {
		l.MaxDescriptors = DefaultMaxDescriptors
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if l.MaxOverrides == 0 {
		l.MaxOverrides = DefaultMaxOverrides
	}
	return l
}

// validate checks r against l (with defaults applied).
func (l Limits) validate(r *Request) error {
	if r.Domain == "" {
		return fmt.Errorf("%w: rate limit domain must not be empty", ErrInvalidRequest)
	}
	if err := l.text(r.Domain, "domain", -1, 0); err != nil {
		return err
	}
	if len(r.Descriptors) == 0 {
		return fmt.Errorf("%w: rate limit descriptor list must not be empty", ErrInvalidRequest)
	}
	if len(r.Descriptors) > l.MaxDescriptors {
		return fmt.Errorf("%w: %d descriptors, more than %d", ErrInvalidRequest, len(r.Descriptors), l.MaxDescriptors)
	}
	for i := range r.Descriptors {
		d := &r.Descriptors[i]
		if len(d.Entries) > l.MaxEntries {
			return fmt.Errorf("%w: descriptor %d: %d entries, more than %d", ErrInvalidRequest, i, len(d.Entries), l.MaxEntries)
		}
		for j, e := range d.Entries {
			if err := l.text(e.Key, "key", i, j); err != nil {
				return err
			}
			if err := l.text(e.Value, "value", i, j); err != nil {
				return err
			}
		}
		if d.Hits > MaxHits {
			return fmt.Errorf("%w: descriptor %d: hits %d above %d", ErrInvalidRequest, i, d.Hits, uint64(MaxHits))
		}
	}
	return nil
}

// text checks one string of a request: the domain (descriptor < 0), or
// an entry's key or value.
func (l Limits) text(s, field string, descriptor, entry int) error {
	var why string
	switch {
	case len(s) > l.MaxEntryBytes:
		why = fmt.Sprintf("%d bytes, more than %d", len(s), l.MaxEntryBytes)
	case !utf8.ValidString(s):
		why = "not valid UTF-8"
	default:
		return nil
	}
	if descriptor < 0 {
		return fmt.Errorf("%w: %s: %s", ErrInvalidRequest, field, why)
	}
	return fmt.Errorf("%w: descriptor %d entry %d %s: %s", ErrInvalidRequest, descriptor, entry, field, why)
}
