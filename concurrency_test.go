package ratelimit

// Concurrency of the public API: cancellation at any moment, Close racing
// everything, credits and resets racing two-phase holds, against ledgers of
// what was acknowledged. Waits are channels or bounded Gosched loops that
// fail the test on a deadline (waitDone), never sleeps. CI also runs the
// tests named Concurrency* with ACTOR_QUEUE_ONLY=1 (see open).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// frozenTB and frozenFW refill their capacity once an hour or a day:
// nothing on a frozen clock.
func frozenTB(capacity float64, shards int) Config {
	return Config{Kind: TokenBucket, Rate: capacity, Period: time.Hour, Capacity: capacity, Shards: shards}
}

func frozenFW(capacity float64, shards int) Config {
	return Config{Kind: FixedWindow, Rate: capacity, Period: 24 * time.Hour, Capacity: capacity, Shards: shards,
		Start: t0.Add(-time.Hour)}
}

// ledger counts, per bucket, what was acknowledged and what may have
// been taken without acknowledgement (a call whose context ended).
type ledger struct {
	mu    sync.Mutex
	acked map[bucketRef]float64
	maybe map[bucketRef]float64
}

func newLedger() *ledger {
	return &ledger{acked: map[bucketRef]float64{}, maybe: map[bucketRef]float64{}}
}

func (l *ledger) add(m map[bucketRef]float64, r Request, n float64) {
	l.mu.Lock()
	m[bucketRef{r.Name, r.Key}] += n
	l.mu.Unlock()
}

// countOf is the count r takes (0 means 1).
func countOf(r Request) float64 {
	if r.Count == 0 {
		return 1
	}
	return r.Count
}

// isCtxErr reports whether err is a context's error.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// randomCtx returns a context that is background, already cancelled, or
// cancelled concurrently at a random moment.
func randomCtx(r *rand.Rand) (context.Context, func()) {
	switch r.IntN(4) {
	case 0:
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	case 1:
		ctx, cancel := context.WithCancel(context.Background())
		spins := r.IntN(3)
		go func() {
			for range spins {
				runtime.Gosched()
			}
			cancel()
		}()
		return ctx, cancel
	case 2:
		ctx, cancel := context.WithCancel(context.Background())
		return ctx, cancel
	}
	return context.Background(), func() {}
}

// stressLimits are small frozen buckets, sharded and not, so that
// denials and two-phase holds are common.
var stressLimits = map[string]Config{
	"u":  frozenTB(40, 1),
	"f":  frozenFW(30, 1),
	"s":  frozenTB(64, 4),
	"s2": frozenTB(24, 2),
	"fs": frozenFW(48, 3),
}

var stressKeys = []string{"", "a", "b", "c"}

// stress runs workers issuing Limit, LimitAll (with repeats),
// LimitMany (with repeats, sharded and invalid requests), Check and Value
// under random cancellation, then checks every bucket: what it lost is at
// least what was acknowledged and at most that plus what callers gave up
// on, and never more than its capacity (frozen clock).
func stress(t *testing.T, l *Limiter, workers, iters int, led *ledger, seed uint64) {
	names := []string{"u", "f", "s", "s2", "fs"}
	pick := func(r *rand.Rand) Request {
		n := names[r.IntN(len(names))]
		return Request{Name: n, Key: stressKeys[r.IntN(len(stressKeys))], Count: float64(1 + r.IntN(3))}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			var out []Decision
			for range iters {
				ctx, cancel := randomCtx(r)
				switch r.IntN(5) {
				case 0:
					req := pick(r)
					st, err := l.Limit(ctx, req)
					switch {
					case err == nil && st.OK:
						led.add(led.acked, req, countOf(req))
					case isCtxErr(err):
						led.add(led.maybe, req, countOf(req))
					case err != nil:
						t.Errorf("Limit %+v: %v", req, err)
					}
				case 1:
					n := 1 + r.IntN(4)
					rs := make([]Request, n)
					for i := range rs {
						rs[i] = pick(r)
						if i > 0 && r.IntN(3) == 0 {
							rs[i] = rs[r.IntN(i)] // a repeat
							rs[i].Count = 1
						}
					}
					st, err := l.LimitAll(ctx, rs...)
					switch {
					case err == nil && st.OK:
						for _, q := range rs {
							led.add(led.acked, q, countOf(q))
						}
					case err == nil:
					case isCtxErr(err):
						for _, q := range rs {
							led.add(led.maybe, q, countOf(q))
						}
					case errors.Is(err, ErrInvalidCount): // repeats that never fit
					default:
						t.Errorf("LimitAll: %v", err)
					}
				case 2:
					n := 1 + r.IntN(8)
					rs := make([]Request, n)
					for i := range rs {
						rs[i] = pick(r)
						switch r.IntN(8) {
						case 0:
							rs[i].Name = "nope"
						case 1:
							rs[i].Count = 1e9
						case 2:
							rs[i].Key = strings.Repeat("k", MaxKeyLen+1)
						case 3:
							if i > 0 {
								rs[i] = rs[r.IntN(i)]
							}
						}
					}
					out = l.LimitMany(ctx, rs, out)
					if len(out) != n {
						t.Errorf("LimitMany: %d decisions for %d", len(out), n)
						break
					}
					for i, d := range out {
						q := rs[i]
						bad := q.Name == "nope" || q.Count == 1e9 || len(q.Key) > MaxKeyLen
						switch {
						case bad:
							if d.Err == nil {
								t.Errorf("LimitMany invalid %d: %+v", i, d)
							}
						case d.Err == nil && d.OK:
							led.add(led.acked, q, countOf(q))
						case d.Err == nil:
						case isCtxErr(d.Err):
							led.add(led.maybe, q, countOf(q))
						default:
							t.Errorf("LimitMany %d: %v", i, d.Err)
						}
					}
				case 3:
					req := pick(r)
					if _, err := l.Check(ctx, req); err != nil && !isCtxErr(err) {
						t.Errorf("Check: %v", err)
					}
				default:
					req := pick(r)
					v, err := l.Value(ctx, req.Name, req.Key)
					if err != nil && !isCtxErr(err) {
						t.Errorf("Value: %v", err)
					} else if err == nil && v.Value < -1e-9 {
						t.Errorf("Value %s/%q = %v: over-admitted", req.Name, req.Key, v.Value)
					}
				}
				cancel()
			}
		}()
	}
	waitDone(t, wgDone(&wg), "the stress workers")
}

// checkLedger compares every bucket's loss with the ledger.
func checkLedger(t *testing.T, l *Limiter, led *ledger, durable bool) {
	t.Helper()
	var a, m float64
	for _, v := range led.acked {
		a += v
	}
	for _, v := range led.maybe {
		m += v
	}
	t.Logf("acknowledged %v tokens, %v more asked by callers who gave up", a, m)
	for name, cfg := range stressLimits {
		for _, key := range stressKeys {
			v, err := l.Value(context.Background(), name, key)
			if err != nil {
				t.Fatalf("Value: %v", err)
			}
			ref := bucketRef{name, key}
			spent := cfg.Capacity - v.Value
			a, m := led.acked[ref], led.maybe[ref]
			const eps = 1e-9
			if a > cfg.Capacity+eps {
				t.Errorf("%s/%q: acknowledged %v > capacity %v: over-admitted", name, key, a, cfg.Capacity)
			}
			if spent < a-eps || spent > a+m+eps {
				t.Errorf("%s/%q (durable %v): spent %v, acknowledged %v, maybe %v", name, key, durable, spent, a, m)
			}
		}
	}
}

// The stress workers with random cancellation, snapshots (durable) and
// gentle sweeps throughout, on 2, 5 and 8 partitions: every bucket matches
// the ledger, and again after reopening.
func TestConcurrencyStressMixedCancel(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			for round := range 3 {
				clk := newClock()
				path := ""
				if durable {
					path = filepath.Join(t.TempDir(), "rl.db")
				}
				opts := Options{Path: path, Now: clk.Now, Limits: stressLimits, Partitions: 2 + 3*round}
				l := open(t, opts)
				led := newLedger()
				stop, janitor := make(chan struct{}), make(chan struct{})
				go func() { // snapshots (durable) and gentle sweeps throughout
					defer close(janitor)
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := l.Snapshot(); err != nil {
							t.Errorf("Snapshot: %v", err)
							return
						}
						l.sweepGently()
						runtime.Gosched()
					}
				}()
				stress(t, l, 16, 300, led, uint64(round))
				close(stop)
				waitDone(t, janitor, "the janitor")
				checkLedger(t, l, led, durable)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if durable {
					l = open(t, opts)
					checkLedger(t, l, led, true)
					l.Close()
				}
			}
		})
	}
}

// With a clock moving under the callers (and sweeps and snapshots dropping
// full buckets), no bucket grants more than capacity + rate * elapsed
// (token bucket) or capacity + rate * windows begun (fixed window).
func TestConcurrencyMovingClockNeverOverAdmits(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			clk := newClock()
			limits := map[string]Config{
				"tb": {Kind: TokenBucket, Rate: 10, Period: time.Second, Capacity: 10},
				"ts": {Kind: TokenBucket, Rate: 12, Period: time.Second, Capacity: 12, Shards: 3},
				"t2": {Kind: TokenBucket, Rate: 8, Period: time.Second, Capacity: 8, Shards: 2},
				"fw": {Kind: FixedWindow, Rate: 10, Period: 100 * time.Millisecond, Capacity: 10, Start: t0},
			}
			path := ""
			if durable {
				path = filepath.Join(t.TempDir(), "rl.db")
			}
			l := open(t, Options{Path: path, Now: clk.Now, Limits: limits, Partitions: 5})
			names := []string{"tb", "ts", "t2", "fw"}
			keys := []string{"x", "y"}
			var mu sync.Mutex
			granted := map[bucketRef]float64{}
			add := func(r Request) {
				mu.Lock()
				granted[bucketRef{r.Name, r.Key}] += countOf(r)
				mu.Unlock()
			}
			stop := make(chan struct{})
			var moved sync.WaitGroup
			moved.Add(1)
			go func() { // the clock and the janitors
				defer moved.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					clk.Advance(time.Millisecond)
					if i%16 == 0 && !durable {
						_ = l.Snapshot() // memory mode: a sweep
					}
					if i%64 == 0 && durable {
						if err := l.Snapshot(); err != nil {
							t.Errorf("Snapshot: %v", err)
						}
					}
					runtime.Gosched()
				}
			}()
			start := clk.Now()
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 5))
					var out []Decision
					pick := func() Request {
						return Request{Name: names[r.IntN(len(names))], Key: keys[r.IntN(len(keys))], Count: float64(1 + r.IntN(2))}
					}
					for range 400 {
						switch r.IntN(3) {
						case 0:
							q := pick()
							st, err := l.Limit(context.Background(), q)
							if err != nil {
								t.Errorf("Limit: %v", err)
								return
							}
							if st.OK {
								add(q)
							}
						case 1:
							rs := []Request{pick(), pick()}
							if rs[0].Name == rs[1].Name && rs[0].Key == rs[1].Key {
								rs = rs[:1]
							}
							st, err := l.LimitAll(context.Background(), rs...)
							if err != nil {
								t.Errorf("LimitAll: %v", err)
								return
							}
							if st.OK {
								for _, q := range rs {
									add(q)
								}
							}
						default:
							rs := []Request{pick(), pick(), pick(), pick()}
							out = l.LimitMany(context.Background(), rs, out)
							for i, d := range out {
								if d.Err != nil {
									t.Errorf("LimitMany: %v", d.Err)
									return
								}
								if d.OK {
									add(rs[i])
								}
							}
						}
					}
				}()
			}
			waitDone(t, wgDone(&wg), "workers")
			close(stop)
			moved.Wait()
			elapsed := clk.Now().Sub(start)
			for _, n := range names {
				cfg := limits[n]
				var bound float64
				if cfg.Kind == TokenBucket {
					bound = cfg.Capacity + cfg.Rate*elapsed.Seconds()/cfg.Period.Seconds()
				} else {
					windows := float64(elapsed/cfg.Period) + 1
					bound = cfg.Capacity + cfg.Rate*windows
				}
				for _, k := range keys {
					g := granted[bucketRef{n, k}]
					if g > bound+1e-6 {
						t.Errorf("%s/%s: granted %v over %v, bound %v: over-admitted", n, k, g, elapsed, bound)
					} else {
						t.Logf("%s/%s: granted %v over %v, bound %v", n, k, g, elapsed, bound)
					}
				}
			}
		})
	}
}

// Close while workers run Limit, LimitAll (with repeats) and LimitMany
// (with sharded, invalid and repeated requests) on small buckets, so that
// denials and two-phase holds are common, durably. Every call answers
// (no hang), each answer is an outcome or ErrClosed, and after reopening
// every bucket has lost exactly what was acknowledged: nothing answered
// ErrClosed or denied was written, nothing acknowledged was lost.
func TestConcurrencyCloseRacingExactDurable(t *testing.T) {
	rounds := 6
	if raceEnabled {
		rounds = 4
	}
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "rl.db")
		clk := newClock()
		opts := Options{Path: path, Now: clk.Now, Limits: stressLimits, Partitions: 3 + round}
		l := open(t, opts)
		led := newLedger()
		names := []string{"u", "f", "s", "s2", "fs"}
		var ops atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				pick := func() Request {
					return Request{Name: names[r.IntN(len(names))], Key: stressKeys[r.IntN(len(stressKeys))], Count: float64(1 + r.IntN(2))}
				}
				var out []Decision
				for {
					ops.Add(1)
					closed := false
					switch r.IntN(3) {
					case 0:
						q := pick()
						st, err := l.Limit(context.Background(), q)
						switch {
						case err == nil && st.OK:
							led.add(led.acked, q, countOf(q))
						case errors.Is(err, ErrClosed):
							closed = true
						case err != nil:
							t.Errorf("Limit: %v", err)
							return
						}
					case 1:
						rs := []Request{pick(), pick(), pick()}
						rs[2] = rs[r.IntN(2)]
						rs[2].Count = 1
						st, err := l.LimitAll(context.Background(), rs...)
						switch {
						case err == nil && st.OK:
							for _, q := range rs {
								led.add(led.acked, q, countOf(q))
							}
						case errors.Is(err, ErrClosed):
							closed = true
						case errors.Is(err, ErrInvalidCount):
						case err != nil:
							t.Errorf("LimitAll: %v", err)
							return
						}
					default:
						rs := []Request{pick(), pick(), pick(), pick(), {Name: "nope"}}
						rs[3] = rs[0]
						out = l.LimitMany(context.Background(), rs, out)
						for i, d := range out {
							switch {
							case i == 4:
								if d.Err == nil {
									t.Errorf("LimitMany: unknown limit granted")
								}
							case d.Err == nil && d.OK:
								led.add(led.acked, rs[i], countOf(rs[i]))
							case errors.Is(d.Err, ErrClosed):
								closed = true
							case d.Err != nil:
								t.Errorf("LimitMany %d: %v", i, d.Err)
								return
							}
						}
					}
					if closed {
						return
					}
				}
			}()
		}
		for deadline := time.Now().Add(hangTimeout); ops.Load() < int64(200+100*round); {
			if time.Now().After(deadline) {
				t.Fatal("workers made no progress")
			}
			runtime.Gosched()
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		waitDone(t, wgDone(&wg), "workers after Close")
		l = open(t, opts)
		for name, cfg := range stressLimits {
			for _, key := range stressKeys {
				v, err := l.Value(context.Background(), name, key)
				if err != nil {
					t.Fatal(err)
				}
				spent, a := cfg.Capacity-v.Value, led.acked[bucketRef{name, key}]
				if diff := spent - a; diff > 1e-9 || diff < -1e-9 {
					t.Errorf("round %d: %s/%q: after reopen spent %v, acknowledged %v", round, name, key, spent, a)
				}
			}
		}
		l.Close()
	}
}

// Credits and resets (single and sharded, spread over partitions) racing
// grants, LimitAll holds and cancellation: nothing hangs, only expected
// errors, and no bucket is ever seen outside [0, capacity] (no
// reservations; frozen clock), in memory and after a durable reopen.
func TestConcurrencyCreditResetRacingHolds(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			clk := newClock()
			path := ""
			if durable {
				path = filepath.Join(t.TempDir(), "rl.db")
			}
			opts := Options{Path: path, Now: clk.Now, Limits: stressLimits, Partitions: 4}
			l := open(t, opts)
			names := []string{"u", "f", "s", "s2", "fs"}
			inRange := func(name, key string, v float64) {
				if c := stressLimits[name].Capacity; v < -1e-9 || v > c+1e-9 {
					t.Errorf("%s/%q = %v outside [0, %v]", name, key, v, c)
				}
			}
			var wg sync.WaitGroup
			for w := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 77))
					pick := func() Request {
						return Request{Name: names[r.IntN(len(names))], Key: stressKeys[r.IntN(len(stressKeys))], Count: float64(1 + r.IntN(4))}
					}
					for range 250 {
						ctx, cancel := randomCtx(r)
						var err error
						q := pick()
						switch r.IntN(6) {
						case 0:
							_, err = l.Limit(ctx, q)
						case 1:
							_, err = l.LimitAll(ctx, q, pick(), pick())
							if errors.Is(err, ErrInvalidCount) {
								err = nil
							}
						case 2:
							err = l.Credit(ctx, q.Name, q.Key, float64(r.IntN(6)))
						case 3:
							err = l.Reset(ctx, q.Name, q.Key)
						case 4:
							ds := l.LimitMany(ctx, []Request{q, pick(), q}, nil)
							err = errors.Join(ds[0].Err, ds[1].Err, ds[2].Err)
						default:
							var v Value
							if v, err = l.Value(ctx, q.Name, q.Key); err == nil {
								inRange(q.Name, q.Key, v.Value)
							}
						}
						cancel()
						if err != nil && !isCtxErr(err) {
							t.Errorf("op: %v", err)
						}
					}
				}()
			}
			waitDone(t, wgDone(&wg), "workers")
			check := func() {
				for _, n := range names {
					for _, k := range stressKeys {
						v, err := l.Value(context.Background(), n, k)
						if err != nil {
							t.Fatal(err)
						}
						inRange(n, k, v.Value)
					}
				}
			}
			check()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if durable {
				l = open(t, opts)
				check()
				l.Close()
			}
		})
	}
}

// Reservations under contention (sharded over partitions, unsharded, in
// LimitAll and LimitMany): the granted total never exceeds capacity +
// maxReserved, and no shard ever holds more debt than its share.
func TestConcurrencyReservationsNeverExceedMaxReserved(t *testing.T) {
	clk := newClock()
	limits := map[string]Config{
		"r":  {Kind: TokenBucket, Rate: 10, Period: time.Hour, Capacity: 10, MaxReserved: 6},
		"r2": {Kind: TokenBucket, Rate: 20, Period: time.Hour, Capacity: 20, MaxReserved: 10, Shards: 2},
		"r3": {Kind: FixedWindow, Rate: 30, Period: 24 * time.Hour, Capacity: 30, MaxReserved: 9, Shards: 3, Start: t0},
	}
	l := open(t, Options{Now: clk.Now, Limits: limits, Partitions: 4})
	names := []string{"r", "r2", "r3"}
	var mu sync.Mutex
	granted := map[string]float64{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 3))
			pick := func() Request {
				return Request{Name: names[r.IntN(len(names))], Count: float64(1 + r.IntN(3)), Reserve: r.IntN(2) == 0}
			}
			for range 150 {
				rs := []Request{pick()}
				var oks []bool
				switch r.IntN(3) {
				case 0:
					st, err := l.Limit(context.Background(), rs[0])
					if err != nil {
						t.Error(err)
						return
					}
					oks = []bool{st.OK}
				case 1:
					rs = append(rs, pick())
					if rs[1].Name == rs[0].Name {
						rs = rs[:1]
					}
					st, err := l.LimitAll(context.Background(), rs...)
					if err != nil && !errors.Is(err, ErrInvalidCount) {
						t.Error(err)
						return
					}
					for range rs {
						oks = append(oks, err == nil && st.OK)
					}
				default:
					rs = append(rs, pick(), pick())
					for _, d := range l.LimitMany(context.Background(), rs, nil) {
						if d.Err != nil {
							t.Error(d.Err)
							return
						}
						oks = append(oks, d.OK)
					}
				}
				mu.Lock()
				for i, ok := range oks {
					if ok {
						granted[rs[i].Name] += rs[i].Count
					}
				}
				mu.Unlock()
			}
		}()
	}
	waitDone(t, wgDone(&wg), "workers")
	for _, n := range names {
		cfg := limits[n]
		if g := granted[n]; g > cfg.Capacity+cfg.MaxReserved+1e-9 {
			t.Errorf("%s: granted %v > capacity %v + maxReserved %v", n, g, cfg.Capacity, cfg.MaxReserved)
		}
		shards := max(cfg.Shards, 1)
		for s, v := range shardValues(t, l, n, "") {
			if v < -cfg.MaxReserved/float64(shards)-1e-9 {
				t.Errorf("%s shard %d: value %v below -%v", n, s, v, cfg.MaxReserved/float64(shards))
			}
		}
		v, _ := l.Value(context.Background(), n, "")
		if spent := cfg.Capacity - v.Value; spent-granted[n] > 1e-9 || granted[n]-spent > 1e-9 {
			t.Errorf("%s: spent %v, granted %v", n, spent, granted[n])
		}
	}
}

// 64 callers of Limit, LimitAll and LimitMany on shared buckets (sharded,
// fixed window, reservations) and a reader checking no bucket is ever
// below its floor: with a frozen clock each bucket ends at exactly its
// capacity minus the acknowledged grants.
func TestConcurrentExactAccounting(t *testing.T) {
	limits := map[string]Config{
		"tb":  withCap(tb(10, M), 600),
		"fw":  withCap(fw(10, M, t0), 400),
		"sh":  withCap(withShards(tb(10, M), 4), 800),
		"sh2": withCap(withShards(fw(10, M, time.Time{}), 2), 300),
		"rs":  withMaxRes(withCap(tb(10, M), 200), 150),
	}
	buckets := []bucketRef{
		{"tb", ""}, {"tb", "k1"}, {"fw", ""}, {"fw", "k1"}, {"sh", ""}, {"sh", "k1"}, {"sh2", "k2"}, {"rs", ""},
	}
	capOf := func(name string) float64 { return limits[name].Capacity }
	clk := newClock()
	l := open(t, Options{Limits: limits, Now: clk.Now, Partitions: 4})

	const G = 64
	const opsPer = 300
	grants := make([][]float64, G) // per goroutine, per bucket
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readerErr atomic.Value
	// a reader that asserts no bucket is ever over-admitted while running
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, b := range buckets {
				v, err := l.Value(bg, b.name, b.key)
				if err != nil {
					readerErr.Store(fmt.Sprintf("Value(%s/%s): %v", b.name, b.key, err))
					return
				}
				floor := -limits[b.name].MaxReserved
				if v.Value < floor {
					readerErr.Store(fmt.Sprintf("Value(%s/%s) = %v below %v: over-admitted", b.name, b.key, v.Value, floor))
					return
				}
				if _, err := l.Check(bg, Request{Name: b.name, Key: b.key, Count: 1}); err != nil {
					readerErr.Store(fmt.Sprintf("Check: %v", err))
					return
				}
			}
		}
	}()
	for g := 0; g < G; g++ {
		grants[g] = make([]float64, len(buckets))
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 99))
			mine := grants[g]
			pick := func() (int, Request) {
				i := rng.IntN(len(buckets))
				b := buckets[i]
				r := Request{Name: b.name, Key: b.key, Count: float64(1 + rng.IntN(4))}
				if b.name == "rs" && rng.IntN(2) == 0 {
					r.Reserve = true
				}
				return i, r
			}
			var out []Decision
			for op := 0; op < opsPer; op++ {
				switch rng.IntN(3) {
				case 0:
					i, r := pick()
					st, err := l.Limit(bg, r)
					if err != nil {
						t.Errorf("Limit(%s): %v", reqString(r), err)
						return
					}
					if st.OK {
						mine[i] += r.Count
					}
				case 1:
					n := 2 + rng.IntN(3)
					idx := make([]int, 0, n)
					rs := make([]Request, 0, n)
					seen := map[int]bool{}
					for len(rs) < n {
						i, r := pick()
						if seen[i] {
							continue
						}
						seen[i] = true
						idx = append(idx, i)
						rs = append(rs, r)
					}
					st, err := l.LimitAll(bg, rs...)
					if err != nil {
						t.Errorf("LimitAll: %v", err)
						return
					}
					if st.OK {
						for j, i := range idx {
							mine[i] += rs[j].Count
						}
					}
				default:
					n := 1 + rng.IntN(4)
					idx := make([]int, n)
					rs := make([]Request, n)
					for j := range rs {
						idx[j], rs[j] = pick()
					}
					out = l.LimitMany(bg, rs, out)
					if len(out) != n {
						t.Errorf("LimitMany returned %d for %d", len(out), n)
						return
					}
					for j, d := range out {
						if d.Err != nil {
							t.Errorf("LimitMany: %v", d.Err)
							return
						}
						if d.OK {
							mine[idx[j]] += rs[j].Count
						}
					}
				}
			}
		}(g)
	}
	waitDone(t, wgDone(&wg), "concurrent Limit, LimitAll and LimitMany callers (deadlock?)")
	close(stop)
	rwg.Wait()
	if s, ok := readerErr.Load().(string); ok {
		t.Error(s)
	}
	for i, b := range buckets {
		sum := 0.0
		for g := 0; g < G; g++ {
			sum += grants[g][i]
		}
		bound := capOf(b.name) + limits[b.name].MaxReserved
		if sum > bound {
			t.Errorf("%s/%q: granted %v, bound %v: over-admitted", b.name, b.key, sum, bound)
		}
		v := value(t, l, b.name, b.key)
		if v.Value != capOf(b.name)-sum {
			t.Errorf("%s/%q: Value = %v, want capacity %v - acknowledged grants %v = %v",
				b.name, b.key, v.Value, capOf(b.name), sum, capOf(b.name)-sum)
		}
		if sum == 0 {
			t.Errorf("%s/%q: nothing granted at all", b.name, b.key)
		}
	}
}

// A canceled caller must never block the limiter for the others.
func TestCancelUnderLoad(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"a": withCap(tb(1, H), 1e9), "s": withCap(withShards(tb(1, H), 4), 1e9)}})
	var wg sync.WaitGroup
	var grantedA, grantedS atomic.Int64
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				ctx, cancel := context.WithCancel(bg)
				if i%2 == 0 {
					cancel()
				}
				st, err := l.LimitAll(ctx, Request{Name: "a", Key: "k"}, Request{Name: "s", Key: "k"})
				cancel()
				if err == nil && st.OK {
					grantedA.Add(1)
					grantedS.Add(1)
				} else if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("unexpected error %v", err)
				}
				st, err = l.Limit(ctx, Request{Name: "a", Key: "k"}) // ctx is canceled now
				if err == nil || st.OK {
					t.Errorf("Limit with a canceled context = %+v, %v", st, err)
				}
			}
		}(g)
	}
	waitDone(t, wgDone(&wg), "the callers (a canceled caller blocking the others?)")
	// Grants acknowledged to callers must be counted; a caller whose context
	// ended while waiting may have been told "error" for a grant that was
	// still made (conservative), so the value may be lower, never higher.
	va := value(t, l, "a", "k").Value
	if want := 1e9 - float64(grantedA.Load()); va > want {
		t.Errorf("a: Value %v > capacity - acknowledged grants %v", va, want)
	}
	vs := value(t, l, "s", "k").Value
	if want := 1e9 - float64(grantedS.Load()); vs > want {
		t.Errorf("s: Value %v > capacity - acknowledged grants %v", vs, want)
	}
	if st := limit(t, l, Request{Name: "a", Key: "k"}); !st.OK {
		t.Errorf("limiter unusable after canceled callers: %+v", st)
	}
}

// Close while callers run Limit, LimitAll and LimitMany: Close succeeds,
// every later call of a caller is ErrClosed (never a grant), no caller
// hangs.
func TestCloseWhileBusy(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Limits: map[string]Config{"a": tb(1e6, M), "s": withShards(tb(1e6, M), 4)}, Now: clk.Now})
	var ops atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			closed := false
			for i := 0; i < 100000; i++ {
				var err error
				var st Status
				switch i % 3 {
				case 0:
					st, err = l.Limit(bg, Request{Name: "a", Key: fmt.Sprint(g % 4)})
				case 1:
					st, err = l.LimitAll(bg, Request{Name: "a", Key: "x"}, Request{Name: "s", Key: fmt.Sprint(i % 5)})
				default:
					ds := l.LimitMany(bg, []Request{{Name: "s", Key: "y"}}, nil)
					st, err = ds[0].Status, ds[0].Err
				}
				ops.Add(1)
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("unexpected error %v", err)
						return
					}
					closed = true
					if st.OK {
						t.Errorf("OK with ErrClosed")
					}
				} else if closed {
					t.Errorf("a call succeeded after an earlier call saw ErrClosed")
					return
				}
				if closed && i > 0 && i%50 == 0 {
					return
				}
			}
		}(g)
	}
	for deadline := time.Now().Add(hangTimeout); ops.Load() < 2000; {
		if time.Now().After(deadline) {
			t.Fatal("callers made no progress")
		}
		runtime.Gosched()
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close while busy: %v", err)
	}
	waitDone(t, wgDone(&wg), "the callers after Close")
}

// Every method concurrently with Close: no panic, no hang, only nil or
// ErrClosed; after Close everything is ErrClosed (Stats still works).
func TestEverythingConcurrentWithClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		clk := newClock()
		sh := tb(1e6, time.Minute)
		sh.Shards = 4
		dir := ""
		if round%2 == 1 {
			dir = filepath.Join(t.TempDir(), "rl.db")
		}
		l := open(t, Options{Path: dir, Now: clk.Now, Limits: map[string]Config{"a": tb(1e6, time.Minute), "sh": sh}})
		ctx := context.Background()
		inline := fw(1e6, time.Minute, time.Time{})
		var wg sync.WaitGroup
		errc := make(chan error, 1000)
		start := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				<-start
				for i := 0; i < 200; i++ {
					var err error
					key := fmt.Sprint(i % 7)
					switch (g + i) % 9 {
					case 0:
						_, err = l.Limit(ctx, Request{Name: "a", Key: key})
					case 1:
						_, err = l.Check(ctx, Request{Name: "sh", Key: key})
					case 2:
						err = l.Reset(ctx, "sh", key)
					case 3:
						_, err = l.Value(ctx, "sh", key)
					case 4:
						err = l.Credit(ctx, "sh", key, 3)
					case 5:
						_, err = l.LimitAll(ctx, Request{Name: "a", Key: key}, Request{Name: "sh", Key: key}, Request{Name: "i", Key: key, Config: &inline})
					case 6:
						ds := l.LimitMany(ctx, []Request{{Name: "sh", Key: key}, {Name: "a", Key: key}}, nil)
						err = errors.Join(ds[0].Err, ds[1].Err)
					case 7:
						err = l.Snapshot()
					default:
						_ = l.Stats()
						err = l.Credit(ctx, "a", key, 1)
					}
					if err != nil && !errors.Is(err, ErrClosed) {
						select {
						case errc <- err:
						default:
						}
					}
				}
			}(g)
		}
		close(start)
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Errorf("round %d: error other than ErrClosed: %v", round, err)
		}
		if err := l.Credit(ctx, "a", "k", 1); !errors.Is(err, ErrClosed) {
			t.Errorf("Credit after Close: %v", err)
		}
		if err := l.Snapshot(); !errors.Is(err, ErrClosed) {
			t.Errorf("Snapshot after Close: %v", err)
		}
		_ = l.Stats()
	}
}
