package ratelimit

import (
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

func newFakeClock() *ratelimittest.Clock { return ratelimittest.NewClock(time.Unix(1_700_000_000, 0)) }
