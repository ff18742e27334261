// Package ratelimittest helps test code that uses package ratelimit.
package ratelimittest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to, for ratelimit.Options.Now:
// tests replay scripted steps at exact instants instead of sleeping. It is
// safe for concurrent use. The zero value reads the Unix epoch (1970-01-01
// UTC): the zero time.Time lies outside the years the limiter reads (see
// ratelimit.Options.Now), where every reading would look the same.
type Clock struct {
	mu  sync.Mutex
	t   time.Time
	set bool // t has been given; else the clock reads the epoch
}

// NewClock returns a clock reading t. NewClock and Set take t as it is,
// the zero time.Time included.
func NewClock(t time.Time) *Clock { return &Clock{t: t, set: true} }

// epoch is what a zero Clock reads.
var epoch = time.Unix(0, 0).UTC()

// Now returns the clock's time; pass c.Now as Options.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now()
}

// now is the time, with c.mu held.
func (c *Clock) now() time.Time {
	if !c.set {
		return epoch
	}
	return c.t
}

// Set sets the time, backwards too (the limiter tolerates clocks that go
// back: no tokens are minted or destroyed).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t, c.set = t, true
	c.mu.Unlock()
}

// Advance moves the clock by d (which may be negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t, c.set = c.now().Add(d), true
	c.mu.Unlock()
}
