package ratelimit

// Concurrency of the public API (from an independent review; its helpers
// start with cc): cancellation at any moment, Close racing everything,
// credits and resets racing two-phase holds, against ledgers of what was
// acknowledged. Frozen injected clock, t.TempDir() for durable mode, no
// sleeping: waits are channels or bounded Gosched loops that fail the test
// on a deadline. CI runs them both ways: ACTOR_QUEUE_ONLY=1 makes every
// message queue for the partitions' goroutines (see ccOpen).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// ccOpen opens a limiter without background work; under
// ACTOR_QUEUE_ONLY=1 (as in the actor tests) every message queues for the
// partitions' goroutines: no caller runs a partition inline.
func ccOpen(t testing.TB, opts Options) *Limiter {
	t.Helper()
	opts.SweepInterval, opts.SnapshotInterval, opts.SnapshotBytes = -1, -1, -1
	opts.queueOnly = os.Getenv("ACTOR_QUEUE_ONLY") == "1"
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

var ccT0 = time.Date(2026, time.February, 3, 4, 5, 6, 0, time.UTC)

const ccHang = 60 * time.Second

func ccWaitDone(t testing.TB, done <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(ccHang)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		t.Fatalf("hang: waited %v for %s", ccHang, what)
	}
}

func ccTB(capacity float64, shards int) Config {
	// refills capacity per hour: nothing on a frozen clock
	return Config{Kind: TokenBucket, Rate: capacity, Period: time.Hour, Capacity: capacity, Shards: shards}
}

func ccFW(capacity float64, shards int) Config {
	return Config{Kind: FixedWindow, Rate: capacity, Period: 24 * time.Hour, Capacity: capacity, Shards: shards,
		Start: ccT0.Add(-time.Hour)}
}

type ccRef struct{ name, key string }

// ccLedger counts, per bucket, what was acknowledged and what may have
// been taken without acknowledgement (a call whose context ended).
type ccLedger struct {
	mu    sync.Mutex
	acked map[ccRef]float64
	maybe map[ccRef]float64
}

func ccNewLedger() *ccLedger {
	return &ccLedger{acked: map[ccRef]float64{}, maybe: map[ccRef]float64{}}
}

func (l *ccLedger) add(m map[ccRef]float64, r Request, n float64) {
	l.mu.Lock()
	m[ccRef{r.Name, r.Key}] += n
	l.mu.Unlock()
}

func ccCount(r Request) float64 {
	if r.Count == 0 {
		return 1
	}
	return r.Count
}

func ccIsCtx(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// ccCtx returns a context that is background, already cancelled, or
// cancelled concurrently at a random moment.
func ccCtx(r *rand.Rand) (context.Context, func()) {
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

var ccLimits = map[string]Config{
	"u":  ccTB(40, 1),
	"f":  ccFW(30, 1),
	"s":  ccTB(64, 4),
	"s2": ccTB(24, 2),
	"fs": ccFW(48, 3),
}

var ccKeys = []string{"", "a", "b", "c"}

// ccStress runs workers issuing Limit, LimitAll (with repeats),
// LimitMany (with repeats, sharded and invalid requests), Check and Value
// under random cancellation, then checks every bucket: what it lost is at
// least what was acknowledged and at most that plus what callers gave up
// on, and never more than its capacity (frozen clock).
func ccStress(t *testing.T, l *Limiter, workers, iters int, led *ccLedger, seed uint64) {
	names := []string{"u", "f", "s", "s2", "fs"}
	pick := func(r *rand.Rand) Request {
		n := names[r.IntN(len(names))]
		return Request{Name: n, Key: ccKeys[r.IntN(len(ccKeys))], Count: float64(1 + r.IntN(3))}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			var out []Decision
			for range iters {
				ctx, cancel := ccCtx(r)
				switch r.IntN(5) {
				case 0:
					req := pick(r)
					st, err := l.Limit(ctx, req)
					switch {
					case err == nil && st.OK:
						led.add(led.acked, req, ccCount(req))
					case ccIsCtx(err):
						led.add(led.maybe, req, ccCount(req))
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
							led.add(led.acked, q, ccCount(q))
						}
					case err == nil:
					case ccIsCtx(err):
						for _, q := range rs {
							led.add(led.maybe, q, ccCount(q))
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
							led.add(led.acked, q, ccCount(q))
						case d.Err == nil:
						case ccIsCtx(d.Err):
							led.add(led.maybe, q, ccCount(q))
						default:
							t.Errorf("LimitMany %d: %v", i, d.Err)
						}
					}
				case 3:
					req := pick(r)
					if _, err := l.Check(ctx, req); err != nil && !ccIsCtx(err) {
						t.Errorf("Check: %v", err)
					}
				default:
					req := pick(r)
					v, err := l.Value(ctx, req.Name, req.Key)
					if err != nil && !ccIsCtx(err) {
						t.Errorf("Value: %v", err)
					} else if err == nil && v.Value < -1e-9 {
						t.Errorf("Value %s/%q = %v: over-admitted", req.Name, req.Key, v.Value)
					}
				}
				cancel()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	ccWaitDone(t, done, "the stress workers")
}

// ccCheckLedger compares every bucket's loss with the ledger.
func ccCheckLedger(t *testing.T, l *Limiter, led *ccLedger, durable bool) {
	t.Helper()
	var a, m float64
	for _, v := range led.acked {
		a += v
	}
	for _, v := range led.maybe {
		m += v
	}
	t.Logf("acknowledged %v tokens, %v more asked by callers who gave up", a, m)
	for name, cfg := range ccLimits {
		for _, key := range ccKeys {
			v, err := l.Value(context.Background(), name, key)
			if err != nil {
				t.Fatalf("Value: %v", err)
			}
			ref := ccRef{name, key}
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

func TestConcurrencyStressMixedCancel(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			for round := range 3 {
				clk := ratelimittest.NewClock(ccT0)
				path := ""
				if durable {
					path = filepath.Join(t.TempDir(), "rl.db")
				}
				opts := Options{Path: path, Now: clk.Now, Limits: ccLimits, Partitions: 2 + 3*round}
				l := ccOpen(t, opts)
				led := ccNewLedger()
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
				ccStress(t, l, 16, 300, led, uint64(round))
				close(stop)
				ccWaitDone(t, janitor, "the janitor")
				ccCheckLedger(t, l, led, durable)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if durable {
					l = ccOpen(t, opts)
					ccCheckLedger(t, l, led, true)
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
			clk := ratelimittest.NewClock(ccT0)
			limits := map[string]Config{
				"tb": {Kind: TokenBucket, Rate: 10, Period: time.Second, Capacity: 10},
				"ts": {Kind: TokenBucket, Rate: 12, Period: time.Second, Capacity: 12, Shards: 3},
				"t2": {Kind: TokenBucket, Rate: 8, Period: time.Second, Capacity: 8, Shards: 2},
				"fw": {Kind: FixedWindow, Rate: 10, Period: 100 * time.Millisecond, Capacity: 10, Start: ccT0},
			}
			path := ""
			if durable {
				path = filepath.Join(t.TempDir(), "rl.db")
			}
			l := ccOpen(t, Options{Path: path, Now: clk.Now, Limits: limits, Partitions: 5})
			defer l.Close()
			names := []string{"tb", "ts", "t2", "fw"}
			keys := []string{"x", "y"}
			var mu sync.Mutex
			granted := map[ccRef]float64{}
			add := func(r Request) {
				mu.Lock()
				granted[ccRef{r.Name, r.Key}] += ccCount(r)
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
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			ccWaitDone(t, done, "workers")
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
					g := granted[ccRef{n, k}]
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

// A bucket dropped as full (a sweep, here the memory-mode Snapshot; a
// credit that fills it does the same) at a later clock reading came back
// fresh, with an earlier ts, when the clock then stepped back: the refill
// between the two readings was counted twice. SEMANTICS: a clock going
// back mints nothing, and over any span granted <= capacity + rate *
// elapsed. A partition now holds a clock that went back at its latest
// reading.
func TestClockBackAfterDropMintsNothing(t *testing.T) {
	ctx := context.Background()
	for _, drop := range []string{"sweep", "credit"} {
		t.Run(drop, func(t *testing.T) {
			clk := ratelimittest.NewClock(ccT0)
			l, err := Open(Options{Now: clk.Now, Limits: map[string]Config{
				"t": {Kind: TokenBucket, Rate: 10, Period: time.Minute}}})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			granted := 0.0
			take := func() {
				st, err := l.Limit(ctx, Request{Name: "t", Count: 10})
				if err != nil {
					t.Fatal(err)
				}
				if st.OK {
					granted += 10
				}
			}
			take() // t0: 10 granted, bucket empty
			clk.Set(ccT0.Add(60 * time.Second))
			if drop == "sweep" {
				if err := l.Snapshot(); err != nil { // full again: dropped
					t.Fatal(err)
				}
			} else if err := l.Credit(ctx, "t", "", 1); err != nil { // capped: full, dropped
				t.Fatal(err)
			}
			clk.Set(ccT0.Add(1 * time.Second)) // the clock steps back
			take()
			clk.Set(ccT0.Add(61 * time.Second))
			take()
			bound := 10 + 10*61.0/60 // capacity + rate * elapsed over [t0, t0+61s]
			if granted > bound {
				t.Errorf("granted %v tokens within [t0, t0+61s] of clock time, bound %.2f: a clock step back minted tokens", granted, bound)
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
		clk := ratelimittest.NewClock(ccT0)
		opts := Options{Path: path, Now: clk.Now, Limits: ccLimits, Partitions: 3 + round}
		l := ccOpen(t, opts)
		led := ccNewLedger()
		names := []string{"u", "f", "s", "s2", "fs"}
		var ops atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				pick := func() Request {
					return Request{Name: names[r.IntN(len(names))], Key: ccKeys[r.IntN(len(ccKeys))], Count: float64(1 + r.IntN(2))}
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
							led.add(led.acked, q, ccCount(q))
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
								led.add(led.acked, q, ccCount(q))
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
								led.add(led.acked, rs[i], ccCount(rs[i]))
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
		for deadline := time.Now().Add(ccHang); ops.Load() < int64(200+100*round); {
			if time.Now().After(deadline) {
				t.Fatal("workers made no progress")
			}
			runtime.Gosched()
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		ccWaitDone(t, done, "workers after Close")
		l = ccOpen(t, opts)
		for name, cfg := range ccLimits {
			for _, key := range ccKeys {
				v, err := l.Value(context.Background(), name, key)
				if err != nil {
					t.Fatal(err)
				}
				spent, a := cfg.Capacity-v.Value, led.acked[ccRef{name, key}]
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
			clk := ratelimittest.NewClock(ccT0)
			path := ""
			if durable {
				path = filepath.Join(t.TempDir(), "rl.db")
			}
			opts := Options{Path: path, Now: clk.Now, Limits: ccLimits, Partitions: 4}
			l := ccOpen(t, opts)
			names := []string{"u", "f", "s", "s2", "fs"}
			inRange := func(name, key string, v float64) {
				if c := ccLimits[name].Capacity; v < -1e-9 || v > c+1e-9 {
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
						return Request{Name: names[r.IntN(len(names))], Key: ccKeys[r.IntN(len(ccKeys))], Count: float64(1 + r.IntN(4))}
					}
					for range 250 {
						ctx, cancel := ccCtx(r)
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
						if err != nil && !ccIsCtx(err) {
							t.Errorf("op: %v", err)
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			ccWaitDone(t, done, "workers")
			check := func() {
				for _, n := range names {
					for _, k := range ccKeys {
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
				l = ccOpen(t, opts)
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
	clk := ratelimittest.NewClock(ccT0)
	limits := map[string]Config{
		"r":  {Kind: TokenBucket, Rate: 10, Period: time.Hour, Capacity: 10, MaxReserved: 6},
		"r2": {Kind: TokenBucket, Rate: 20, Period: time.Hour, Capacity: 20, MaxReserved: 10, Shards: 2},
		"r3": {Kind: FixedWindow, Rate: 30, Period: 24 * time.Hour, Capacity: 30, MaxReserved: 9, Shards: 3, Start: ccT0},
	}
	l := ccOpen(t, Options{Now: clk.Now, Limits: limits, Partitions: 4})
	defer l.Close()
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
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	ccWaitDone(t, done, "workers")
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
