package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// At MaxBuckets, a request that needs a new bucket is refused with
// ErrTooManyKeys and takes nothing; requests on the buckets held, and
// checks and credits, go on; buckets that refill and are dropped make room again.
func TestMaxBucketsRefusesNewKeysOnly(t *testing.T) {
	clk := newClock()
	l, err := Open(Options{Now: clk.Now, Partitions: 4, MaxBuckets: 64,
		Limits: map[string]Config{"api": tokenBucket(10, 10), "global": tokenBucket(1000, 1000)}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	held := 0
	var refused string
	for i := 0; i < 1000 && refused == ""; i++ {
		key := "k" + strconv.Itoa(i)
		st, err := l.Limit(ctx, Request{Name: "api", Key: key})
		switch {
		case errors.Is(err, ErrTooManyKeys):
			refused = key
		case err != nil || !st.OK:
			t.Fatalf("Limit(%s) = %+v, %v", key, st, err)
		default:
			held++
		}
	}
	if refused == "" || held > 64 || held < 16 {
		t.Fatalf("%d buckets held before a refusal (%q), want between 16 and 64", held, refused)
	}
	if v := value(t, l, "api", refused).Value; v != 10 {
		t.Fatalf("a refused request took something: value %v", v)
	}
	// Held keys go on; a check of a new key is answered.
	grant(t, l, Request{Name: "api", Key: "k0", Count: 1})
	if st, err := l.Check(ctx, Request{Name: "api", Key: refused}); err != nil || !st.OK {
		t.Fatalf("Check of a new key at the bound = %+v, %v", st, err)
	}
	// So is a credit of one: an absent bucket is full, and stays full.
	if err := l.Credit(ctx, "api", refused, 3); err != nil {
		t.Fatalf("Credit of a new key at the bound = %v", err)
	}
	// All or nothing: a LimitAll that needs a new bucket takes nothing.
	if _, err := l.LimitAll(ctx, Request{Name: "api", Key: "k0"}, Request{Name: "api", Key: refused}); !errors.Is(err, ErrTooManyKeys) {
		t.Fatalf("LimitAll with a new key at the bound = %v, want ErrTooManyKeys", err)
	}
	if v := value(t, l, "api", "k0").Value; v != 8 {
		t.Fatalf("k0 = %v after a refused LimitAll, want 8", v)
	}
	if n := l.Stats().TooManyKeys; n < 2 {
		t.Fatalf("Stats.TooManyKeys = %d, want the refusals counted", n)
	}
	// Refill, drop the full buckets, and there is room again.
	clk.Advance(time.Hour)
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	grant(t, l, Request{Name: "api", Key: refused, Count: 1})
}

// Once keys have filled every partition, the limiter holds exactly
// MaxBuckets, whether or not the partitions divide it evenly, and never
// more.
func TestMaxBucketsIsExact(t *testing.T) {
	for _, c := range []struct{ partitions, bound int }{
		{4, 64}, {3, 10}, {8, 10_001}, {7, 100}, {0, 5}, {0, 1},
	} {
		t.Run(fmt.Sprintf("%d/%d", c.bound, c.partitions), func(t *testing.T) {
			clk := newClock()
			l, err := Open(Options{Now: clk.Now, Partitions: c.partitions, MaxBuckets: c.bound,
				Limits: map[string]Config{"api": tokenBucket(10, 10)}})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			rs := make([]Request, 4*c.bound+1000)
			for i := range rs {
				rs[i] = Request{Name: "api", Key: "k" + strconv.Itoa(i), Count: 1}
			}
			granted := 0
			for _, d := range l.LimitMany(context.Background(), rs, nil) {
				switch {
				case d.Err == nil && d.OK:
					granted++
				case !errors.Is(d.Err, ErrTooManyKeys):
					t.Fatalf("decision %+v, want granted or ErrTooManyKeys", d)
				}
			}
			if granted != c.bound {
				t.Fatalf("%d keys granted, want exactly the bound %d", granted, c.bound)
			}
			if n := l.Stats().LiveBuckets; n != c.bound {
				t.Fatalf("%d live buckets, want exactly the bound %d", n, c.bound)
			}
		})
	}
}

// A call that needs several new buckets at once (LimitAll, the two
// shards of a sharded limit) is refused when they would not all fit, so
// it cannot take the limiter past the bound either.
func TestMaxBucketsHoldsForCallsOfSeveralBuckets(t *testing.T) {
	clk := newClock()
	sharded := tokenBucket(10, 10)
	sharded.Shards = 8
	l, err := Open(Options{Now: clk.Now, Partitions: 1, MaxBuckets: 3, Limits: map[string]Config{
		"a": tokenBucket(10, 10), "b": tokenBucket(10, 10), "c": tokenBucket(10, 10), "s": sharded}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	grant(t, l, Request{Name: "a", Key: "x", Count: 1})
	grant(t, l, Request{Name: "b", Key: "x", Count: 1})
	// One bucket of room: three new buckets are refused, with nothing taken.
	three := []Request{{Name: "a", Key: "y", Count: 1}, {Name: "b", Key: "y", Count: 1}, {Name: "c", Key: "y", Count: 1}}
	if _, err := l.LimitAll(ctx, three...); !errors.Is(err, ErrTooManyKeys) {
		t.Fatalf("LimitAll of three new buckets with room for one: %v, want ErrTooManyKeys", err)
	}
	if n := l.Stats().LiveBuckets; n != 2 {
		t.Fatalf("%d live buckets after a refused LimitAll, want 2", n)
	}
	// A sharded request takes from two shards, both new here.
	if _, err := l.Limit(ctx, Request{Name: "s", Key: "x", Count: 1}); !errors.Is(err, ErrTooManyKeys) {
		t.Fatalf("a sharded request needing two new buckets with room for one: %v, want ErrTooManyKeys", err)
	}
	// One new bucket and one held fit.
	if st, err := l.LimitAll(ctx, Request{Name: "a", Key: "x", Count: 1}, Request{Name: "c", Key: "y", Count: 1}); err != nil || !st.OK {
		t.Fatalf("LimitAll of one held and one new bucket with room for one: %+v, %v", st, err)
	}
	if n := l.Stats().LiveBuckets; n != 3 {
		t.Fatalf("%d live buckets, want the bound 3", n)
	}
}

// A bucket that a LimitAll names twice, checked first and taken after,
// is a new bucket to make room for, whichever of its repeats takes: in
// memory and on a file, on the path that decides under the partitions'
// mutexes and on the two-phase one (two partitions).
func TestMaxBucketsCountsEveryRepeatOfABucket(t *testing.T) {
	for _, durable := range []bool{false, true} {
		for _, parts := range []int{1, 2} {
			t.Run(fmt.Sprintf("durable=%v/partitions=%d", durable, parts), func(t *testing.T) {
				opts := Options{Now: newClock().Now, Partitions: parts, MaxBuckets: parts,
					Limits: map[string]Config{"x": tokenBucket(10, 10)}}
				if durable {
					opts.Path = filepath.Join(t.TempDir(), "rl.db")
				}
				l := open(t, opts)
				ctx := context.Background()
				// Fill every partition's share.
				var held []Request
				for i := 0; len(held) < parts; i++ {
					r := Request{Name: "x", Key: "fill" + strconv.Itoa(i), Count: 1}
					if _, err := l.Limit(ctx, r); err == nil {
						held = append(held, Request{Name: "x", Key: r.Key, Count: 1, CheckOnly: true})
					} else if !errors.Is(err, ErrTooManyKeys) {
						t.Fatal(err)
					}
				}
				for i := range 100 {
					k := "k" + strconv.Itoa(i)
					check, take := Request{Name: "x", Key: k, Count: 1, CheckOnly: true}, Request{Name: "x", Key: k, Count: 1}
					for _, rs := range [][]Request{{check, take}, {take, check}, {check, check, take}, append([]Request{check, take}, held...)} {
						if st, err := l.LimitAll(ctx, rs...); !errors.Is(err, ErrTooManyKeys) {
							t.Fatalf("LimitAll %v with no room: %+v, %v, want ErrTooManyKeys", rs, st, err)
						}
					}
				}
				if n := l.Stats().LiveBuckets; n != parts {
					t.Fatalf("%d live buckets, want the bound %d", n, parts)
				}
				// Checks alone store nothing, so they need no room.
				k := Request{Name: "x", Key: "new", Count: 1, CheckOnly: true}
				if st, err := l.LimitAll(ctx, k, k); err != nil || !st.OK {
					t.Fatalf("LimitAll of two checks of a new bucket: %+v, %v", st, err)
				}
			})
		}
	}
}

// More partitions than MaxBuckets would leave some with no share: an
// explicit count is refused, and the default count is capped.
func TestMaxBucketsBelowPartitions(t *testing.T) {
	_, err := Open(Options{Partitions: 16, MaxBuckets: 5, Limits: map[string]Config{"api": tokenBucket(10, 10)}})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Partitions 16, MaxBuckets 5: %v, want ErrInvalidOptions", err)
	}
	l, err := Open(Options{MaxBuckets: 1, Limits: map[string]Config{"api": tokenBucket(10, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := l.Stats().Partitions; n != 1 {
		t.Fatalf("%d partitions by default under MaxBuckets 1, want 1", n)
	}
}

// A flood of unique keys against a durable limiter: memory and the file
// stay within the bound's budget, and the keys it held before the flood
// are decided as if there had been none. RATELIMIT_FLOOD_KEYS sets the
// flood's size (the measurement in the README uses 10,000,000).
func TestMaxBucketsUnderAKeyFlood(t *testing.T) {
	flood := 200_000
	if n, err := strconv.Atoi(os.Getenv("RATELIMIT_FLOOD_KEYS")); err == nil {
		flood = n
	} else if testing.Short() {
		flood = 20_000
	}
	const bound = 10_000
	clk := newClock()
	path := filepath.Join(t.TempDir(), "rl.db")
	l, err := Open(Options{Path: path, Now: clk.Now, MaxBuckets: bound, LogPreallocate: -1,
		Limits: map[string]Config{"api": tokenBucket(60, 100)}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	users := make([]Request, 100)
	for i := range users {
		users[i] = Request{Name: "api", Key: fmt.Sprintf("user-%d", i), Count: 1}
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rs := make([]Request, 1000)
	var out []Decision
	refused, rounds := 0, 0
	for i := 0; i < flood; i += len(rs) {
		for j := range rs {
			rs[j] = Request{Name: "api", Key: "flood-" + strconv.Itoa(i+j)}
		}
		out = l.LimitMany(ctx, rs, out)
		for _, d := range out {
			if errors.Is(d.Err, ErrTooManyKeys) {
				refused++
			} else if d.Err != nil {
				t.Fatal(d.Err)
			}
		}
		// The users are decided exactly as without a flood: one token
		// each per round, from buckets of 100.
		if rounds < 100 {
			for _, d := range l.LimitMany(ctx, users, nil) {
				if d.Err != nil || !d.OK || d.Remaining != float64(99-rounds) {
					t.Fatalf("round %d: a user's decision %+v, want granted with %d left", rounds, d, 99-rounds)
				}
			}
			rounds++
		}
	}
	if refused < flood-bound {
		t.Fatalf("%d of %d flood keys refused, want at least %d", refused, flood, flood-bound)
	}
	st := l.Stats()
	if st.LiveBuckets > bound {
		t.Fatalf("%d live buckets, above the bound %d", st.LiveBuckets, bound)
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	heap := int64(after.HeapInuse) - int64(before.HeapInuse)
	// A bucket costs ~100 bytes plus its key in memory; the file holds the
	// log since the last snapshot, which the flood's grants fill.
	t.Logf("flood of %d keys, bound %d: %d refused, %d live buckets, heap grew %d KiB, file %d KiB",
		flood, bound, refused, st.LiveBuckets, heap>>10, fi.Size()>>10)
	if heap > 64<<20 {
		t.Errorf("heap grew %d MiB under the flood", heap>>20)
	}
}
