package redislimit

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
)

func runChild(role string) int { return 2 }

func TestSmoke(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk := newFakeClock(t0)
		l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"tb": {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
		}})
		ctx := context.Background()
		st, err := l.Limit(ctx, ratelimit.Request{Name: "tb", Key: "u", Count: 5})
		t.Log(st, err)
		clk.Add(6 * S)
		st, err = l.Limit(ctx, ratelimit.Request{Name: "tb", Key: "u", Count: 6})
		t.Log(st, err)
		st, err = l.Limit(ctx, ratelimit.Request{Name: "tb", Key: "u", Count: 10})
		t.Log(st, err)
		v, err := l.Value(ctx, "tb", "u")
		t.Log(v, err)
	})
}
