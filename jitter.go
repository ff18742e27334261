package ratelimit

import (
	"math"
	"math/rand/v2"
	"time"
)

// Jitter returns d plus a uniformly random extra in [0, spread): schedule
// work at Jitter(st.RetryAfter, spread) instead of all at st.RetryAfter, so
// the callers a limit turned away do not all come back at once.
func Jitter(d, spread time.Duration) time.Duration {
	if spread <= 0 {
		return d
	}
	extra := time.Duration(rand.Int64N(int64(spread)))
	if d > math.MaxInt64-extra { // saturate rather than wrap negative
		return math.MaxInt64
	}
	return d + extra
}
