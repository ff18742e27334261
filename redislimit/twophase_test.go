package redislimit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// storeLimit is a limit as the store sees it: one shard's arithmetic.
type storeLimit struct {
	name   string
	lim    bucket.Limit
	shards int
}

func (sl *storeLimit) item(key string, shard uint32) actor.Item {
	nh := bucket.NameHash(sl.name)
	h := bucket.HashWith(nh, key)
	return actor.Item{
		ID:    actor.BucketID{Name: sl.name, Key: key, Shard: shard},
		Hash:  bucket.ShardHash(bucket.TableHash(nh, key), shard),
		Lim:   &sl.lim,
		Phase: bucket.Phase(h, sl.lim.Period),
		Part:  route(h, shard),
	}
}

// storeLimits are sharded limits whose requests often split across two
// shards; odd counts have a lone last shard whose partner sits on
// another slot tag.
var storeLimits = []*storeLimit{
	{"s2", bucket.Limit{Kind: bucket.TokenBucket, Rate: 3, Period: int64(10 * S), Capacity: 3}, 2},
	{"s3", bucket.Limit{Kind: bucket.TokenBucket, Rate: 2, Period: int64(7 * S), Capacity: 2.5, MaxReserved: 1.5}, 3},
	{"s5", bucket.Limit{Kind: bucket.FixedWindow, Rate: 1.5, Period: int64(4 * S), Capacity: 2}, 5},
	{"s5r", bucket.Limit{Kind: bucket.TokenBucket, Rate: 1, Period: int64(3 * S), Capacity: 1}, 5},
	{"one", bucket.Limit{Kind: bucket.TokenBucket, Rate: 4, Period: int64(5 * S), Capacity: 4}, 1},
}

// callOp builds the same call twice (its items and members), for the
// partitions and for the store.
type callOp struct {
	what   string
	build  func(c *actor.Call)
	atomic bool
}

// addMember adds to c a request on (sl, key) over shards i and j (j < 0:
// one bucket), as package ratelimit would with those choices.
func addMember(c *actor.Call, sl *storeLimit, key string, i, j int, op actor.Op, count float64, reserve bool) {
	m := int32(len(c.Members))
	mem := actor.Member{Op: op, Count: count, Reserve: reserve, Second: -1}
	mem.First = c.AddItem(sl.item(key, uint32(i)), m, false)
	if j >= 0 {
		mem.Second = c.AddItem(sl.item(key, uint32(j)), m, true)
	}
	c.Members = append(c.Members, mem)
}

// pickShards draws two distinct shards as package ratelimit does (a pair,
// or the lone last shard of an odd count with any other), from rng.
func pickShards(rng *rand.Rand, n int) (int, int) {
	if n == 1 {
		return 0, -1
	}
	i := rng.IntN(n)
	if j := i ^ 1; j < n {
		return i, j
	}
	j := rng.IntN(n - 1)
	if j >= i {
		j++
	}
	return i, j
}

// splitPair reports whether shards i and j of (sl, key) sit on two tags.
func splitPair(sl *storeLimit, key string, i, j int) bool {
	return j >= 0 && sl.item(key, uint32(i)).Part != sl.item(key, uint32(j)).Part
}

func randomCallOp(rng *rand.Rand) callOp {
	keys := []string{"a", "b", ""}
	counts := []float64{1, 0.5, 2, 3, 1.25}
	req := func() (sl *storeLimit, key string, i, j int, count float64, reserve bool) {
		sl = storeLimits[rng.IntN(len(storeLimits))]
		i, j = pickShards(rng, sl.shards)
		return sl, keys[rng.IntN(len(keys))], i, j, counts[rng.IntN(len(counts))], rng.IntN(3) == 0
	}
	switch rng.IntN(6) {
	case 0, 1, 2: // one request (Limit, or Check)
		sl, key, i, j, n, res := req()
		op := actor.OpTake
		if rng.IntN(5) == 0 {
			op = actor.OpCheck
		}
		return callOp{fmt.Sprintf("%v %s/%s shards %d,%d count %v reserve %v", op, sl.name, key, i, j, n, res),
			func(c *actor.Call) { addMember(c, sl, key, i, j, op, n, res) }, true}
	case 3, 4: // several at once (LimitAll)
		type r struct {
			sl         *storeLimit
			key        string
			i, j       int
			n          float64
			res, check bool
		}
		rs := make([]r, 2+rng.IntN(3))
		for k := 0; k < len(rs); k++ {
			rs[k].sl, rs[k].key, rs[k].i, rs[k].j, rs[k].n, rs[k].res = req()
			rs[k].check = rng.IntN(6) == 0
			// A call that names the bucket of a pair across slots twice
			// is decided conservatively, not as the partitions do (see
			// the package doc): draw again.
			for p := range k {
				if rs[p].sl == rs[k].sl && rs[p].key == rs[k].key && (splitPair(rs[p].sl, rs[p].key, rs[p].i, rs[p].j) || splitPair(rs[k].sl, rs[k].key, rs[k].i, rs[k].j)) {
					k--
					break
				}
			}
		}
		return callOp{fmt.Sprintf("all %+v", rs), func(c *actor.Call) {
			for _, x := range rs {
				op := actor.OpTake
				if x.check {
					op = actor.OpCheck
				}
				addMember(c, x.sl, x.key, x.i, x.j, op, x.n, x.res)
			}
		}, true}
	default: // a credit of one shard
		sl, key, i, _, n, _ := req()
		return callOp{fmt.Sprintf("credit %s/%s shard %d count %v", sl.name, key, i, n),
			func(c *actor.Call) { addMember(c, sl, key, i, -1, actor.OpCredit, n, false) }, false}
	}
}

// TestTwoPhaseMatchesPartitions sends the same calls, two-choice picks
// included (pairs on one slot and lone shards paired across slots), to
// the partitions (actor.Group) and to the store, on one fake clock, and
// requires the same members' outcomes and the same bucket states.
func TestTwoPhaseMatchesPartitions(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		now := t0.UnixNano()
		clock := func() int64 { return now }
		g := actor.NewGroup(Slots, actor.NopLog{}, clock)
		g.Start()
		defer g.Stop()
		cfg := defaultConfig()
		cfg.prefix, cfg.sweep = testPrefix(t), 0
		s := newStore(client, &cfg, clock)
		defer s.Close()
		rng := rand.New(rand.NewPCG(7, 7))
		ctx := context.Background()
		pairsAcross := 0
		for step := range 2500 {
			if rng.IntN(3) > 0 {
				now += rng.Int64N(int64(3*S/time.Microsecond)) * 1000
			}
			op := randomCallOp(rng)
			cm, cr := actor.NewCall(), actor.NewCall()
			cm.Atomic, cr.Atomic = op.atomic, op.atomic
			op.build(cm)
			op.build(cr)
			for _, m := range cr.Members {
				if m.Second >= 0 && cr.Items[m.First].Part != cr.Items[m.Second].Part {
					pairsAcross++
				}
			}
			g.Decide(ctx, cm)
			s.Decide(ctx, cr)
			where := fmt.Sprintf("step %d: %s", step, op.what)
			if err := cr.FirstErr(); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			for i := range cm.Members {
				a, b := cm.Members[i], cr.Members[i]
				if a.OK != b.OK || a.RetryAfter != b.RetryAfter || !close12(a.Left, b.Left) || a.UntilFull != b.UntilFull {
					t.Fatalf("%s: member %d:\npartitions %+v\nstore      %+v", where, i, a, b)
				}
			}
			comparePeek(t, where, g, s, cm)
			cm.Release()
			cr.Release()
		}
		if pairsAcross < 50 {
			t.Errorf("only %d requests paired shards across slots", pairsAcross)
		}
	})
}

// comparePeek reads the buckets of c's items from both stores.
func comparePeek(t *testing.T, where string, g *actor.Group, s *redisStore, c *actor.Call) {
	t.Helper()
	pm, pr := actor.NewCall(), actor.NewCall()
	defer pm.Release()
	defer pr.Release()
	for i := range c.Items {
		it := c.Items[i]
		it.State, it.Err, it.Write = bucket.State{}, nil, false
		pm.AddItem(it, -1, false)
		pr.AddItem(it, -1, false)
	}
	g.Peek(pm)
	s.Peek(pr)
	if err := pr.FirstErr(); err != nil {
		t.Fatalf("%s: peek: %v", where, err)
	}
	for i := range pm.Items {
		a, b := pm.Items[i].State, pr.Items[i].State
		if a.TS != b.TS || !close12(a.Value, b.Value) {
			t.Fatalf("%s: bucket %+v: partitions %+v, store %+v", where, pm.Items[i].ID, a, b)
		}
	}
}

// TestTwoPhaseLimitAll checks LimitAll across slots on the public API:
// all or nothing, a denial gives back what earlier slots took, and the
// holds are gone once the limiter is closed (a granted call's holds are
// dropped in the background).
func TestTwoPhaseLimitAll(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk := newFakeClock(t0)
		prefix := testPrefix(t)
		l := openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"a": {Kind: ratelimit.TokenBucket, Rate: 5, Period: M},
			"b": {Kind: ratelimit.TokenBucket, Rate: 3, Period: M},
		}})
		ctx := context.Background()
		keys := keysOnDistinctTags("a", "b")
		rs := []ratelimit.Request{{Name: "a", Key: keys[0], Count: 2}, {Name: "b", Key: keys[1], Count: 2}}
		st, err := l.LimitAll(ctx, rs...)
		if err != nil || !st.OK {
			t.Fatal(st, err)
		}
		// b has 1 left: the call is denied and a gets its 2 back.
		st, err = l.LimitAll(ctx, rs...)
		if err != nil || st.OK || st.Limit != "b" || st.RetryAfter != 20*S {
			t.Fatal(st, err)
		}
		if v, _ := l.Value(ctx, "a", keys[0]); v.Value != 3 {
			t.Fatalf("a holds %v after the denied call, want 3", v.Value)
		}
		l.Close() // waits for the holds dropped in the background
		if n := countKeys(t, client, prefix+"*h:*"); n != 0 {
			t.Fatalf("%d holds left", n)
		}
	})
}

// A hold timeout below a millisecond is rounded up to one: a Redis expiry
// counts whole milliseconds, and PX 0 is an error.
func TestHoldTimeoutBelowAMillisecond(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{500 * time.Microsecond, time.Millisecond},
		{time.Millisecond, time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{math.MaxInt64, math.MaxInt64 - math.MaxInt64%time.Millisecond},
	} {
		cfg := defaultConfig()
		HoldTimeout(c.in)(&cfg)
		if cfg.holdTTL != c.want {
			t.Errorf("HoldTimeout(%v): %v, want %v", c.in, cfg.holdTTL, c.want)
		}
	}
	client := topologies[0].client(t)
	l := open(t, client, ratelimit.Options{Now: newFakeClock(t0).Now, Limits: map[string]ratelimit.Config{
		"a": {Kind: ratelimit.TokenBucket, Rate: 5, Period: M},
		"b": {Kind: ratelimit.TokenBucket, Rate: 3, Period: M},
	}}, HoldTimeout(500*time.Microsecond))
	keys := keysOnDistinctTags("a", "b")
	rs := []ratelimit.Request{{Name: "a", Key: keys[0], Count: 2}, {Name: "b", Key: keys[1], Count: 2}}
	for i, want := range []bool{true, false} {
		if st, err := l.LimitAll(context.Background(), rs...); err != nil || st.OK != want {
			t.Fatalf("LimitAll %d across slots: %+v, %v; want OK %v", i, st, err, want)
		}
	}
}

// keysOnDistinctTags returns a key for each limit name such that their
// buckets sit on different slot tags, in ascending tag order.
func keysOnDistinctTags(names ...string) []string {
	keys := make([]string, len(names))
	for i, name := range names {
		lo, hi := int32(i*Slots/len(names)), int32((i+1)*Slots/len(names))
		for k := 0; ; k++ {
			key := fmt.Sprint("k", k)
			if t := route(bucket.Hash(name, key), 0); t >= lo && t < hi {
				keys[i] = key
				break
			}
		}
	}
	return keys
}

// countKeys counts the keys matching pattern on every master.
func countKeys(t *testing.T, client redis.UniversalClient, pattern string) int {
	t.Helper()
	var n atomic.Int64 // masters are visited concurrently
	err := eachMaster(context.Background(), client, func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, pattern).Result()
		n.Add(int64(len(keys)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return int(n.Load())
}

// A denied LimitAll naming one bucket twice reports when both fit, in
// order, as the partitions do: in one function call, and across slots.
func TestLimitAllRepeatsRetryAfter(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk := newFakeClock(t0)
		l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"x": {Kind: ratelimit.TokenBucket, Rate: 10, Period: 10 * S},
			"y": {Kind: ratelimit.TokenBucket, Rate: 10, Period: 10 * S},
		}})
		ctx := context.Background()
		keys := keysOnDistinctTags("x", "y")
		x, y := ratelimit.Request{Name: "x", Key: keys[0], Count: 5}, ratelimit.Request{Name: "y", Key: keys[1], Count: 1}
		if _, err := l.Limit(ctx, ratelimit.Request{Name: "x", Key: keys[0], Count: 10}); err != nil {
			t.Fatal(err)
		}
		for _, rs := range [][]ratelimit.Request{{x, x}, {x, y, x}} {
			if st, err := l.LimitAll(ctx, rs...); err != nil || st.OK || st.RetryAfter != 10*S {
				t.Errorf("LimitAll of %d requests, x twice on an empty x: %+v, %v; want denied for 10s", len(rs), st, err)
			}
		}
	})
}

// limitersDeniedOnB opens two limiters on one keyspace, on a fake clock,
// with limits a (10 tokens, refilled in 10 s) and b (10, refilled over
// 1000 hours), whose keys sit on two slots, a's first; b's bucket is
// drained, so a LimitAll that also asks b is denied after a's step.
func limitersDeniedOnB(t *testing.T, client redis.UniversalClient) (clk *ratelimittest.Clock, l1, l2 *ratelimit.Limiter, keys []string) {
	clk = newFakeClock(t0)
	limits := map[string]ratelimit.Config{
		"a": {Kind: ratelimit.TokenBucket, Rate: 10, Period: 10 * S},
		"b": {Kind: ratelimit.TokenBucket, Rate: 10, Period: 1000 * H},
	}
	prefix := testPrefix(t)
	l1 = openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: limits})
	l2 = openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: limits})
	keys = keysOnDistinctTags("a", "b")
	if st, err := l2.Limit(context.Background(), ratelimit.Request{Name: "b", Key: keys[1], Count: 10}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	return clk, l1, l2, keys
}

// Phase two gives back no more than the bucket still lacks for what it
// held: if a reset, a refill or a credit brought the bucket to capacity
// (or near it) between the phases, the tokens held no longer count, and
// giving them back over what was taken since would over-admit. The call
// is a LimitAll that takes 3 of a's 10 tokens, then is denied on its
// second slot; between its phases, another limiter changes a's bucket,
// then takes 4 from it. The bucket must end as if the denied call had
// never run.
func TestGiveBackAfterTheBucketFilled(t *testing.T) {
	reset := func(l *ratelimit.Limiter, _ *ratelimittest.Clock, key string) error {
		return l.Reset(context.Background(), "a", key)
	}
	credit := func(n float64) func(*ratelimit.Limiter, *ratelimittest.Clock, string) error {
		return func(l *ratelimit.Limiter, _ *ratelimittest.Clock, key string) error {
			return l.Credit(context.Background(), "a", key, n)
		}
	}
	wait := func(d time.Duration) func(*ratelimit.Limiter, *ratelimittest.Clock, string) error {
		return func(_ *ratelimit.Limiter, clk *ratelimittest.Clock, _ string) error { clk.Advance(d); return nil }
	}
	for _, tc := range []struct {
		name    string
		before  float64 // taken from a before the call
		between func(l *ratelimit.Limiter, clk *ratelimittest.Clock, key string) error
		want    float64
	}{
		{"nothing else", 0, wait(0), 6},            // all 3 come back
		{"reset", 0, reset, 6},                     // none: the reset filled it
		{"credit to capacity", 0, credit(3), 6},    // none
		{"credit to 1 short", 0, credit(2), 6},     // 1
		{"refill to capacity", 0, wait(3 * S), 6},  // none
		{"refill to 2 short", 0, wait(S), 6},       // 2
		{"refill, never full", 5, wait(2 * S), 3},  // all 3: 5+2-4
		{"reset, drained first", 5, reset, 6},      // none
		{"credit, drained first", 3, credit(1), 4}, // all 3: 7+1-4
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
				ctx := context.Background()
				clk, l1, l2, keys := limitersDeniedOnB(t, client)
				if tc.before > 0 {
					if st, err := l2.Limit(ctx, ratelimit.Request{Name: "a", Key: keys[0], Count: tc.before}); err != nil || !st.OK {
						t.Fatal(st, err)
					}
				}
				afterStep = func(k, n int) {
					if err := tc.between(l2, clk, keys[0]); err != nil {
						t.Error(err)
					}
					if st, err := l2.Limit(ctx, ratelimit.Request{Name: "a", Key: keys[0], Count: 4}); err != nil || !st.OK {
						t.Errorf("taking 4 between the phases: %+v, %v", st, err)
					}
				}
				st, err := l1.LimitAll(ctx, ratelimit.Request{Name: "a", Key: keys[0], Count: 3}, ratelimit.Request{Name: "b", Key: keys[1], Count: 9})
				afterStep = nil
				if err != nil || st.OK {
					t.Fatalf("LimitAll = %+v, %v; want denied (b has too few)", st, err)
				}
				if v, err := l2.Value(ctx, "a", keys[0]); err != nil || v.Value != tc.want {
					t.Errorf("a holds %v after the denied LimitAll (%v), want %v", v.Value, err, tc.want)
				}
			})
		})
	}
}

// A sharded take whose two shards sit on two slots holds its count on the
// first shard; when the second serves it alone, phase two gives the
// first shard its count back. If that shard was filled meanwhile (reset,
// or refilled) and 4 were taken from it, nothing comes back: the shard
// must end as if the hold had never been.
func TestPairGiveBackAfterTheShardFilled(t *testing.T) {
	for _, how := range []string{"reset", "refill"} {
		t.Run(how, func(t *testing.T) {
			forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
				var now atomic.Int64
				now.Store(t0.UnixNano())
				cfg := defaultConfig()
				cfg.prefix, cfg.sweep = testPrefix(t), 0
				s := newStore(client, &cfg, func() int64 { return now.Load() })
				defer s.Close()
				ctx := context.Background()
				sl := &storeLimit{"p3", bucket.Limit{Kind: bucket.TokenBucket, Rate: 10, Period: int64(10 * S), Capacity: 10}, 3}
				key := ""
				for k := 0; ; k++ { // shard 0 on a lower tag than shard 2: shard 0 holds
					key = fmt.Sprint("k", k)
					if sl.item(key, 0).Part < sl.item(key, 2).Part {
						break
					}
				}
				take := func(shard, other int, count float64) bool {
					c := actor.NewCall()
					defer c.Release()
					c.Atomic = true
					addMember(c, sl, key, shard, other, actor.OpTake, count, false)
					if _, err := s.Decide(ctx, c); err != nil {
						t.Fatal(err)
					}
					if err := c.FirstErr(); err != nil {
						t.Fatal(err)
					}
					return c.Members[0].OK
				}
				afterStep = func(k, n int) {
					if how == "reset" {
						c := actor.NewCall()
						c.AddItem(sl.item(key, 0), -1, false)
						s.Reset(c)
						c.Release()
					} else {
						now.Add(int64(10 * S))
					}
					if !take(0, -1, 4) {
						t.Error("taking 4 from shard 0 between the phases: denied")
					}
				}
				ok := take(2, 0, 5)
				afterStep = nil
				if !ok {
					t.Fatal("the pair's take of 5: denied")
				}
				p := actor.NewCall()
				defer p.Release()
				p.AddItem(sl.item(key, 0), -1, false)
				p.AddItem(sl.item(key, 2), -1, false)
				s.Peek(p)
				v0 := sl.lim.Project(p.Items[0].State, p.Now).Value
				v2 := sl.lim.Project(p.Items[1].State, p.Now).Value
				// Whichever shard served the pair (after a refill, the first
				// may), shard 0 was full when 4 were taken from it.
				if v0 != 6 || v2 != 5 && v2 != 10 {
					t.Errorf("shard 0 holds %v, want 6 (full when 4 were taken); shard 2 %v, want 5 or 10 (served the pair or not)", v0, v2)
				}
			})
		})
	}
}

// Two denied LimitAll calls hold 3 each on a (10 tokens), one inside the
// other's phases; between, nothing, or a credit of 4 or a refill (which a
// bucket without the holds would lose at capacity) then a take of 4. Each
// give-back uses up room the other then cannot give again, and only that:
// a ends as if neither call had run, 10, or 10 -> 10 (capped) -> 6.
func TestOverlappingHoldsGiveBackOnce(t *testing.T) {
	for _, between := range []string{"nothing", "credit", "refill"} {
		t.Run(between, func(t *testing.T) {
			forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
				ctx := context.Background()
				clk, l1, l2, keys := limitersDeniedOnB(t, client)
				denied := []ratelimit.Request{{Name: "a", Key: keys[0], Count: 3}, {Name: "b", Key: keys[1], Count: 1}}
				depth := 0
				afterStep = func(k, n int) {
					depth++
					defer func() { depth-- }()
					switch depth {
					case 1: // the outer call holds 3 (a = 7); the inner one 3 more
						if st, err := l2.LimitAll(ctx, denied...); err != nil || st.OK {
							t.Errorf("inner LimitAll = %+v, %v; want denied", st, err)
						}
					case 2: // a = 4
						switch between {
						case "nothing":
							return
						case "refill":
							clk.Advance(4 * S)
						default:
							if err := l2.Credit(ctx, "a", keys[0], 4); err != nil {
								t.Error(err)
							}
						}
						if st, err := l2.Limit(ctx, ratelimit.Request{Name: "a", Key: keys[0], Count: 4}); err != nil || !st.OK {
							t.Errorf("taking 4: %+v, %v", st, err)
						}
					}
				}
				st, err := l1.LimitAll(ctx, denied...)
				afterStep = nil
				if err != nil || st.OK {
					t.Fatalf("outer LimitAll = %+v, %v; want denied", st, err)
				}
				want := 6.0
				if between == "nothing" {
					want = 10
				}
				if v, err := l2.Value(ctx, "a", keys[0]); err != nil || v.Value != want {
					t.Errorf("a holds %v (%v) after two denied LimitAlls, want %v (as if neither had run)", v.Value, err, want)
				}
			})
		})
	}
}

// Random interleavings on one bucket a of LimitAll calls across slots
// (granted or denied, up to 6 paused between their phases at once),
// takes, reservations, credits, resets and clock steps: a never ends with
// more tokens than a model that applies only the grants made, as if the
// denied calls had never run.
func TestHoldsNeverOverAdmit(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		for _, kind := range []ratelimit.Kind{ratelimit.TokenBucket, ratelimit.FixedWindow} {
			for _, reserve := range []bool{false, true} {
				for seed := range seeds {
					if msg := holdsTrial(t, client, kind, reserve, uint64(seed)); msg != "" {
						t.Fatalf("%v, reserve %v, seed %d: %s", kind, reserve, seed, msg)
					}
				}
			}
		}
	})
}

// holdsTrial runs one trial of TestHoldsNeverOverAdmit; "" if it passed.
func holdsTrial(t *testing.T, client redis.UniversalClient, kind ratelimit.Kind, reserve bool, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	clk := newFakeClock(t0)
	period := 10 * S
	acfg := ratelimit.Config{Kind: kind, Rate: 10, Period: period}
	lim := bucket.Limit{Kind: bucket.TokenBucket, Rate: 10, Period: int64(period), Capacity: 10}
	if reserve {
		acfg.MaxReserved, lim.MaxReserved = 5, 5
	}
	phase := int64(0)
	if kind == ratelimit.FixedWindow {
		acfg.Start = t0
		lim.Kind, phase = bucket.FixedWindow, bucket.StartPhase(t0.UnixNano(), int64(period))
	}
	limits := map[string]ratelimit.Config{
		"a": acfg,
		"b": {Kind: ratelimit.TokenBucket, Rate: 10, Period: 1000 * H}, // drained: a call that needs it is denied
		"c": {Kind: ratelimit.TokenBucket, Rate: 1e6, Period: S},       // a call that needs it is granted
	}
	l := openPrefix(t, client, testPrefix(t), ratelimit.Options{Now: clk.Now, Limits: limits})
	keys := keysOnDistinctTags("a", "b", "c")
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "b", Key: keys[1], Count: 10}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	now := func() int64 { return clk.Now().UnixNano() }
	model := lim.Fresh(now(), phase)
	var steps []string
	logf := func(f string, a ...any) { steps = append(steps, fmt.Sprintf(f, a...)) }

	type call struct {
		gate, done chan struct{}
		ok, deny   bool
		err        error
	}
	arrived := make(chan chan struct{})
	afterStep = func(k, n int) { // a call pauses after its first step until its gate opens
		if k < n-1 {
			gate := make(chan struct{})
			arrived <- gate
			<-gate
		}
	}
	var open []*call
	defer func() {
		for _, c := range open {
			close(c.gate)
			<-c.done
		}
		afterStep = nil
	}()
	ops := 4 + rng.IntN(30)
	for op := 0; op < ops || len(open) > 0; op++ {
		r := []int{0, 0, 0, 1, 2, 3, 4, 5, 6, 9, 9, 9}[rng.IntN(12)]
		if op >= ops {
			r = 9
		}
		switch {
		case r == 0 && len(open) < 6: // a LimitAll, paused between its phases
			c := &call{done: make(chan struct{}), deny: rng.IntN(3) > 0}
			n, res := float64(1+rng.IntN(5)), reserve && rng.IntN(2) == 0
			rs := []ratelimit.Request{{Name: "a", Key: keys[0], Count: n, Reserve: res}, {Name: "c", Key: keys[2]}}
			if c.deny {
				rs[1] = ratelimit.Request{Name: "b", Key: keys[1]}
			}
			go func() {
				st, err := l.LimitAll(ctx, rs...)
				c.ok, c.err = st.OK, err
				close(c.done)
			}()
			select {
			case c.gate = <-arrived:
				open = append(open, c)
				if !c.deny {
					next, ok := lim.Try(model, now(), n, res)
					if !ok {
						return fmt.Sprintf("a's step granted a take of %v the model denies; %v", n, steps)
					}
					model = next
				}
				logf("LimitAll(%v, deny %v)", n, c.deny)
			case <-c.done: // denied on a
				if c.ok || c.err != nil {
					return fmt.Sprintf("LimitAll done without pausing: %v, %v", c.ok, c.err)
				}
				logf("LimitAll(%v) denied on a", n)
			}
		case r == 9 && len(open) > 0: // one paused call goes on
			i := rng.IntN(len(open))
			c := open[i]
			open = append(open[:i], open[i+1:]...)
			close(c.gate)
			<-c.done
			if c.err != nil || c.ok == c.deny {
				return fmt.Sprintf("LimitAll ended %v, %v; deny %v", c.ok, c.err, c.deny)
			}
			logf("end(deny %v)", c.deny)
		case r <= 3:
			n, res := float64(1+rng.IntN(6)), reserve && rng.IntN(2) == 0
			st, err := l.Limit(ctx, ratelimit.Request{Name: "a", Key: keys[0], Count: n, Reserve: res})
			if err != nil {
				return err.Error()
			}
			if st.OK {
				next, ok := lim.Try(model, now(), n, res)
				if !ok {
					return fmt.Sprintf("a take of %v granted, the model holds %v; %v", n, lim.Project(model, now()).Value, steps)
				}
				model = next
			}
			logf("take(%v, reserve %v) = %v", n, res, st.OK)
		case r == 4:
			n := float64(1 + rng.IntN(5))
			if err := l.Credit(ctx, "a", keys[0], n); err != nil {
				return err.Error()
			}
			model = lim.Credit(model, now(), n)
			logf("credit(%v)", n)
		case r == 5 && rng.IntN(3) == 0:
			if err := l.Reset(ctx, "a", keys[0]); err != nil {
				return err.Error()
			}
			model = lim.Fresh(now(), phase)
			logf("reset")
		case r == 6 && rng.IntN(2) == 0:
			d := time.Duration(rng.IntN(5)) * S
			clk.Advance(d)
			logf("wait(%v)", d)
		}
	}
	v, err := l.Value(ctx, "a", keys[0])
	if err != nil {
		return err.Error()
	}
	if want := lim.Project(model, now()).Value; v.Value > want {
		return fmt.Sprintf("over-admission: a holds %v, the model %v; %v", v.Value, want, steps)
	}
	return ""
}
