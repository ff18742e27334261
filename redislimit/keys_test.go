package redislimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// crc16 is Redis Cluster's key hash (CRC16-CCITT, XMODEM).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// TestTagsSpreadEvenly pins the tags: each is the first base-36 numeral
// whose slot is the middle of its 256th of the slot space.
func TestTagsSpreadEvenly(t *testing.T) {
	if crc16("123456789") != 0x31C3 {
		t.Fatal("crc16 is not Redis Cluster's")
	}
	step := 16384 / Slots
	var want [Slots]string
	for i, found := 0, 0; found < Slots; i++ {
		s := strconv.FormatInt(int64(i), 36)
		if slot := int(crc16(s)) % 16384; slot%step == step/2 && want[slot/step] == "" {
			want[slot/step] = s
			found++
		}
	}
	if want != tags {
		t.Fatalf("tags differ from the rule:\n%q\n%q", want, tags)
	}
	// Any even split of the slots over up to Slots/2 masters gives each
	// master as many tags as any other, give or take one.
	for masters := 1; masters <= Slots/2; masters++ {
		lo, hi := Slots, 0
		for m := range masters {
			first, last := 16384*m/masters, 16384*(m+1)/masters
			n := 0
			for _, tag := range tags {
				if s := int(crc16(tag)) % 16384; s >= first && s < last {
					n++
				}
			}
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > 1 {
			t.Errorf("%d masters: from %d to %d tags each", masters, lo, hi)
		}
	}
}

func TestRoutePairsShards(t *testing.T) {
	for h := uint64(0); h < 1000; h += 7 {
		for k := uint32(0); k < 40; k++ {
			if route(h, 2*k) != route(h, 2*k+1) {
				t.Fatalf("hash %d: shards %d and %d on different tags", h, 2*k, 2*k+1)
			}
		}
		if route(h, 0) == route(h, 2) {
			t.Fatalf("hash %d: pairs 0 and 1 on one tag", h)
		}
	}
}

// TestBucketKey: the key's hash tag is the tag whatever bytes the name and
// key hold, and different buckets have different keys.
func TestBucketKey(t *testing.T) {
	ks := newKeyspace("rl:")
	seen := map[string]actor.BucketID{}
	for _, name := range []string{"", "a", "a:1", "{x}", "1:a"} {
		for _, key := range []string{"", "b", "1:ab", "}{", "\x00\xff", "a:1"} {
			for shard := uint32(0); shard < 3; shard++ {
				it := actor.Item{ID: actor.BucketID{Name: name, Key: key, Shard: shard}, Part: 5}
				k := ks.bucket(&it)
				if !strings.HasPrefix(k, "rl:{"+tags[5]+"}") {
					t.Fatalf("%q", k)
				}
				if other, ok := seen[k]; ok {
					t.Fatalf("%+v and %+v share key %q", other, it.ID, k)
				}
				seen[k] = it.ID
			}
		}
	}
	if k := ks.bucket(&actor.Item{ID: actor.BucketID{Name: "user", Key: "42", Shard: 3}, Part: 0}); k != "rl:{"+tags[0]+"}3:4:user42" {
		t.Fatalf("layout changed: %q", k)
	}
}

func TestKeyPrefixWithBraces(t *testing.T) {
	for _, p := range []string{"a{", "}", "x{y}z"} {
		cfg := defaultConfig()
		KeyPrefix(p)(&cfg)
		if err := cfg.validate(); !errors.Is(err, ratelimit.ErrInvalidOptions) {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
}

// TestAnyKeyBytes: names and keys of any bytes, up to MaxKeyLen, are
// buckets of their own on Redis as in memory.
func TestAnyKeyBytes(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		l := open(t, client, ratelimit.Options{Now: newFakeClock(t0).Now})
		ctx := context.Background()
		big := strings.Repeat("\xff{}\x00", ratelimit.MaxKeyLen/4)
		cfg := &ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 3, Period: time.Hour}
		type pair struct{ name, key string }
		var pairs []pair
		for _, name := range []string{"n", "n:1", "{n}"} {
			for _, key := range []string{"", "\x00", "}{", "a\r\nb", "\xc3\x28", "1:n"} {
				pairs = append(pairs, pair{name, key})
			}
		}
		pairs = append(pairs, pair{big, "k"}, pair{"n", big}, pair{big, big})
		for _, p := range pairs {
			if st, err := l.Limit(ctx, ratelimit.Request{Name: p.name, Key: p.key, Config: cfg, Count: 2}); err != nil || !st.OK {
				t.Fatalf("%.20q/%.20q: %+v %v", p.name, p.key, st, err)
			}
		}
		for _, p := range pairs {
			if v, err := l.Value(ctx, p.name, p.key); err != nil || v.Value != 1 {
				t.Fatalf("%.20q/%.20q: %v %v", p.name, p.key, v.Value, err)
			}
		}
	})
}
