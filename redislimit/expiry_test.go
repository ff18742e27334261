package redislimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// keyOf returns the Redis key of the unsharded bucket (name, key).
func keyOf(prefix, name, key string) string {
	ks := newKeyspace(prefix)
	sl := &storeLimit{name: name, lim: bucket.Limit{Period: 1}}
	it := sl.item(key, 0)
	return ks.bucket(&it)
}

// clientOf returns the client of the server that holds key.
func clientOf(t *testing.T, client redis.UniversalClient, key string) redis.Cmdable {
	if cc, ok := client.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return client
}

// TestExpiryOnServerClock: on the servers' clock a bucket's key expires
// once it would be full again, not before, for both kinds; then no
// bucket key is left.
func TestExpiryOnServerClock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		prefix := testPrefix(t)
		l := openPrefix(t, client, prefix, ratelimit.Options{Limits: map[string]ratelimit.Config{
			// Full 500ms after emptying: the key is read well within that.
			"tb": {Kind: ratelimit.TokenBucket, Rate: 20, Period: S, Capacity: 10},
			"fw": {Kind: ratelimit.FixedWindow, Rate: 5, Period: 500 * time.Millisecond},
		}})
		ctx := context.Background()
		for _, name := range []string{"tb", "fw"} {
			req := ratelimit.Request{Name: name, Key: "k", Count: map[string]float64{"tb": 10, "fw": 5}[name]}
			st, err := l.Limit(ctx, req)
			// A window that ends before its key can be read has expired
			// it already: take again in the next window.
			for tries := 0; err == nil && st.OK && st.ResetAfter < 250*time.Millisecond && tries < 5; tries++ {
				time.Sleep(st.ResetAfter + time.Millisecond)
				st, err = l.Limit(ctx, req)
			}
			if err != nil || !st.OK {
				t.Fatal(st, err)
			}
			v, err := l.Value(ctx, name, "k")
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := l.Config(name)
			lim := bucket.Limit{Kind: bucket.Kind(cfg.Kind), Rate: cfg.Rate, Period: int64(cfg.Period), Capacity: cfg.Capacity}
			full := v.TS.UnixNano() + lim.UntilFull(bucket.State{Value: v.Value, TS: v.TS.UnixNano()}, v.TS.UnixNano())
			key := keyOf(prefix, name, "k")
			c := clientOf(t, client, key)
			at, err := c.PExpireTime(ctx, key).Result()
			if err != nil || at <= 0 {
				t.Fatalf("%s: PEXPIRETIME %v, %v", name, at, err)
			}
			if at.Nanoseconds() < full {
				t.Fatalf("%s: the key expires at %v, before the bucket is full at %v", name, time.Unix(0, at.Nanoseconds()), time.Unix(0, full))
			}
			if at.Nanoseconds() > full+int64(5*time.Millisecond) {
				t.Fatalf("%s: the key outlives its bucket's refill by %v", name, time.Duration(at.Nanoseconds()-full))
			}
			waitGone(t, c, key)
			if v, _ := l.Value(ctx, name, "k"); v.Value != cfg.Capacity {
				t.Fatalf("%s: after expiry %v", name, v.Value)
			}
		}
		if n := countKeys(t, client, prefix+"*}[0-9]*"); n != 0 {
			t.Fatalf("%d bucket keys left", n)
		}
	})
}

// waitGone waits (on the server's clock, briefly) for key to expire.
func waitGone(t *testing.T, c redis.Cmdable, key string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for c.Exists(context.Background(), key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not expire", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestExpiryOnLimiterClock: with Options.Now the key's expiry follows
// that clock: a frozen clock keeps it (however long the server's clock
// runs), and once the clock passes the bucket's refill the next call on
// its tag deletes it.
func TestExpiryOnLimiterClock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		prefix := testPrefix(t)
		clk := newFakeClock(t0)
		l := openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"tb": {Kind: ratelimit.TokenBucket, Rate: 1000, Period: S, Capacity: 10},
		}})
		ctx := context.Background()
		if st, err := l.Limit(ctx, ratelimit.Request{Name: "tb", Key: "k", Count: 10}); err != nil || !st.OK {
			t.Fatal(st, err)
		}
		key := keyOf(prefix, "tb", "k")
		c := clientOf(t, client, key)
		time.Sleep(30 * time.Millisecond) // three times the refill, on the server's clock
		if ttl := c.PTTL(ctx, key).Val(); ttl != -1 {
			t.Fatalf("PTTL %v: the key expires on the server's clock", ttl)
		}
		l.Value(ctx, "tb", "k")
		if c.Exists(ctx, key).Val() != 1 {
			t.Fatal("the key is gone while the limiter's clock is frozen")
		}
		clk.Advance(9 * time.Millisecond) // not yet full
		l.Value(ctx, "tb", otherKeyOnTag("tb", "k"))
		if c.Exists(ctx, key).Val() != 1 {
			t.Fatal("the key is gone before its bucket is full")
		}
		clk.Advance(2 * time.Millisecond)
		l.Value(ctx, "tb", otherKeyOnTag("tb", "k"))
		if c.Exists(ctx, key).Val() != 0 {
			t.Fatal("the key outlived its bucket's refill")
		}
	})
}

// otherKeyOnTag returns a key other than key whose bucket of name shares
// key's tag.
func otherKeyOnTag(name, key string) string {
	tag := route(bucket.Hash(name, key), 0)
	for i := 0; ; i++ {
		k := fmt.Sprint("other", i)
		if route(bucket.Hash(name, k), 0) == tag {
			return k
		}
	}
}

// A name used with inline configs while no limit names it, then named by
// SetLimits with a slower refill (for the first time, or again as it was
// before a removal): its keys, written under the inline config's expiry,
// are kept as the named limit reads them, as in memory, on the limiter's
// clock and on the servers'.
func TestSetLimitsNamesAnInlineLimit(t *testing.T) {
	inline := ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: S}
	named := map[string]ratelimit.Config{"x": {Kind: ratelimit.TokenBucket, Rate: 10, Period: H}}
	for _, c := range []struct {
		name   string
		limits map[string]ratelimit.Config // at Open; SetLimits removes them before the inline use
	}{
		{"never named", nil},
		{"named, removed, named again as it was", named},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
				ctx := context.Background()
				clk := newFakeClock(t0)
				mem, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: c.limits})
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red := open(t, client, ratelimit.Options{Now: clk.Now, Limits: c.limits})
				prefix := testPrefix(t) + "s" // the servers' clock
				srv := openPrefix(t, client, prefix, ratelimit.Options{Limits: c.limits})
				ls := map[string]*ratelimit.Limiter{"memory": mem, "redis": red, "servers' clock": srv}
				for name, l := range ls {
					if err := l.SetLimits(nil); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if st, err := l.Limit(ctx, ratelimit.Request{Name: "x", Key: "k", Count: 10, Config: &inline}); err != nil || !st.OK {
						t.Fatalf("%s: %+v %v", name, st, err)
					}
				}
				clk.Advance(S / 2)
				for name, l := range ls {
					if err := l.SetLimits(named); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				clk.Advance(2 * S)                           // past when the inline config would have refilled it
				red.Value(ctx, "x", otherKeyOnTag("x", "k")) // a call on the tag sweeps what is due
				for _, name := range []string{"memory", "redis"} {
					if st, err := ls[name].Limit(ctx, ratelimit.Request{Name: "x", Key: "k", Count: 10}); err != nil || st.OK {
						t.Errorf("%s: take 10 under the named limit: %+v %v, want a denial (about 5 tokens refilled, at 10 an hour)", name, st, err)
					}
				}
				// the inline config fills the key in a second, the named limit in an hour
				key := keyOf(prefix, "x", "k")
				if ttl := clientOf(t, client, key).PTTL(ctx, key).Val(); ttl < 30*time.Minute {
					t.Errorf("servers' clock: the key expires in %v, before the named limit fills it (an hour)", ttl)
				}
			})
		})
	}
}

// TestSetLimitsMovesExpiries: after SetLimits raises a capacity (so the
// buckets take longer to fill), a key written under the old limit keeps
// its state past the old limit's refill, on the limiter's clock and on
// the servers'; a key that is full sooner keeps its later expiry.
func TestSetLimitsMovesExpiries(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		ctx := context.Background()
		old := ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: M, Capacity: 10}
		raised := ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: M, Capacity: 100}
		// the limiter's clock: the next call on the tag sweeps what is due
		clk := newFakeClock(t0)
		l := openPrefix(t, client, testPrefix(t), ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{"l": old}})
		if st, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 10}); err != nil || !st.OK {
			t.Fatal(st, err)
		}
		if err := l.SetLimits(map[string]ratelimit.Config{"l": raised}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(61 * S) // past the old limit's refill (60 s), far from the new one's (600 s)
		l.Value(ctx, "l", otherKeyOnTag("l", "k"))
		if v, err := l.Value(ctx, "l", "k"); err != nil || v.Value > 11 {
			t.Fatalf("limiter's clock: %v tokens, %v; want about 10.2 (the key kept, not read full)", v.Value, err)
		}
		// the servers' clock: 10 ms to fill under the old limit, 100 ms under the new
		prefix := testPrefix(t) + "s"
		fast := ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1000, Period: S, Capacity: 10}
		l2 := openPrefix(t, client, prefix, ratelimit.Options{Limits: map[string]ratelimit.Config{"l": fast}})
		if st, err := l2.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 10}); err != nil || !st.OK {
			t.Fatal(st, err)
		}
		fast.Capacity = 100
		if err := l2.SetLimits(map[string]ratelimit.Config{"l": fast}); err != nil {
			t.Fatal(err)
		}
		key := keyOf(prefix, "l", "k")
		if ttl := clientOf(t, client, key).PTTL(ctx, key).Val(); ttl < 50*time.Millisecond {
			t.Fatalf("the key expires in %v, before the new limit fills it (100 ms)", ttl)
		}
		// A limit removed, then added back with other buckets: 10 ms to
		// fill under the config it had, 1 s under the one it comes back with.
		prefix = testPrefix(t) + "r"
		fast.Capacity = 10
		l3 := openPrefix(t, client, prefix, ratelimit.Options{Limits: map[string]ratelimit.Config{"l": fast, "w": fast}})
		if st, err := l3.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 10}); err != nil || !st.OK {
			t.Fatal(st, err)
		}
		if err := l3.SetLimits(map[string]ratelimit.Config{"w": fast}); err != nil {
			t.Fatal(err)
		}
		back := fast
		back.Capacity = 1000
		if err := l3.SetLimits(map[string]ratelimit.Config{"l": back, "w": fast}); err != nil {
			t.Fatal(err)
		}
		key = keyOf(prefix, "l", "k")
		if ttl := clientOf(t, client, key).PTTL(ctx, key).Val(); ttl < 500*time.Millisecond {
			t.Fatalf("the key of a limit added back expires in %v, before its new config fills it (1 s)", ttl)
		}
	})
}
