package ratelimit

// Sharded limits (Config.Shards): two choices over shard pairs, exact
// accounting over every routing.

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// Every routing of a sharded request (a pair of shards on one partition; the
// lone last shard of an odd count with a shard on another partition, through
// the hold-free path and its two-phase fallback) keeps exact accounting
// under concurrency: with a frozen clock, the value is capacity minus the
// acknowledged grants, and never below -maxReserved.
func TestShardedRoutingsExact(t *testing.T) {
	for _, parts := range []int{1, 2, 8} {
		for _, shards := range []int{2, 4, 5, 16} {
			t.Run("parts="+strconv.Itoa(parts)+"/shards="+strconv.Itoa(shards), func(t *testing.T) {
				clk := newClock()
				l := open(t, Options{Now: clk.Now, Partitions: parts, Limits: map[string]Config{
					"s":   {Kind: TokenBucket, Rate: 400, Period: time.Hour, Shards: shards},
					"r":   {Kind: FixedWindow, Rate: 400, Period: time.Hour, Shards: shards, MaxReserved: 40},
					"key": {Kind: TokenBucket, Rate: 1e6, Period: time.Hour},
				}})
				ctx := context.Background()
				var grantedS, grantedR atomic.Int64
				var wg sync.WaitGroup
				for g := 0; g < 16; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						for i := 0; i < 300; i++ {
							n := float64(1 + (g+i)%5)
							switch i % 4 {
							case 0, 1:
								if s, err := l.Limit(ctx, Request{Name: "s", Count: n}); err != nil {
									t.Error(err)
								} else if s.OK {
									grantedS.Add(int64(n))
								}
							case 2:
								if s, err := l.Limit(ctx, Request{Name: "r", Count: n, Reserve: true}); err != nil {
									t.Error(err)
								} else if s.OK {
									grantedR.Add(int64(n))
								}
							default:
								if s, err := l.LimitAll(ctx, Request{Name: "s", Count: n}, Request{Name: "key", Key: strconv.Itoa(g)}); err != nil {
									t.Error(err)
								} else if s.OK {
									grantedS.Add(int64(n))
								}
							}
						}
					}(g)
				}
				wg.Wait()
				if v := value(t, l, "s", "").Value; v != 400-float64(grantedS.Load()) || v < 0 {
					t.Fatalf("s: value %v, granted %d of 400", v, grantedS.Load())
				}
				if v := value(t, l, "r", "").Value; v != 400-float64(grantedR.Load()) || v < -40 {
					t.Fatalf("r: value %v, granted %d of 400+40", v, grantedR.Load())
				}
				if grantedS.Load() < 400-2*5*int64(shards) {
					t.Fatalf("s: only %d of 400 granted: two choices left too much unused", grantedS.Load())
				}
				st := l.Stats()
				if st.Grants+st.Denials != 16*300 {
					t.Fatalf("stats count %d decisions, want %d", st.Grants+st.Denials, 16*300)
				}
			})
		}
	}
}

// A sharded limit: its Value sums the shards; a request draws from two
// shards at most; two shards split a request evenly; reservations split
// MaxReserved; a frozen clock never over-admits; Reset deletes every shard;
// each shard refills on its own.
func TestSharding(t *testing.T) {
	sh4 := withShards(tb(40, M), 4)
	sh2 := withShards(tb(20, M), 2)
	fw4 := withShards(fw(40, M, t0), 4)
	t.Run("fresh value sums shards", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": sh4, "f": fw4, "c": withCap(withShards(tb(10, M), 4), 40)}})
		for _, name := range []string{"s", "f", "c"} {
			for _, k := range []string{"", "k"} {
				wantValue(t, l, name, k, 40)
			}
		}
	})
	t.Run("count above two shards is invalid", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": sh4, "s2": sh2, "f": fw4}})
		for _, r := range []Request{{Name: "s", Count: 21}, {Name: "s2", Count: 20.5}, {Name: "f", Count: 21}} {
			if _, err := l.Limit(bg, r); !errors.Is(err, ErrInvalidCount) {
				t.Errorf("Limit(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			if _, err := l.Check(bg, r); !errors.Is(err, ErrInvalidCount) {
				t.Errorf("Check(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
		}
		wantValue(t, l, "s", "", 40)
		wantValue(t, l, "s2", "", 20)
		wantValue(t, l, "f", "", 40)
	})
	t.Run("count needing two shards succeeds fresh", func(t *testing.T) {
		for _, c := range []struct {
			cfg   Config
			count float64
		}{{sh4, 15}, {sh4, 20}, {sh4, 10.5}, {sh2, 11}, {sh2, 15}, {sh2, 20}, {fw4, 15}, {fw4, 20}} {
			for trial := 0; trial < 20; trial++ { // shard choice is random: try several times
				clk := newClock()
				l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": c.cfg}})
				if st, err := l.Check(bg, Request{Name: "s", Count: c.count}); err != nil || !st.OK {
					t.Fatalf("shards %d: Check %v on fresh = %+v, %v; want OK", c.cfg.Shards, c.count, st, err)
				}
				st := limit(t, l, Request{Name: "s", Count: c.count})
				if !st.OK || st.RetryAfter != 0 {
					t.Fatalf("shards %d capacity %v: count %v on fresh = %+v; want granted", c.cfg.Shards, c.cfg.Rate, c.count, st)
				}
				wantValue(t, l, "s", "", c.cfg.Rate-c.count)
				_ = l.Close()
			}
		}
	})
	t.Run("two shards split evenly", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": sh2}})
		limit(t, l, Request{Name: "s", Count: 15}) // 10+10 -> 2.5+2.5
		if st := limit(t, l, Request{Name: "s", Count: 5}); !st.OK {
			t.Errorf("count 5 with shards at 2.5+2.5 denied: %+v", st)
		}
		wantValue(t, l, "s", "", 0)
		st := limit(t, l, Request{Name: "s", Count: 1})
		// each half needs 0.5 token at 10/min per shard: 3s
		if st.OK || st.RetryAfter != 3*S {
			t.Errorf("count 1 on empty shards = %+v, want denied with RetryAfter 3s", st)
		}
		checkNeverEarly(t, clk, l, "s", "", t0, 1)
	})
	t.Run("sharded reservations", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": withMaxRes(sh2, 10), "s4": withMaxRes(sh4, 20)}})
		if _, err := l.Limit(bg, Request{Name: "s", Count: 30.5, Reserve: true}); !errors.Is(err, ErrInvalidCount) {
			t.Errorf("reserve 30.5 over 2 shards of (10 + 5 reserved): err = %v, want ErrInvalidCount", err)
		}
		if _, err := l.Limit(bg, Request{Name: "s4", Count: 31, Reserve: true}); !errors.Is(err, ErrInvalidCount) {
			t.Errorf("reserve 31 over two of 4 shards of (10 + 5 reserved): err = %v, want ErrInvalidCount", err)
		}
		st := limit(t, l, Request{Name: "s", Count: 30, Reserve: true})
		// each shard: 10 - 15 = -5 at 10/min: 30s
		if !st.OK || st.RetryAfter != 30*S {
			t.Errorf("reserve 30 over 2 shards = %+v, want granted with RetryAfter 30s", st)
		}
		wantValue(t, l, "s", "", -10)
		st = limit(t, l, Request{Name: "s4", Count: 30, Reserve: true})
		if !st.OK || st.RetryAfter != 30*S {
			t.Errorf("reserve 30 over two of 4 shards = %+v, want granted with RetryAfter 30s", st)
		}
		wantValue(t, l, "s4", "", 10)
	})
	t.Run("frozen clock never over-admits", func(t *testing.T) {
		for _, c := range []struct {
			name string
			cfg  Config
		}{{"tb4", sh4}, {"tb2", sh2}, {"fw4", fw4}, {"tb16", withCap(withShards(tb(40, M), 16), 80)}} {
			t.Run(c.name, func(t *testing.T) {
				capacity := c.cfg.Capacity
				if capacity == 0 {
					capacity = c.cfg.Rate
				}
				clk := newClock()
				l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": c.cfg}})
				rng := rand.New(rand.NewPCG(7, 7))
				counts := []float64{1, 2, 3, 5, 7, 0.5}
				granted := 0.0
				for i := 0; i < 500; i++ {
					n := counts[rng.IntN(len(counts))]
					st := limit(t, l, Request{Name: "s", Count: n})
					if st.OK {
						granted += n
					} else if st.RetryAfter <= 0 {
						t.Fatalf("denial with RetryAfter %v", st.RetryAfter)
					}
				}
				// then half tokens until no two shards together hold half a token
				for i := 0; i < 20000; i++ {
					if st := limit(t, l, Request{Name: "s", Count: 0.5}); st.OK {
						granted += 0.5
					}
				}
				if granted > capacity {
					t.Errorf("granted %v tokens with a frozen clock, capacity %v", granted, capacity)
				}
				v := value(t, l, "s", "")
				if v.Value != capacity-granted {
					t.Errorf("Value = %v, want capacity - granted = %v", v.Value, capacity-granted)
				}
				// if every pair of shards holds < 0.5 together, at most
				// 0.25 per shard is left
				if stranded := capacity - granted; stranded >= 0.25*float64(c.cfg.Shards) {
					t.Errorf("granted %v of %v: %v tokens left that half-token requests could take", granted, capacity, stranded)
				}
			})
		}
	})
	t.Run("reset deletes every shard", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": sh4}})
		for i := 0; i < 2000; i++ {
			limit(t, l, Request{Name: "s", Key: "k", Count: 1})
		}
		wantValue(t, l, "s", "k", 0)
		if err := l.Reset(bg, "s", "k"); err != nil {
			t.Fatal(err)
		}
		wantValue(t, l, "s", "k", 40)
		clk.Advance(S)
		wantValue(t, l, "s", "k", 40)
	})
	t.Run("refill is per shard", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": sh4}})
		for i := 0; i < 2000; i++ {
			limit(t, l, Request{Name: "s", Count: 1})
		}
		wantValue(t, l, "s", "", 0)
		clk.Advance(30 * S)
		wantValue(t, l, "s", "", 20)
		clk.Advance(H)
		wantValue(t, l, "s", "", 40)
	})
}

// twoShards draws a uniformly random shard and its pair mate, which lives on
// the same partition; the last shard of an odd count has no mate and is
// drawn with every other shard in turn.
func TestTwoShards(t *testing.T) {
	g := actor.NewGroup(16, actor.NopLog{}, func() int64 { return 0 })
	const draws = 20000
	for _, n := range []int{2, 3, 4, 5, 16, 17, 64} {
		first := make([]int, n)
		lonePartners := map[int]bool{}
		for k := 0; k < draws; k++ {
			i, j := twoShards(n)
			if i == j || i < 0 || j < 0 || i >= n || j >= n {
				t.Fatalf("n=%d: drew %d, %d", n, i, j)
			}
			first[i]++
			if i^1 >= n {
				lonePartners[j] = true
				continue
			}
			if j != i^1 {
				t.Fatalf("n=%d: drew %d with %d, not with its mate %d", n, i, j, i^1)
			}
			for h := range uint64(32) {
				if pi, pj := g.Route(h, uint32(i)), g.Route(h, uint32(j)); pi != pj {
					t.Fatalf("n=%d hash %d: mates %d and %d on partitions %d and %d", n, h, i, j, pi, pj)
				}
			}
		}
		for s, f := range first {
			if f < draws/n/2 {
				t.Fatalf("n=%d: shard %d drawn first only %d times of %d", n, s, f, draws)
			}
		}
		if n%2 == 1 && len(lonePartners) != n-1 {
			t.Fatalf("n=%d: the lone shard %d was drawn with %d shards, want all %d others", n, n-1, len(lonePartners), n-1)
		}
	}
}
