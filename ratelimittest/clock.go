// Package ratelimittest helps test code that uses package ratelimit.
package ratelimittest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to, for ratelimit.Options.Now:
// tests replay scripted steps at exact instants instead of sleeping. It is
// safe for concurrent use. The zero value reads the zero time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time; pass c.Now as Options.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the time, backwards too (the limiter tolerates clocks that go
// back: no tokens are minted or destroyed).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the clock by d (which may be negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
