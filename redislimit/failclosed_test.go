package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
)

var failLimits = map[string]ratelimit.Config{
	"a": {Kind: ratelimit.TokenBucket, Rate: 100, Period: S},
	"b": {Kind: ratelimit.FixedWindow, Rate: 100, Period: S},
}

// everyCall makes one call of every kind and returns their errors, with
// whether any of them granted.
func everyCall(l *ratelimit.Limiter) (errs []error, granted bool) {
	ctx := context.Background()
	keys := keysOnDistinctTags("a", "b")
	st, err := l.Limit(ctx, ratelimit.Request{Name: "a", Key: "k"})
	errs, granted = append(errs, err), st.OK
	st, err = l.LimitAll(ctx, ratelimit.Request{Name: "a", Key: keys[0]}, ratelimit.Request{Name: "b", Key: keys[1]})
	errs, granted = append(errs, err), granted || st.OK
	for _, d := range l.LimitMany(ctx, []ratelimit.Request{{Name: "a", Key: "x"}, {Name: "b", Key: "y"}}, nil) {
		errs, granted = append(errs, d.Err), granted || d.OK
	}
	_, err = l.Value(ctx, "a", "k")
	errs = append(errs, err)
	errs = append(errs, l.Credit(ctx, "a", "k", 1), l.Reset(ctx, "a", "k"))
	return errs, granted
}

// TestStoppedServer: with the server gone (killed, or stopped and not
// answering), every call fails with ErrUnavailable and grants nothing.
func TestStoppedServer(t *testing.T) {
	for _, how := range []string{"killed", "hung"} {
		t.Run(how, func(t *testing.T) {
			srv := ownServer(t)
			client := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond,
				ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
			defer client.Close()
			l := open(t, client, ratelimit.Options{Limits: failLimits})
			if errs, _ := everyCall(l); errors.Join(errs...) != nil {
				t.Fatal(errs)
			}
			if how == "killed" {
				srv.Kill()
			} else {
				if err := srv.Pause(); err != nil {
					t.Skip(err)
				}
				defer srv.Resume()
			}
			errs, granted := everyCall(l)
			if granted {
				t.Fatal("granted without a server")
			}
			for i, err := range errs {
				if !errors.Is(err, ratelimit.ErrUnavailable) {
					t.Fatalf("call %d: %v, want ErrUnavailable", i, err)
				}
			}
			if s := l.Stats(); s.Unavailable == 0 || s.Grants != 4 {
				t.Fatalf("%+v", s)
			}
		})
	}
}

// TestOpenChecksPersistence: Open refuses a master that may lose or
// evict buckets, naming the setting and the Option that accepts it.
func TestOpenChecksPersistence(t *testing.T) {
	cases := []struct {
		args   []string
		option string
		accept Option
	}{
		{[]string{"--appendfsync", "everysec"}, "AllowNotDurable", AllowNotDurable()},
		{[]string{"--appendonly", "no"}, "AllowNotDurable", AllowNotDurable()},
		{[]string{"--no-appendfsync-on-rewrite", "yes"}, "AllowNotDurable", AllowNotDurable()},
		{[]string{"--maxmemory-policy", "allkeys-lru"}, "AllowEviction", AllowEviction()},
		{[]string{"--rename-command", "CONFIG", ""}, "SkipConfigCheck", SkipConfigCheck()},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			srv := ownServer(t, tc.args...)
			client := srv.client()
			defer client.Close()
			_, err := Open(client, ratelimit.Options{Limits: failLimits})
			if !errors.Is(err, ErrServerConfig) || !strings.Contains(err.Error(), tc.option) {
				t.Fatalf("Open: %v", err)
			}
			l := open(t, client, ratelimit.Options{Limits: failLimits}, tc.accept)
			if errs, granted := everyCall(l); errors.Join(errs...) != nil || !granted {
				t.Fatal(errs)
			}
		})
	}
}

// TestOpenUnreachable: a server that cannot be reached is ErrUnavailable
// at Open.
func TestOpenUnreachable(t *testing.T) {
	redistest.Need(t)
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: t.TempDir() + "/none.sock", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	if _, err := Open(client, ratelimit.Options{}); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := Open(client, ratelimit.Options{}, SkipConfigCheck()); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := Open(client, ratelimit.Options{Path: "x"}); !errors.Is(err, ratelimit.ErrInvalidOptions) {
		t.Fatal(err)
	}
	if _, err := Open(client, ratelimit.Options{MaxBuckets: 10}); !errors.Is(err, ratelimit.ErrInvalidOptions) {
		t.Fatal(err)
	}
	for _, c := range []redis.UniversalClient{nil, (*redis.Client)(nil), (*redis.ClusterClient)(nil), (*redis.Ring)(nil)} {
		if _, err := Open(c, ratelimit.Options{}); !errors.Is(err, ratelimit.ErrInvalidOptions) {
			t.Errorf("Open(%T(nil)): %v, want ErrInvalidOptions", c, err)
		}
	}
	// A cluster none of whose seeds answers, with or without the check.
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer cluster.Close()
	for _, o := range [][]Option{nil, {SkipConfigCheck()}} {
		if _, err := Open(cluster, ratelimit.Options{}, o...); !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Errorf("cluster, options %d: %v, want ErrUnavailable", len(o), err)
		}
	}
	// A Ring moves a down shard's keys to another: refused.
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if _, err := Open(ring, ratelimit.Options{}, SkipConfigCheck()); !errors.Is(err, ratelimit.ErrInvalidOptions) {
		t.Errorf("Ring: %v, want ErrInvalidOptions", err)
	}
}

// TestOutOfMemory: a server at maxmemory with noeviction refuses the
// function before it runs: errors, no grant, and no bucket half written.
func TestOutOfMemory(t *testing.T) {
	srv := ownServer(t)
	client := srv.client()
	defer client.Close()
	ctx := context.Background()
	l := open(t, client, ratelimit.Options{Limits: failLimits})
	if errs, _ := everyCall(l); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	before, _ := l.Value(ctx, "a", "k")
	junk := strings.Repeat("x", 64<<10)
	for i := range 64 {
		client.Set(ctx, fmt.Sprint("junk", i), junk, 0)
	}
	// Memory in use is now over maxmemory: every call that may write is
	// refused before it runs.
	if err := client.ConfigSet(ctx, "maxmemory", fmt.Sprint(usedMemory(t, client)/2)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Set(ctx, "one more", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("the server is not out of memory: %v", err)
	}
	errs, granted := everyCall(l)
	if granted {
		t.Fatal("granted while the server is out of memory")
	}
	for i, err := range errs {
		if !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	client.ConfigSet(ctx, "maxmemory", "0")
	if after, _ := l.Value(ctx, "a", "k"); after.Value != before.Value {
		t.Fatalf("the bucket changed from %v to %v", before.Value, after.Value)
	}
}

// TestForeignKey: a key under the store's prefix that is not a bucket (a
// string of another size, or a value of another type, which MGET reads
// as absent) fails the call closed and is left as it is.
func TestForeignKey(t *testing.T) {
	client := topologies[0].client(t)
	prefix := testPrefix(t)
	l := openPrefix(t, client, prefix, ratelimit.Options{Limits: failLimits})
	ctx := context.Background()
	for _, c := range []struct {
		typ   string
		plant func(key string) error
	}{
		{"string", func(k string) error { return client.Set(ctx, k, "not a bucket", 0).Err() }},
		{"hash", func(k string) error { return client.HSet(ctx, k, "f", "v").Err() }},
		{"list", func(k string) error { return client.RPush(ctx, k, "v").Err() }},
		{"set", func(k string) error { return client.SAdd(ctx, k, "v").Err() }},
		{"zset", func(k string) error { return client.ZAdd(ctx, k, redis.Z{Score: 1, Member: "v"}).Err() }},
	} {
		key := c.typ
		if err := c.plant(keyOf(prefix, "a", key)); err != nil {
			t.Fatal(err)
		}
		if st, err := l.Limit(ctx, ratelimit.Request{Name: "a", Key: key}); !errors.Is(err, ratelimit.ErrUnavailable) || st.OK {
			t.Errorf("%s at a bucket's key: %+v, %v; want ErrUnavailable", c.typ, st, err)
		}
		if got := client.Type(ctx, keyOf(prefix, "a", key)).Val(); got != c.typ {
			t.Errorf("%s at a bucket's key: now a %s", c.typ, got)
		}
		// Batched with 256 other requests (one function call on a single
		// server): it fails with the requests of its call on its slot tag
		// (one part of the batch), and no other.
		tag := func(k string) string { return k[strings.Index(k, "{") : strings.Index(k, "}")+1] }
		bad := tag(keyOf(prefix, "a", key))
		rs := []ratelimit.Request{{Name: "a", Key: key}}
		for i := range 256 {
			rs = append(rs, ratelimit.Request{Name: "a", Key: fmt.Sprint("other", i)})
		}
		for i, d := range l.LimitMany(ctx, rs, nil) {
			if onBad := tag(keyOf(prefix, "a", rs[i].Key)) == bad; onBad != errors.Is(d.Err, ratelimit.ErrUnavailable) || !onBad && !d.OK {
				t.Errorf("%s at a bucket's key, LimitMany request %d: %+v", c.typ, i, d)
			}
		}
	}
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	var mem int64
	for _, line := range strings.Split(c.Info(context.Background(), "memory").Val(), "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			fmt.Sscan(v, &mem)
		}
	}
	if mem == 0 {
		t.Fatal("no used_memory")
	}
	return mem
}
