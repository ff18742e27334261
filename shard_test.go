package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
				clk := newFakeClock()
				l, err := Open(Options{Now: clk.Now, Partitions: parts, Limits: map[string]Config{
					"s":   {Kind: TokenBucket, Rate: 400, Period: time.Hour, Shards: shards},
					"r":   {Kind: FixedWindow, Rate: 400, Period: time.Hour, Shards: shards, MaxReserved: 40},
					"key": {Kind: TokenBucket, Rate: 1e6, Period: time.Hour},
				}})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
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
				if v := mustValue(t, l, "s", ""); v != 400-float64(grantedS.Load()) || v < 0 {
					t.Fatalf("s: value %v, granted %d of 400", v, grantedS.Load())
				}
				if v := mustValue(t, l, "r", ""); v != 400-float64(grantedR.Load()) || v < -40 {
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
