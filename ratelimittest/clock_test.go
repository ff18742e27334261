package ratelimittest_test

import (
	"context"
	"fmt"
	"testing"
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

// A zero Clock reads a time the limiter can use: buckets refill as it
// advances.
func TestZeroClock(t *testing.T) {
	var clk ratelimittest.Clock
	if got := clk.Now(); !got.Equal(time.Unix(0, 0)) {
		t.Fatalf("a zero Clock reads %v, want the Unix epoch", got)
	}
	l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now,
		Limits: map[string]ratelimit.Config{"api": {Kind: ratelimit.TokenBucket, Rate: 1, Period: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "api"}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "api"}); err != nil || st.OK {
		t.Fatalf("second request within the second: %+v, %v", st, err)
	}
	clk.Advance(time.Second)
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "api"}); err != nil || !st.OK {
		t.Fatalf("after Advance(1s) on a zero Clock: %+v, %v", st, err)
	}
}
