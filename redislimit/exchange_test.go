package redislimit

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
)

// TestFunctionReloaded: a server that lost the library (FUNCTION FLUSH:
// as after a failover to a replica that never had it) gets it loaded
// again, and the call that found it missing runs once: its tokens are
// taken once.
func TestFunctionReloaded(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk := newFakeClock(t0)
		l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"l": {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
		}})
		ctx := context.Background()
		keys := keysOnDistinctTags("l", "l")
		for round := range 3 {
			err := eachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error {
				return c.FunctionFlush(ctx).Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 2}); err != nil || !st.OK {
				t.Fatal(st, err)
			}
			if v, _ := l.Value(ctx, "l", "k"); v.Value != float64(10-2*(round+1)) {
				t.Fatalf("round %d: value %v", round, v.Value)
			}
			eachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error { return c.FunctionFlush(ctx).Err() })
			st, err := l.LimitAll(ctx, ratelimit.Request{Name: "l", Key: keys[0]}, ratelimit.Request{Name: "l", Key: keys[1]})
			if err != nil || !st.OK {
				t.Fatal(st, err)
			}
		}
		for _, k := range keys {
			if v, _ := l.Value(ctx, "l", k); v.Value != 7 {
				t.Fatalf("%s: %v", k, v.Value)
			}
		}
	})
}
