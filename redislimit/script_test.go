package redislimit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// TestFunctionMirrorsBucket puts random states, including extreme ones
// (huge debts, clocks far apart or gone back, periods from a microsecond
// to decades, any phase), into buckets and decides random requests on
// them at random clock readings. The store replays each decision with
// package bucket and, in tests, compares every state the function wrote
// with the replay's bit for bit, so any divergence of the Lua arithmetic
// fails the request (errDisagree).
func TestFunctionMirrorsBucket(t *testing.T) {
	client := topologies[0].client(t)
	ctx := context.Background()
	var now int64
	cfg := defaultConfig()
	cfg.prefix, cfg.sweep = testPrefix(t), 0
	s := newStore(client, &cfg, func() int64 { return now })
	defer s.Close()
	cfg.prefix = testPrefix(t) // buckets that stay absent: no drop record moves their fresh state
	absent := newStore(client, &cfg, func() int64 { return now })
	defer absent.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	pick := func(xs ...float64) float64 { return xs[rng.IntN(len(xs))] }
	const maxNow = int64(maxClockUs) * 1000
	decided := 0
	for step := range 4000 {
		lim := &bucket.Limit{Kind: bucket.TokenBucket, Rate: pick(1e-9, 0.3, 1, 7, 1e6, 1e12, logUniform(1e-6, 1e9))}
		if rng.IntN(2) == 0 {
			lim.Kind = bucket.FixedWindow
			lim.Period = int64(logUniform(1e3, float64(MaxWindow)))
		} else {
			lim.Period = int64(logUniform(1, 1e18))
		}
		lim.Capacity = pick(lim.Rate, 1, 0.5, 3*lim.Rate, logUniform(1e-3, 1e12))
		lim.MaxReserved = pick(0, 0, lim.Capacity, 1e-3, 1e15)
		now = []int64{0, 1_700_000_000_000_000_000, rng.Int64N(maxNow), maxNow - 1 - rng.Int64N(1e12)}[rng.IntN(4)]
		it := actor.Item{ID: actor.BucketID{Name: "p", Key: fmt.Sprint(step)}, Lim: lim, Part: int32(rng.IntN(Slots))}
		it.Phase = rng.Int64N(lim.Period)
		if rng.IntN(4) > 0 { // a stored state; else the bucket is absent
			v := pick(lim.Capacity, lim.Capacity/3, 0, -5*lim.Capacity, -1e15, 1e-300, lim.Capacity*(1-1e-16))
			ts := now - int64(pick(0, 1, 999, 1001, float64(lim.Period), float64(lim.Period)+1, logUniform(1, 3e18)))*int64(1-2*rng.IntN(2))
			ts = min(max(ts, -int64(MaxWindow)), maxNow-1)
			us, rem := split(ts)
			b := f64s(nil, v, us, rem)
			if err := client.Set(ctx, s.ks.bucket(&it), b, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c := actor.NewCall()
		c.Atomic = true
		m := actor.Member{Op: actor.Op(rng.IntN(3)), Count: pick(1, 0.5, lim.Capacity, lim.Capacity*3, 1e-9, 1e300), Reserve: rng.IntN(2) == 0, Second: -1}
		m.First = c.AddItem(it, 0, false)
		if rng.IntN(3) == 0 && m.Op != actor.OpCredit { // a second shard of the same limit
			it2 := it
			it2.ID.Shard = 1
			m.Second = c.AddItem(it2, 0, true)
		}
		c.Members = append(c.Members, m)
		s.Decide(ctx, c)
		if err := c.FirstErr(); err != nil {
			t.Fatalf("step %d: limit %+v, member %+v, at %d: %v", step, *lim, m, now, err)
		}
		decided++
		// An absent bucket of the same limit reads fresh, as package bucket says.
		p := actor.NewCall()
		fresh := it
		p.AddItem(fresh, -1, false)
		absent.Peek(p)
		if want := lim.Fresh(p.Now, fresh.Phase); p.FirstErr() != nil || p.Items[0].State != want {
			t.Fatalf("step %d: fresh %+v (%v), want %+v", step, p.Items[0].State, p.FirstErr(), want)
		}
		c.Release()
		p.Release()
	}
	t.Logf("%d decisions", decided)
}

// TestFunctionElapsedRoundsOnce: a token bucket's elapsed time past 2^53
// ns becomes the double nearest it, as Go's float64(uint64) conversion
// gives, not a double rounding of its microseconds and remainder.
func TestFunctionElapsedRoundsOnce(t *testing.T) {
	client := topologies[0].client(t)
	ctx := context.Background()
	// An elapsed time at which rounding twice and rounding once differ.
	var d int64
	for x := int64(1 << 61); ; x += 997 {
		us, rem := split(x)
		if twice := float64(us*1000) + rem; twice != float64(x) {
			d = x
			break
		}
	}
	now := int64(4e18)
	cfg := defaultConfig()
	cfg.prefix = testPrefix(t)
	s := newStore(client, &cfg, func() int64 { return now })
	defer s.Close()
	lim := &bucket.Limit{Kind: bucket.TokenBucket, Rate: 1, Period: 1, Capacity: math.MaxFloat64}
	it := actor.Item{ID: actor.BucketID{Name: "e", Key: "k"}, Lim: lim, Part: 1}
	us, rem := split(now - d)
	if err := client.Set(ctx, s.ks.bucket(&it), f64s(nil, 0, us, rem), 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := actor.NewCall()
	defer c.Release()
	c.Atomic = true
	c.Members = append(c.Members, actor.Member{Op: actor.OpTake, Count: 1, Second: -1, First: c.AddItem(it, 0, false)})
	s.Decide(ctx, c)
	if err := c.FirstErr(); err != nil || !c.Members[0].OK {
		t.Fatalf("elapsed %d: %v %+v", d, err, c.Members[0])
	}
}

// Calls of many thousands of buckets (more than Lua's unpack spreads at
// once, and enough to show a cost quadratic in a unit's size) decide like
// small ones: a LimitMany of distinct keys, a LimitAll whose keys share
// one tag, and Value and Reset of a limit with many shards.
func TestLargeCalls(t *testing.T) {
	const n = 9000
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		ctx := context.Background()
		l := open(t, client, ratelimit.Options{Now: newFakeClock(t0).Now, Limits: map[string]ratelimit.Config{
			"l": {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
			"s": {Kind: ratelimit.TokenBucket, Rate: 10 * n, Period: M, Shards: n},
		}})
		rs := make([]ratelimit.Request, n)
		for i := range rs {
			rs[i] = ratelimit.Request{Name: "l", Key: fmt.Sprint("many", i)}
		}
		for i, d := range l.LimitMany(ctx, rs, nil) {
			if d.Err != nil || !d.OK {
				t.Fatalf("LimitMany of %d keys: request %d: %+v", n, i, d)
			}
		}
		if v, err := l.Value(ctx, "l", rs[n-1].Key); err != nil || v.Value != 9 {
			t.Fatalf("after LimitMany: Value %v, %v; want 9", v.Value, err)
		}

		var one []ratelimit.Request // keys on one tag
		tag := route(bucket.Hash("l", "one0"), 0)
		for i := 0; len(one) < n; i++ {
			if k := fmt.Sprint("one", i); route(bucket.Hash("l", k), 0) == tag {
				one = append(one, ratelimit.Request{Name: "l", Key: k, Count: 4})
			}
		}
		for round, want := range []bool{true, true, false} { // 10 tokens: 4, 4, then 2 left
			if st, err := l.LimitAll(ctx, one...); err != nil || st.OK != want {
				t.Fatalf("LimitAll %d of %d keys on one tag: %+v, %v; want OK %v", round, n, st, err, want)
			}
		}

		if _, err := l.Limit(ctx, ratelimit.Request{Name: "s", Key: "k"}); err != nil {
			t.Fatal(err)
		}
		if v, err := l.Value(ctx, "s", "k"); err != nil || v.Value != 10*n-1 {
			t.Fatalf("Value of %d shards: %v, %v; want %d", n, v.Value, err, 10*n-1)
		}
		if err := l.Reset(ctx, "s", "k"); err != nil {
			t.Fatalf("Reset of %d shards: %v", n, err)
		}
		if v, err := l.Value(ctx, "s", "k"); err != nil || v.Value != 10*n {
			t.Fatalf("Value after Reset: %v, %v; want %d", v.Value, err, 10*n)
		}
	})
}

// A fixed window whose period changes keeps to the new grid at once, as
// in memory (ratelimit's TestSetLimitsRealignsAFixedWindow): a bucket
// stored in a per-second window is read, after SetLimits, from the start
// of the minute that holds it.
func TestSetLimitsRealignsAFixedWindow(t *testing.T) {
	epoch := time.Unix(0, 0)
	perSecond := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 2, Period: time.Second, Start: epoch}
	perMinute := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 2, Period: time.Minute, Start: epoch}
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		ctx := context.Background()
		clk := newFakeClock(t0.Truncate(time.Minute).Add(time.Minute + 14900*time.Millisecond))
		l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{"api": perSecond}})
		if st, err := l.Limit(ctx, ratelimit.Request{Name: "api", Key: "k"}); err != nil || !st.OK {
			t.Fatal(st, err)
		}
		clk.Advance(3100 * time.Millisecond) // 18 s past the minute
		if err := l.SetLimits(map[string]ratelimit.Config{"api": perMinute}); err != nil {
			t.Fatal(err)
		}
		st, err := l.Limit(ctx, ratelimit.Request{Name: "api", Key: "k"})
		if want := 42 * time.Second; err != nil || !st.OK || st.ResetAfter != want || st.Remaining != 0 {
			t.Errorf("under the per-minute window: %+v, %v; want granted, 0 left, full again in %v", st, err, want)
		}
	})
}
