package ratelimittest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// A limit tested at exact instants: no sleeping.
func ExampleClock() {
	clk := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, _ := ratelimit.Open(ratelimit.Options{
		Now:    clk.Now,
		Limits: map[string]ratelimit.Config{"api": {Kind: ratelimit.TokenBucket, Rate: 1, Period: time.Second}},
	})
	defer l.Close()
	ctx := context.Background()
	st, _ := l.Limit(ctx, ratelimit.Request{Name: "api"})
	fmt.Println(st.OK)
	st, _ = l.Limit(ctx, ratelimit.Request{Name: "api"})
	fmt.Println(st.OK, st.RetryAfter)
	clk.Advance(st.RetryAfter)
	st, _ = l.Limit(ctx, ratelimit.Request{Name: "api"})
	fmt.Println(st.OK)
	// Output:
	// true
	// false 1s
	// true
}
