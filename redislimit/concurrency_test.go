package redislimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
)

// TestConcurrentExactAccounting: 40 goroutines on two limiters sharing
// one Redis (or cluster), on a frozen clock, take from a few buckets by
// Limit, LimitMany and LimitAll across slots. Every bucket ends holding
// exactly its capacity minus what was granted from it, and no bucket ever
// granted more than its capacity.
func TestConcurrentExactAccounting(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk := newFakeClock(t0)
		limits := map[string]ratelimit.Config{
			"a": {Kind: ratelimit.TokenBucket, Rate: 300, Period: H},
			"b": {Kind: ratelimit.FixedWindow, Rate: 200, Period: H},
		}
		prefix := testPrefix(t)
		ls := []*ratelimit.Limiter{
			openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: limits}),
			openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: limits}),
		}
		keys := keysOnDistinctTags("a", "b")
		ka, kb := keys[0], keys[1]
		var takenA, takenB atomic.Int64
		var wg sync.WaitGroup
		ctx := context.Background()
		for g := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := ls[g%2]
				for i := range 40 {
					switch (g + i) % 3 {
					case 0:
						st, err := l.Limit(ctx, ratelimit.Request{Name: "a", Key: ka, Count: 2})
						if err != nil {
							t.Error(err)
							return
						}
						if st.OK {
							takenA.Add(2)
						}
					case 1:
						out := l.LimitMany(ctx, []ratelimit.Request{{Name: "a", Key: ka}, {Name: "b", Key: kb}}, nil)
						for k, d := range out {
							if d.Err != nil {
								t.Error(d.Err)
								return
							}
							if d.OK && k == 0 {
								takenA.Add(1)
							} else if d.OK {
								takenB.Add(1)
							}
						}
					default:
						st, err := l.LimitAll(ctx, ratelimit.Request{Name: "a", Key: ka}, ratelimit.Request{Name: "b", Key: kb, Count: 3})
						if err != nil {
							t.Error(err)
							return
						}
						if st.OK {
							takenA.Add(1)
							takenB.Add(3)
						}
					}
				}
			}()
		}
		wg.Wait()
		va, _ := ls[0].Value(ctx, "a", ka)
		vb, _ := ls[1].Value(ctx, "b", kb)
		if va.Value != 300-float64(takenA.Load()) || vb.Value != 200-float64(takenB.Load()) {
			t.Fatalf("a holds %v after %d taken, b %v after %d", va.Value, takenA.Load(), vb.Value, takenB.Load())
		}
		if va.Value < 0 || vb.Value < 0 {
			t.Fatalf("over-admitted: a %v, b %v", va.Value, vb.Value)
		}
		if takenA.Load() < 290 || takenB.Load() < 190 {
			t.Fatalf("under-admitted: a %d of 300, b %d of 200", takenA.Load(), takenB.Load())
		}
		for _, l := range ls {
			l.Close() // waits for the holds dropped in the background
		}
		if n := countKeys(t, client, prefix+"*h:*"); n != 0 {
			t.Fatalf("%d holds left", n)
		}
	})
}

// TestConcurrentNoOverAdmission: 32 goroutines on two limiters hammer a
// sharded limit and an odd-sharded one (whose lone shard pairs across
// slots) on the servers' clock; what they are granted never exceeds
// capacity + rate * elapsed.
func TestConcurrentNoOverAdmission(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		limits := map[string]ratelimit.Config{
			"even": {Kind: ratelimit.TokenBucket, Rate: 400, Period: S, Capacity: 40, Shards: 4},
			"odd":  {Kind: ratelimit.TokenBucket, Rate: 300, Period: S, Capacity: 30, Shards: 3},
		}
		prefix := testPrefix(t)
		ls := []*ratelimit.Limiter{
			openPrefix(t, client, prefix, ratelimit.Options{Limits: limits}),
			openPrefix(t, client, prefix, ratelimit.Options{Limits: limits}),
		}
		var granted [2]atomic.Int64
		names := []string{"even", "odd"}
		ctx := context.Background()
		start := time.Now()
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Since(start) < 300*time.Millisecond; i++ {
					n := (g + i) % 2
					st, err := ls[g%2].Limit(ctx, ratelimit.Request{Name: names[n], Key: "hot", Count: 1 + float64(i%3)})
					if err != nil {
						t.Error(err)
						return
					}
					if st.OK {
						granted[n].Add(1 + int64(i%3))
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start) + 10*time.Millisecond // the servers' clock may run a little ahead of ours
		for n, name := range names {
			c := limits[name]
			bound := c.Capacity + c.Rate*elapsed.Seconds()
			if g := float64(granted[n].Load()); g > bound {
				t.Errorf("%s: granted %v, bound %v", name, g, bound)
			} else if g < bound/3 {
				t.Errorf("%s: granted only %v of %v", name, g, bound)
			}
		}
	})
}

// TestConcurrentCalls runs every kind of call from many goroutines at
// once, for the race detector and for Close waiting for calls under way.
func TestConcurrentCalls(t *testing.T) {
	client := topologies[0].client(t)
	l := open(t, client, ratelimit.Options{Limits: failLimits})
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if errs, _ := everyCall(l); i > 0 && g == 0 {
					for _, err := range errs {
						if err != nil {
							t.Error(err)
						}
					}
				}
				l.Value(context.Background(), "a", fmt.Sprint(i))
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
