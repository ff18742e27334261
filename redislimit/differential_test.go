package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// diffLimits are the unsharded limits of the differential test: both
// kinds, fractional rates and capacities, reservations with and without
// maxReserved, hashed and fixed window phases, odd periods.
var diffLimits = map[string]ratelimit.Config{
	"tb":      {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
	"tbres":   {Kind: ratelimit.TokenBucket, Rate: 3, Period: 7 * S, Capacity: 5, MaxReserved: 4},
	"tbfrac":  {Kind: ratelimit.TokenBucket, Rate: 0.3, Period: 1700 * time.Microsecond, Capacity: 2.5},
	"tbslow":  {Kind: ratelimit.TokenBucket, Rate: 1, Period: 400 * 24 * H, Capacity: 3},
	"fw":      {Kind: ratelimit.FixedWindow, Rate: 5, Period: 10 * S, Capacity: 8},
	"fwstart": {Kind: ratelimit.FixedWindow, Rate: 0.7, Period: 3 * S, Capacity: 2, MaxReserved: 3, Start: t0.Add(123456789)},
	"fwodd":   {Kind: ratelimit.FixedWindow, Rate: 2, Period: 1001 * time.Nanosecond * 997, Capacity: 3},
	"fwlong":  {Kind: ratelimit.FixedWindow, Rate: 4, Period: 1000 * 24 * H, Capacity: 4},
}

var diffInline = []ratelimit.Config{
	{Kind: ratelimit.TokenBucket, Rate: 2, Period: 3 * S},
	{Kind: ratelimit.FixedWindow, Rate: 3, Period: 5*S + 7, Capacity: 4},
}

var diffKeys = []string{"", "a", "b", "k\x00{x}", "\xff\xfe long key with spaces and {braces}"}

// diffOp is one random request of the differential test.
type diffOp func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error)

// TestDifferential drives one random request stream, on one fake clock
// that steps in whole microseconds (and sometimes goes back), into an
// in-memory limiter and a Redis one, and requires the same answers:
// decisions, errors and waits exactly, token amounts to a relative 1e-12.
// The memory limiter has as many partitions as the store has slot tags,
// so both drop full buckets alike when the clock goes back.
func TestDifferential(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) { runDifferential(t, client, seed, 1500) })
		}
	})
}

// diffPair opens an in-memory limiter and one on client with
// diffLimits, on one fake clock. The memory limiter has as many
// partitions as the store has slot tags, so both drop full buckets alike
// when the clock goes back.
func diffPair(t *testing.T, client redis.UniversalClient) (clk *ratelimittest.Clock, mem, red *ratelimit.Limiter) {
	t.Helper()
	clk = newFakeClock(t0)
	opts := ratelimit.Options{Now: clk.Now, Limits: diffLimits, Partitions: Slots, SweepInterval: -1}
	mem, err := ratelimit.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	opts.Partitions = 0
	return clk, mem, open(t, client, opts, withSweep(0))
}

func runDifferential(t *testing.T, client redis.UniversalClient, seed uint64, steps int) {
	clk, mem, red := diffPair(t, client)
	rng := rand.New(rand.NewPCG(seed, 42))
	ctx := context.Background()
	var granted, denied, failed, waits int
	defer func() {
		t.Logf("%d granted, %d denied (%d with a wait), %d errors", granted, denied, waits, failed)
		if granted < steps/10 || denied < steps/10 || waits < steps/20 {
			t.Errorf("the stream exercised too little")
		}
	}()
	for step := 0; step < steps; step++ {
		advance(rng, clk)
		op := randomOp(rng)
		what, ms, mv, merr := op(ctx, mem)
		_, rs, rv, rerr := op(ctx, red)
		where := fmt.Sprintf("seed %d step %d at %v: %s", seed, step, clk.Now().Sub(t0), what)
		if (merr == nil) != (rerr == nil) || merr != nil && !sameSentinel(merr, rerr) {
			t.Fatalf("%s: errors differ: memory %v, redis %v", where, merr, rerr)
		}
		if len(ms) != len(rs) || len(mv) != len(rv) {
			t.Fatalf("%s: result shapes differ", where)
		}
		if merr != nil {
			failed++
		}
		for i := range ms {
			switch {
			case ms[i].OK:
				granted++
			case ms[i].Limit != "":
				denied++
			}
			if ms[i].RetryAfter > 0 {
				waits++
			}
			if d := compareStatus(ms[i], rs[i]); d != "" {
				t.Fatalf("%s: result %d: %s\nmemory %+v\nredis  %+v", where, i, d, ms[i], rs[i])
			}
		}
		for i := range mv {
			if !close12(mv[i], rv[i]) {
				t.Fatalf("%s: value %d: memory %v, redis %v", where, i, mv[i], rv[i])
			}
		}
	}
}

// advance moves the clock by a random number of whole microseconds: often
// none, sometimes across several periods, sometimes back.
func advance(rng *rand.Rand, clk *ratelimittest.Clock) {
	switch r := rng.IntN(20); {
	case r < 6:
	case r < 12:
		clk.Advance(time.Duration(rng.IntN(3000)) * time.Microsecond)
	case r < 17:
		clk.Advance(time.Duration(rng.Int64N(int64(20*S/time.Microsecond))) * time.Microsecond)
	case r < 18:
		clk.Advance(time.Duration(rng.Int64N(int64(3*H/time.Microsecond))) * time.Microsecond)
	default:
		clk.Advance(-time.Duration(rng.Int64N(int64(15*S/time.Microsecond))) * time.Microsecond)
	}
}

func randomRequest(rng *rand.Rand) ratelimit.Request {
	r := ratelimit.Request{Key: diffKeys[rng.IntN(len(diffKeys))]}
	if rng.IntN(8) == 0 {
		i := rng.IntN(len(diffInline))
		r.Name, r.Config = fmt.Sprint("inline", i), &diffInline[i]
	} else {
		names := []string{"tb", "tbres", "tbfrac", "tbslow", "fw", "fwstart", "fwodd", "fwlong"}
		r.Name = names[rng.IntN(len(names))]
	}
	counts := []float64{0, 1, 1, 2, 0.5, 0.3, 3, 1.7, 5}
	r.Count = counts[rng.IntN(len(counts))]
	r.Reserve = rng.IntN(3) == 0
	return r
}

func randomOp(rng *rand.Rand) diffOp {
	switch rng.IntN(12) {
	case 0, 1, 2, 3:
		r := randomRequest(rng)
		return func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error) {
			st, err := l.Limit(ctx, r)
			return fmt.Sprintf("Limit %+v", r), []ratelimit.Status{st}, nil, err
		}
	case 4:
		r := randomRequest(rng)
		return func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error) {
			st, err := l.Check(ctx, r)
			return fmt.Sprintf("Check %+v", r), []ratelimit.Status{st}, nil, err
		}
	case 5, 6:
		rs := make([]ratelimit.Request, 1+rng.IntN(4))
		for i := range rs {
			rs[i] = randomRequest(rng)
			rs[i].CheckOnly = rng.IntN(5) == 0
		}
		return func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error) {
			st, each, err := l.LimitAllStatuses(ctx, rs, nil)
			return fmt.Sprintf("LimitAll %+v", rs), append([]ratelimit.Status{st}, each...), nil, err
		}
	case 7:
		rs := make([]ratelimit.Request, 1+rng.IntN(6))
		for i := range rs {
			rs[i] = randomRequest(rng)
		}
		return func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error) {
			out := l.LimitMany(ctx, rs, nil)
			var sts []ratelimit.Status
			var err error
			for _, d := range out {
				sts = append(sts, d.Status)
				if d.Err != nil && err == nil {
					err = d.Err
				}
			}
			return fmt.Sprintf("LimitMany %+v", rs), sts, nil, err
		}
	case 8:
		r := randomRequest(rng)
		return func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error) {
			err := l.Credit(ctx, r.Name, r.Key, r.Count)
			return fmt.Sprintf("Credit %+v", r), nil, nil, err
		}
	case 9:
		r := randomRequest(rng)
		return func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error) {
			err := l.Reset(ctx, r.Name, r.Key)
			return fmt.Sprintf("Reset %+v", r), nil, nil, err
		}
	default:
		r := randomRequest(rng)
		return func(ctx context.Context, l *ratelimit.Limiter) (string, []ratelimit.Status, []float64, error) {
			v, err := l.Value(ctx, r.Name, r.Key)
			return fmt.Sprintf("Value %+v", r), nil, []float64{v.Value, float64(v.TS.UnixNano())}, err
		}
	}
}

// compareStatus returns how a and b differ beyond float rounding ("" if
// they do not).
func compareStatus(a, b ratelimit.Status) string {
	switch {
	case a.OK != b.OK:
		return "OK differs"
	case a.Limit != b.Limit:
		return "Limit differs"
	case a.RetryAfter != b.RetryAfter:
		return "RetryAfter differs"
	case !close12(a.Remaining, b.Remaining):
		return "Remaining differs"
	case a.ResetAfter != b.ResetAfter:
		return "ResetAfter differs"
	}
	return ""
}

// close12 reports whether a and b are equal to a relative 1e-12.
func close12(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

func sameSentinel(a, b error) bool {
	for _, s := range []error{ratelimit.ErrInvalidCount, ratelimit.ErrInvalidConfig, ratelimit.ErrUnknownLimit,
		ratelimit.ErrInvalidKey, ratelimit.ErrUnavailable, ratelimit.ErrClosed} {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return true
}

// After the clock goes back behind a tag's drop record, an absent bucket
// there is fresh as of the record, not the clock (it came back full no
// earlier than it left): the same answers as in memory, for a key asked
// twice in one call (the second request reads what the first wrote), in
// LimitMany and LimitAll, on tags with and without a record.
func TestFreshAfterADropAheadOfTheClock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk, mem, red := diffPair(t, client)
		ctx := context.Background()
		var dropped, twice []ratelimit.Request
		for i := range 60 {
			r := ratelimit.Request{Name: "tb", Key: fmt.Sprint("k", i)}
			if i < 30 {
				dropped = append(dropped, r)
			}
			twice = append(twice, r, r)
		}
		same := func(what string, ms, rs []ratelimit.Decision) {
			t.Helper()
			for i := range ms {
				if (ms[i].Err == nil) != (rs[i].Err == nil) {
					t.Fatalf("%s %d: memory %v, redis %v", what, i, ms[i].Err, rs[i].Err)
				}
				if d := compareStatus(ms[i].Status, rs[i].Status); d != "" {
					t.Fatalf("%s %d: %s\nmemory %+v\nredis  %+v", what, i, d, ms[i].Status, rs[i].Status)
				}
			}
		}
		clk.Advance(10 * S)
		same("take", mem.LimitMany(ctx, dropped, nil), red.LimitMany(ctx, dropped, nil))
		for _, r := range dropped { // full again: deleted, their tags' records at t0+10s
			for _, l := range []*ratelimit.Limiter{mem, red} {
				if err := l.Credit(ctx, r.Name, r.Key, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		clk.Advance(-5 * S)
		same("behind the records", mem.LimitMany(ctx, twice, nil), red.LimitMany(ctx, twice, nil))
		ma, merr := mem.LimitAll(ctx, twice[60:80]...)
		ra, rerr := red.LimitAll(ctx, twice[60:80]...)
		if merr != nil || rerr != nil {
			t.Fatal(merr, rerr)
		}
		if d := compareStatus(ma, ra); d != "" {
			t.Fatalf("LimitAll: %s\nmemory %+v\nredis  %+v", d, ma, ra)
		}
		for _, r := range twice[:8] {
			mv, merr := mem.Value(ctx, r.Name, r.Key)
			rv, rerr := red.Value(ctx, r.Name, r.Key)
			if merr != nil || rerr != nil {
				t.Fatal(merr, rerr)
			}
			if !close12(mv.Value, rv.Value) || !mv.TS.Equal(rv.TS) {
				t.Fatalf("Value %s: memory %+v, redis %+v", r.Key, mv, rv)
			}
		}
	})
}
