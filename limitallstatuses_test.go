package ratelimit_test

import (
	"context"
	"testing"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

func TestLimitAllStatusesReportsEachPart(t *testing.T) {
	clk := ratelimittest.NewClock(setT0)
	l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
		"user": tokenBucket(10, 10), "global": tokenBucket(100, 100),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	rs := []ratelimit.Request{{Name: "user", Key: "u", Count: 4}, {Name: "global", Count: 30}}
	st, each, err := l.LimitAllStatuses(ctx, rs, nil)
	if err != nil || !st.OK || len(each) != 2 {
		t.Fatalf("LimitAllStatuses = %+v, %+v, %v", st, each, err)
	}
	if !each[0].OK || each[0].Limit != "user" || each[0].Remaining != 6 || !each[1].OK || each[1].Limit != "global" || each[1].Remaining != 70 {
		t.Fatalf("each = %+v, want user 6 left and global 70 left", each)
	}
	if st.Limit != "user" || st.Remaining != 6 {
		t.Fatalf("overall = %+v, want the part with the fewest left (user)", st)
	}
	// Now the user part fails: nothing is taken from either bucket, the
	// global part reports what it would have left.
	rs[0].Count = 7
	st, each, err = l.LimitAllStatuses(ctx, rs, each)
	if err != nil || st.OK || len(each) != 2 {
		t.Fatalf("LimitAllStatuses = %+v, %+v, %v", st, each, err)
	}
	if each[0].OK || each[0].RetryAfter <= 0 || !each[1].OK || each[1].Remaining != 40 {
		t.Fatalf("each = %+v, want user denied with a wait, global granted with 40 left", each)
	}
	if v := mustValue(t, l, "user", "u"); v != 6 {
		t.Fatalf("user value after a denied call = %v, want 6", v)
	}
	if v := mustValue(t, l, "global", ""); v != 70 {
		t.Fatalf("global value after a denied call = %v, want 70", v)
	}
}

// A CheckOnly part must pass for the call to be granted, and takes
// nothing either way.
func TestLimitAllCheckOnlyPart(t *testing.T) {
	clk := ratelimittest.NewClock(setT0)
	l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
		"user": tokenBucket(10, 10), "global": tokenBucket(100, 100),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	check := ratelimit.Request{Name: "global", Count: 50, CheckOnly: true}
	for i := 0; i < 3; i++ {
		st, err := l.LimitAll(ctx, ratelimit.Request{Name: "user", Key: "u", Count: 2}, check)
		if err != nil || !st.OK {
			t.Fatalf("call %d = %+v, %v; want a grant", i, st, err)
		}
	}
	if v := mustValue(t, l, "global", ""); v != 100 {
		t.Fatalf("global after three checks = %v, want 100 (untouched)", v)
	}
	mustTake(t, l, "global", "", 60) // 40 left: the check of 50 now fails
	st, err := l.LimitAll(ctx, ratelimit.Request{Name: "user", Key: "u", Count: 2}, check)
	if err != nil || st.OK || st.Limit != "global" {
		t.Fatalf("call with a failing check = %+v, %v; want denied by global", st, err)
	}
	if v := mustValue(t, l, "user", "u"); v != 4 {
		t.Fatalf("user after the denied call = %v, want 4", v)
	}
	// Limit honours CheckOnly too.
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "user", Key: "u", Count: 4, CheckOnly: true}); err != nil || !st.OK {
		t.Fatalf("Limit(CheckOnly) = %+v, %v", st, err)
	}
	if v := mustValue(t, l, "user", "u"); v != 4 {
		t.Fatalf("user after Limit(CheckOnly) = %v, want 4", v)
	}
}
