package ratelimit

// Model-based tests: SEMANTICS.md's arithmetic as an independent model,
// against scripted and fuzzed requests, configs and clock moves.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// model is SEMANTICS.md's arithmetic, with integer-nanosecond times.
type model struct {
	kind     Kind
	rate     float64
	period   int64
	capacity float64
	maxRes   float64
	start    int64
	present  bool
	value    float64
	ts       int64
}

// floorDiv is a / b rounded down.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func (m *model) project(now int64) (float64, int64) {
	if m.kind == TokenBucket {
		if !m.present {
			return m.capacity, now
		}
		el := now - m.ts
		ts := now
		if el < 0 {
			el, ts = 0, m.ts
		}
		return math.Min(m.value+float64(el)*m.rate/float64(m.period), m.capacity), ts
	}
	if !m.present {
		return m.capacity, m.start + floorDiv(now-m.start, m.period)*m.period
	}
	k := int64(0)
	if now > m.ts {
		k = (now - m.ts) / m.period
	}
	return math.Min(m.value+m.rate*float64(k), m.capacity), m.ts + k*m.period
}

// limit returns ok, retryAfter, an alternative acceptable retryAfter,
// whether the count is invalid, and whether the decision is too close to a
// float boundary to be compared exactly.
//
// The alternative: a reservation denied for exceeding maxReserved gets, by
// SEMANTICS.md's formula, the wait until the debt is repaid (-value / r);
// Status.RetryAfter promises the earliest wait that can succeed, which for the
// same reservation is the wait until the debt fits maxReserved. Both are
// accepted (neither is early for a plain retry of the same request).
func (m *model) limit(now int64, count float64, reserve bool) (ok bool, retry, alt int64, invalid, fuzzy bool) {
	if count == 0 {
		count = 1
	}
	if count > m.capacity && !reserve || reserve && m.maxRes > 0 && count > m.capacity+m.maxRes {
		return false, 0, 0, true, false
	}
	v, ts := m.project(now)
	v -= count
	fuzzy = math.Abs(v) < 1e-6
	if v < 0 {
		if m.kind == TokenBucket {
			retry = int64(math.Ceil(-v * float64(m.period) / m.rate))
		} else {
			q := -v / m.rate
			if math.Abs(q-math.Round(q)) < 1e-9 {
				fuzzy = true
			}
			retry = ts + m.period*int64(math.Ceil(q)) - now
		}
	}
	alt = retry
	if v < 0 && (!reserve || m.maxRes > 0 && -v > m.maxRes) {
		if reserve {
			if math.Abs(-v-m.maxRes) < 1e-6 {
				fuzzy = true
			}
			over := -v - m.maxRes
			if m.kind == TokenBucket {
				alt = int64(math.Ceil(over * float64(m.period) / m.rate))
			} else {
				q := over / m.rate
				if math.Abs(q-math.Round(q)) < 1e-9 {
					fuzzy = true
				}
				alt = ts + m.period*int64(math.Ceil(q)) - now
			}
		}
		return false, retry, alt, false, fuzzy
	}
	m.present, m.value, m.ts = true, v, ts
	return true, retry, alt, false, fuzzy
}

// 300 random scripts (config, counts, reservations, clock moves back and
// forth) compared step by step with the model: OK, RetryAfter, Value, TS.
func TestModelScripts(t *testing.T) {
	rates := []float64{1, 2.5, 7, 10, 0.3, 100, 13}
	periods := []time.Duration{S, 3 * S, 7 * S, M, 1100 * time.Millisecond, H, 1e9 + 1}
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		kind := TokenBucket
		if seed%2 == 0 {
			kind = FixedWindow
		}
		cfg := Config{Kind: kind, Rate: rates[rng.IntN(len(rates))], Period: periods[rng.IntN(len(periods))]}
		if rng.IntN(2) == 0 {
			cfg.Capacity = cfg.Rate * float64(1+rng.IntN(3))
		}
		if rng.IntN(2) == 0 {
			cfg.MaxReserved = cfg.Rate * float64(1+rng.IntN(2))
		}
		if kind == FixedWindow {
			cfg.Start = t0.Add(time.Duration(rng.Int64N(int64(10 * H))))
		}
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			capacity := cfg.Capacity
			if capacity == 0 {
				capacity = cfg.Rate
			}
			m := &model{kind: kind, rate: cfg.Rate, period: int64(cfg.Period), capacity: capacity,
				maxRes: cfg.MaxReserved, start: cfg.Start.UnixNano()}
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"m": cfg}})
			now := t0.UnixNano()
			for i := 0; i < 40; i++ {
				switch x := rng.IntN(10); {
				case x < 3: // same instant
				case x < 9:
					now += rng.Int64N(2 * int64(cfg.Period))
				default: // the clock goes backwards
					now -= rng.Int64N(int64(cfg.Period))
				}
				clk.Set(time.Unix(0, now))
				counts := []float64{0, 1, 2, 0.5, capacity, capacity * 0.7, capacity + 1, capacity * 1.5}
				count := counts[rng.IntN(len(counts))]
				reserve := rng.IntN(4) == 0
				behind := now < m.ts && m.present
				prev := *m
				wantOK, wantRetry, altRetry, wantInvalid, fuzzy := m.limit(now, count, reserve)
				r := Request{Name: "m", Count: count, Reserve: reserve}
				st, err := l.Limit(bg, r)
				ctxt := fmt.Sprintf("step %d at t0%+v, cfg %+v, %s", i, time.Duration(now-t0.UnixNano()), cfg, reqString(r))
				if wantInvalid {
					if !errors.Is(err, ErrInvalidCount) {
						t.Fatalf("%s: err = %v, want ErrInvalidCount", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: unexpected error %v", ctxt, err)
				} else if st.OK != wantOK {
					if !fuzzy {
						t.Fatalf("%s: OK = %v, want %v (status %+v)", ctxt, st.OK, wantOK, st)
					}
					// borderline in float: follow the library
					*m = prev
					if st.OK {
						m2, _ := l.Value(bg, "m", "")
						m.present, m.value, m.ts = true, m2.Value, m2.TS.UnixNano()
					}
					continue
				} else if !behind && !fuzzy {
					d := st.RetryAfter - time.Duration(wantRetry)
					tol := time.Duration(0)
					if kind == TokenBucket {
						tol = 2
					}
					d2 := st.RetryAfter - time.Duration(altRetry)
					if (d < -tol || d > tol) && (d2 < -tol || d2 > tol) {
						t.Fatalf("%s: RetryAfter = %v, want %v", ctxt, st.RetryAfter, time.Duration(wantRetry))
					}
				}
				v, err := l.Value(bg, "m", "")
				if err != nil {
					t.Fatalf("%s: Value: %v", ctxt, err)
				}
				wv, wts := m.project(now)
				if !valEq(v.Value, wv) && !(fuzzy && math.Abs(v.Value-wv) < 1e-6) {
					t.Fatalf("%s: Value = %v, want %v", ctxt, v.Value, wv)
				}
				if v.TS.UnixNano() != wts && !(m.present && now < m.ts) {
					t.Fatalf("%s: Value.TS = t0%+v, want t0%+v", ctxt, v.TS.Sub(t0), time.Duration(wts-t0.UnixNano()))
				}
				if err == nil && st.OK {
					m.value = v.Value // keep float noise from accumulating
				}
			}
		})
	}
}

// modelBucket is one bucket of SEMANTICS.md's model.
type modelBucket struct {
	present bool
	value   float64
	ts      int64
}

// keyedModel is SEMANTICS.md's arithmetic for one unsharded limit.
type keyedModel struct {
	kind     Kind
	rate     float64
	period   int64
	capacity float64
	maxRes   float64
	phase    map[string]int64 // a fresh fixed window's start, mod period, per key
	b        map[string]*modelBucket
	parts    int     // the limiter's Options.Partitions
	dropped  []int64 // per partition: the latest reading or ts at which a full bucket was dropped
}

// freshAt is when an absent bucket of key is fresh: now, or, after the
// clock went back, the latest reading or ts at which its partition
// dropped a full bucket (it may have been this one: SEMANTICS.md).
func (m *keyedModel) freshAt(key string, now int64) int64 {
	return max(now, m.dropped[bucket.Hash("x", key)%uint64(m.parts)])
}

func (m *keyedModel) project(key string, now int64) (float64, int64) {
	b := m.b[key]
	if m.kind == TokenBucket {
		if !b.present {
			return m.capacity, m.freshAt(key, now)
		}
		el, ts := now-b.ts, now
		if el < 0 {
			el, ts = 0, b.ts
		}
		return math.Min(b.value+float64(el)*m.rate/float64(m.period), m.capacity), ts
	}
	if !b.present {
		ph, at := m.phase[key], m.freshAt(key, now)
		return m.capacity, ph + floorDiv(at-ph, m.period)*m.period
	}
	k := int64(0)
	if now > b.ts {
		k = (now - b.ts) / m.period
	}
	return math.Min(b.value+m.rate*float64(k), m.capacity), b.ts + k*m.period
}

// store writes a granted or credited state at now; a full bucket is the
// same as an absent one (SEMANTICS.md), so a write that leaves it full
// removes it.
func (m *keyedModel) store(key string, v float64, ts, now int64) {
	if v >= m.capacity {
		*m.b[key] = modelBucket{}
		d := &m.dropped[bucket.Hash("x", key)%uint64(m.parts)]
		*d = max(*d, now, ts)
		return
	}
	*m.b[key] = modelBucket{present: true, value: v, ts: ts}
}

// countErr is the model's verdict on a count: nil or ErrInvalidCount.
func (m *keyedModel) countErr(count float64, reserve bool) (float64, error) {
	if count == 0 {
		count = 1
	}
	if math.IsNaN(count) || math.IsInf(count, 0) || count < 0 {
		return count, ErrInvalidCount
	}
	most := m.capacity
	if reserve {
		if m.maxRes > 0 {
			most += m.maxRes
		} else {
			most = math.Inf(1)
		}
	}
	if count > most {
		return count, ErrInvalidCount
	}
	return count, nil
}

// take returns the decision and the state a grant would store.
func (m *keyedModel) take(key string, now int64, count float64, reserve bool) (ok bool, v float64, ts int64) {
	v, ts = m.project(key, now)
	v -= count
	allowed := 0.0
	if reserve {
		allowed = math.Inf(1)
		if m.maxRes > 0 {
			allowed = m.maxRes
		}
	}
	return v >= -allowed, v, ts
}

// opReader reads a fuzzer's ops: bytes, integers and counts (mostly
// special values); it reads zeros past the end.
type opReader struct{ b []byte }

func (r *opReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *opReader) u64() uint64 {
	var x uint64
	for i := 0; i < 8; i++ {
		x = x<<8 | uint64(r.byte())
	}
	return x
}

func (r *opReader) count(m *keyedModel) float64 {
	c, rate := m.capacity, m.rate
	specials := []float64{0, math.Copysign(0, -1), 1, 0.5, 2, 3, c, c * 0.7, c / 3, c + 1, math.Nextafter(c, math.Inf(1)),
		c + m.maxRes, math.Nextafter(c+m.maxRes, math.Inf(1)), 1e-300, 5e-324, -1, -5e-324, math.NaN(), math.Inf(1),
		math.Inf(-1), math.MaxFloat64, rate, rate / 3, c * 2, 1e9}
	b := r.byte()
	if b < 224 {
		return specials[int(b)%len(specials)]
	}
	return math.Float64frombits(r.u64())
}

// fuzzVerbose logs the model before every step of FuzzModel.
var fuzzVerbose = false

const (
	fuzzCentury = int64(100 * 365 * 24 * time.Hour)
	fuzzMaxWait = time.Duration(1) << 62
)

var (
	fuzzLo = time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	fuzzHi = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
)

// fuzzConfig builds a config from fuzzed fields and reports whether it
// is valid by the documented rules.
func fuzzConfig(kindB uint8, rate float64, period int64, capacity, maxRes float64, startOff int64) (Config, bool) {
	c := Config{Kind: TokenBucket, Rate: rate, Capacity: capacity, MaxReserved: maxRes}
	if kindB&1 == 1 {
		c.Kind = FixedWindow
	}
	if kindB%16 == 15 {
		c.Kind = Kind(int(kindB) - 128)
	}
	if period > 0 {
		period = 1 + (period-1)%fuzzCentury // clear of int64 overflow (TestClockJumpsOverCenturies covers that)
	}
	c.Period = time.Duration(period)
	if kindB&2 == 2 {
		c.Shards = 1
	}
	if (c.Kind == FixedWindow && startOff != 0) || kindB&0x80 != 0 {
		c.Start = t0.Add(time.Duration(startOff % fuzzCentury))
	}
	fin := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	valid := (c.Kind == TokenBucket || c.Kind == FixedWindow) && fin(rate) && rate > 0 && period > 0 &&
		fin(capacity) && capacity >= 0 && fin(maxRes) && maxRes >= 0 && !(c.Kind == TokenBucket && !c.Start.IsZero())
	return c, valid
}

// FuzzModel runs a script of Limit, Check, Credit, Reset, Value,
// LimitAll, LimitMany and clock moves (forwards, backwards, decades) on one
// unsharded limit with fuzzed config and counts, and compares every answer
// bit for bit with SEMANTICS.md's arithmetic; denials must write nothing,
// errors must be sentinels that write nothing, RetryAfter must be the
// earliest wait that succeeds (never early), Check must equal Limit.
//
// Kept out of regions other tests pin: reservations whose debt would exceed
// 1e300 (TestDebtBeyondFloat64Refused), clocks outside 1971..2099
// (TestValueTSBefore1970, TestClockJumpsOverCenturies).
func FuzzModel(f *testing.F) {
	f.Add(uint8(0), 10.0, int64(time.Minute), 0.0, 0.0, int64(0), []byte{0, 6, 1, 7, 1, 5, 4, 0, 2, 2, 9, 1, 0, 17, 5})
	f.Add(uint8(1), 10.0, int64(time.Minute), 0.0, 5.0, int64(1), []byte{0, 6, 17, 3, 6, 0, 1, 7, 0, 11, 5, 12, 3, 2, 0, 3})
	f.Add(uint8(3), 2.5, int64(3*time.Second), 7.0, 1.0, int64(12345), []byte{5, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14})
	f.Add(uint8(2), 1e-9, int64(time.Hour), 0.0, 0.0, int64(0), []byte{0, 14, 0, 14, 1, 14, 8, 1, 3})
	f.Add(uint8(0), 1e308, int64(1), 0.0, 0.0, int64(0), []byte{0, 19, 8, 200, 0, 20, 7, 2, 0})
	f.Add(uint8(5), 0.3, int64(1100*time.Millisecond), 1e6, 1e6, int64(-777), []byte{0, 8, 9, 1, 8, 0, 12, 11, 200, 3})
	f.Add(uint8(15), math.NaN(), int64(-1), -1.0, math.Inf(1), int64(0), []byte{0})
	f.Add(uint8(128), 1.0, int64(time.Second), 0.0, 0.0, int64(5), []byte{0})
	f.Fuzz(func(t *testing.T, kindB uint8, rate float64, period int64, capacity, maxRes float64, startOff int64, ops []byte) {
		ctx := context.Background()
		cfg, valid := fuzzConfig(kindB, rate, period, capacity, maxRes, startOff)
		clk := newClock()
		l, err := Open(Options{Now: clk.Now, Limits: map[string]Config{"x": cfg}, SweepInterval: -1, Partitions: 2})
		if !valid {
			if !errors.Is(err, ErrInvalidConfig) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open(%+v) = %v, want ErrInvalidConfig", cfg, err)
			}
			l := open(t, Options{Now: clk.Now})
			if _, err := l.Limit(ctx, Request{Name: "x", Config: &cfg}); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("inline %+v: %v, want ErrInvalidConfig", cfg, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Open(%+v): %v", cfg, err)
		}
		defer l.Close()
		m := &keyedModel{kind: cfg.Kind, rate: cfg.Rate, period: int64(cfg.Period), capacity: cfg.Capacity, maxRes: cfg.MaxReserved,
			phase: map[string]int64{}, b: map[string]*modelBucket{}, parts: 2, dropped: []int64{math.MinInt64, math.MinInt64}}
		if m.capacity == 0 {
			m.capacity = m.rate
		}
		keys := []string{"a", "b\x00\xff"}
		for _, k := range keys {
			m.b[k] = &modelBucket{}
			v := value(t, l, "x", k)
			if v.Value != m.capacity {
				t.Fatalf("fresh %q: value %v, want %v", k, v.Value, m.capacity)
			}
			if m.kind == FixedWindow {
				ts := v.TS.UnixNano()
				if ts > t0.UnixNano() || t0.UnixNano()-ts >= m.period {
					t.Fatalf("fresh %q: window start %v does not contain now", k, v.TS)
				}
				if !cfg.Start.IsZero() && (ts-cfg.Start.UnixNano())%m.period != 0 {
					t.Fatalf("fresh %q: window start %v not on the Start grid", k, v.TS)
				}
				m.phase[k] = ts
			}
		}
		now := t0.UnixNano()
		setClock := func(n int64) { clk.Set(time.Unix(0, n)) }
		// checkAll compares every key's Value with the model.
		checkAll := func(ctxt string) {
			t.Helper()
			for _, k := range keys {
				v := value(t, l, "x", k)
				wv, wts := m.project(k, now)
				if v.Value != wv && !(math.IsNaN(v.Value) && math.IsNaN(wv)) {
					t.Fatalf("%s: Value(%q) = %v, want %v", ctxt, k, v.Value, wv)
				}
				if v.TS.UnixNano() != wts {
					t.Fatalf("%s: Value(%q).TS = %d, want %d", ctxt, k, v.TS.UnixNano(), wts)
				}
			}
		}
		// inDebtRegion: a grant would leave debt beyond 1e300
		// (TestDebtBeyondFloat64Refused).
		inDebtRegion := func(key string, count float64) bool {
			v, _ := m.project(key, now)
			return v-count < -1e300
		}
		// verifyRetry checks that RetryAfter is the earliest wait that
		// succeeds, with Check and Value (neither writes).
		verifyRetry := func(ctxt string, r Request, st Status, wrote bool) {
			t.Helper()
			ra := int64(st.RetryAfter)
			if ra < 0 {
				t.Fatalf("%s: negative RetryAfter %v", ctxt, st.RetryAfter)
			}
			if st.OK && (ra == 0 || !wrote) {
				return // no wait, or a Check's reservation (nothing stored to watch)
			}
			if !st.OK && ra == 0 {
				t.Fatalf("%s: denied with RetryAfter 0", ctxt)
			}
			if st.RetryAfter >= fuzzMaxWait || now+ra > fuzzHi {
				return // saturated or beyond the fuzzed clock range
			}
			defer setClock(now)
			ok := func(at int64) bool {
				setClock(at)
				if st.OK { // a reservation: when the debt is repaid
					return value(t, l, "x", r.Key).Value >= 0
				}
				c, err := l.Check(ctx, r)
				if err != nil {
					t.Fatalf("%s: Check at +%d: %v", ctxt, at-now, err)
				}
				return c.OK
			}
			if !ok(now + ra) {
				t.Fatalf("%s: RetryAfter %v is early: not ok then", ctxt, st.RetryAfter)
			}
			// Earliest: exact while float64 resolves single nanoseconds of
			// refill; beyond that the refill moves in steps of many ns
			// (plateaus), so allow lateness of one part in a million.
			slack := max(1, ra/1_000_000)
			if m.kind == FixedWindow {
				slack = m.period + 1 // a window late at most (TestFixedWindowRetryAfterNotAWindowLate pins a case)
			}
			if ra >= slack && ok(now+ra-slack) {
				t.Fatalf("%s: RetryAfter %v is late: ok %dns earlier", ctxt, st.RetryAfter, slack)
			}
		}
		rd := &opReader{b: ops}
		for step := 0; step < 64 && len(rd.b) > 0; step++ {
			op := rd.byte() % 10
			key := keys[int(rd.byte())%2]
			ctxt := fmt.Sprintf("step %d op %d cfg %+v now t0%+v key %q", step, op, cfg, time.Duration(now-t0.UnixNano()), key)
			if fuzzVerbose {
				for _, k := range keys {
					v, ts := m.project(k, now)
					t.Logf("before step %d: model %q = %v @ t0%+d (present %v)", step, k, v, ts-t0.UnixNano(), m.b[k].present)
				}
			}
			switch op {
			case 0, 1, 2: // Limit (with Check first) or Check alone
				count := rd.count(m)
				reserve := rd.byte()%3 == 0
				r := Request{Name: "x", Key: key, Count: count, Reserve: reserve}
				ctxt += fmt.Sprintf(" count %v reserve %v", count, reserve)
				n, werr := m.countErr(count, reserve)
				if werr == nil && reserve && inDebtRegion(key, n) {
					continue
				}
				chk, cerr := l.Check(ctx, r)
				if op == 2 {
					if !errors.Is(cerr, werr) || werr == nil && cerr != nil {
						t.Fatalf("%s: Check err %v, want %v", ctxt, cerr, werr)
					}
					if cerr == nil {
						wok, _, _ := m.take(key, now, n, reserve)
						if chk.OK != wok {
							t.Fatalf("%s: Check OK %v, want %v", ctxt, chk.OK, wok)
						}
						verifyRetry(ctxt+" (check)", r, chk, false)
					}
					checkAll(ctxt)
					continue
				}
				st, err := l.Limit(ctx, r)
				if werr != nil {
					if !errors.Is(err, werr) || !errors.Is(cerr, werr) {
						t.Fatalf("%s: Limit err %v, Check err %v, want %v", ctxt, err, cerr, werr)
					}
					checkAll(ctxt)
					continue
				}
				if err != nil || cerr != nil {
					t.Fatalf("%s: Limit err %v, Check err %v", ctxt, err, cerr)
				}
				if st != chk && !(math.IsNaN(st.Remaining) && math.IsNaN(chk.Remaining)) {
					t.Fatalf("%s: Check said %+v, Limit said %+v", ctxt, chk, st)
				}
				wok, wv, wts := m.take(key, now, n, reserve)
				if st.OK != wok {
					t.Fatalf("%s: OK %v, want %v (status %+v)", ctxt, st.OK, wok, st)
				}
				left, _ := m.project(key, now)
				if wok {
					m.store(key, wv, wts, now)
					left = wv
				}
				if st.Remaining != left {
					t.Fatalf("%s: Remaining %v, want %v", ctxt, st.Remaining, left)
				}
				if st.Limit != "x" || st.ResetAfter < 0 {
					t.Fatalf("%s: status %+v", ctxt, st)
				}
				checkAll(ctxt)
				verifyRetry(ctxt, r, st, true)
			case 3: // Credit
				c := rd.count(m)
				ctxt += fmt.Sprintf(" credit %v", c)
				err := l.Credit(ctx, "x", key, c)
				if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
					if !errors.Is(err, ErrInvalidCount) {
						t.Fatalf("%s: %v, want ErrInvalidCount", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				} else if c != 0 {
					v, ts := m.project(key, now)
					m.store(key, math.Min(v+c, m.capacity), ts, now)
				}
				checkAll(ctxt)
			case 4: // Reset
				if err := l.Reset(ctx, "x", key); err != nil {
					t.Fatalf("%s: Reset: %v", ctxt, err)
				}
				*m.b[key] = modelBucket{}
				checkAll(ctxt)
			case 5: // LimitAll over both keys (and sometimes an unknown limit)
				c1, c2 := rd.count(m), rd.count(m)
				res := rd.byte()
				r1 := Request{Name: "x", Key: keys[0], Count: c1, Reserve: res&1 != 0}
				r2 := Request{Name: "x", Key: keys[1], Count: c2, Reserve: res&2 != 0}
				rs := []Request{r1, r2}
				if res&4 != 0 {
					rs = []Request{r2, r1}
				}
				if res&8 != 0 {
					rs = append(rs, Request{Name: "nope"})
				}
				ctxt += fmt.Sprintf(" LimitAll %v", rs)
				var werr error
				var ns []float64
				for _, r := range rs {
					if r.Name == "nope" {
						if werr == nil {
							werr = ErrUnknownLimit
						}
						continue
					}
					n, e := m.countErr(r.Count, r.Reserve)
					if e == nil && r.Reserve && inDebtRegion(r.Key, n) {
						werr = errors.New("skip")
					}
					if werr == nil {
						werr = e
					}
					ns = append(ns, n)
				}
				if werr != nil && werr.Error() == "skip" {
					continue
				}
				st, err := l.LimitAll(ctx, rs...)
				if werr != nil {
					if !errors.Is(err, werr) {
						t.Fatalf("%s: err %v, want %v", ctxt, err, werr)
					}
					checkAll(ctxt)
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				}
				all := true
				type upd struct {
					key string
					v   float64
					ts  int64
				}
				var us []upd
				for i, r := range rs {
					ok, v, ts := m.take(r.Key, now, ns[i], r.Reserve)
					all = all && ok
					us = append(us, upd{r.Key, v, ts})
				}
				if st.OK != all {
					t.Fatalf("%s: OK %v, want %v (%+v)", ctxt, st.OK, all, st)
				}
				if !st.OK && st.RetryAfter <= 0 {
					t.Fatalf("%s: denied with RetryAfter %v", ctxt, st.RetryAfter)
				}
				if all {
					for _, u := range us {
						m.store(u.key, u.v, u.ts, now)
					}
				}
				checkAll(ctxt)
			case 6: // LimitMany: up to 4 requests, each decided alone, in order
				nreq := 1 + int(rd.byte()%4)
				var rs []Request
				for i := 0; i < nreq; i++ {
					b := rd.byte()
					r := Request{Name: "x", Key: keys[int(b)%2], Count: rd.count(m), Reserve: b&2 != 0}
					if b&4 != 0 && b&8 != 0 {
						r.Name = "nope"
					}
					rs = append(rs, r)
				}
				ctxt += fmt.Sprintf(" LimitMany %v", rs)
				skip := false
				for _, r := range rs {
					if n, e := m.countErr(r.Count, r.Reserve); e == nil && r.Reserve && r.Name == "x" && m.b[r.Key].value-n < -1e299 {
						skip = true
					}
				}
				if skip {
					continue
				}
				ds := l.LimitMany(ctx, rs, nil)
				if len(ds) != len(rs) {
					t.Fatalf("%s: %d decisions", ctxt, len(ds))
				}
				for i, r := range rs {
					if r.Name == "nope" {
						if !errors.Is(ds[i].Err, ErrUnknownLimit) {
							t.Fatalf("%s: decision %d: %+v", ctxt, i, ds[i])
						}
						continue
					}
					n, e := m.countErr(r.Count, r.Reserve)
					if e != nil {
						if !errors.Is(ds[i].Err, e) {
							t.Fatalf("%s: decision %d: %+v, want %v", ctxt, i, ds[i], e)
						}
						continue
					}
					if inDebtRegion(r.Key, n) && r.Reserve {
						t.Skip("debt region")
					}
					ok, v, ts := m.take(r.Key, now, n, r.Reserve)
					if ds[i].Err != nil || ds[i].OK != ok {
						t.Fatalf("%s: decision %d: %+v, want OK %v", ctxt, i, ds[i], ok)
					}
					if ok {
						m.store(r.Key, v, ts, now)
					}
				}
				checkAll(ctxt)
			default: // move the clock
				var d int64
				switch rd.byte() % 5 {
				case 0:
					d = int64(rd.byte()) * (m.period/16 + 1)
				case 1:
					d = -int64(rd.byte()) * (m.period/64 + 1)
				case 2:
					d = int64(rd.u64() % uint64(10*365*24*time.Hour))
				case 3:
					d = -int64(rd.u64() % uint64(10*365*24*time.Hour))
				default:
					d = int64(rd.byte()) // a few ns
				}
				now = min(max(now+d, fuzzLo), fuzzHi)
				setClock(now)
				checkAll(ctxt + fmt.Sprintf(" clock %+d", d))
			}
		}
	})
}

// FuzzSharded drives a sharded limit (2..8 shards, integer per-shard
// rate and capacity) with fuzzed requests and clock moves and checks the
// accounting guarantees rather than the random shard choice: with the
// clock frozen, Value is exactly capacity minus the sum of acknowledged
// grants plus credits (capped); denials and errors change nothing; a
// request above two shards' worth is ErrInvalidCount; when time passes the
// value rises by at most the refill; it never exceeds capacity nor falls
// below -maxReserved.
func FuzzSharded(f *testing.F) {
	f.Add(uint8(0), uint8(2), uint8(10), uint8(5), []byte{0, 10, 0, 10, 0, 10, 1, 3, 2, 7, 3, 20, 4, 0, 5, 9})
	f.Add(uint8(1), uint8(4), uint8(3), uint8(0), []byte{0, 6, 0, 6, 0, 6, 0, 6, 5, 5, 2, 9, 3, 1, 0, 6})
	f.Add(uint8(0), uint8(7), uint8(1), uint8(1), []byte{6, 2, 6, 2, 0, 14, 1, 255, 4, 0, 5, 250})
	f.Fuzz(func(t *testing.T, kindB, shardsB, perCapB, perResB uint8, ops []byte) {
		ctx := context.Background()
		n := 2 + int(shardsB%7)
		perCap := float64(1 + perCapB%20)
		perRes := float64(perResB % 8)
		cfg := Config{Kind: TokenBucket, Rate: perCap * float64(n), Period: time.Minute,
			Capacity: perCap * float64(n), MaxReserved: perRes * float64(n), Shards: n}
		if kindB&1 == 1 {
			cfg.Kind = FixedWindow
		}
		capacity, maxRes := cfg.Capacity, cfg.MaxReserved
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"s": cfg}, Partitions: 1 + int(kindB>>1)%4})
		keys := []string{"", "k"}
		want := map[string]float64{"": capacity, "k": capacity}
		now := t0
		val := func(k string) float64 { return value(t, l, "s", k).Value }
		rd := &opReader{b: ops}
		counts := []float64{1, 2, 0.5, perCap, 2 * perCap, perCap + 1, 2*perCap + 1, math.Nextafter(2*perCap, 99), 3, 0, -1, math.NaN(),
			perCap + perRes, 2 * (perCap + perRes), 2*(perCap+perRes) + 1}
		for step := 0; step < 64 && len(rd.b) > 0; step++ {
			op := rd.byte() % 7
			b := rd.byte()
			key := keys[int(b)%2]
			count := counts[int(b>>1)%len(counts)]
			reserve := b&0x80 != 0 && maxRes > 0 // unlimited debt has no bound to check
			ctxt := fmt.Sprintf("step %d op %d cfg %+v key %q count %v reserve %v", step, op, cfg, key, count, reserve)
			most := 2 * perCap
			if reserve {
				most = 2 * (perCap + perRes)
			}
			c := count
			if c == 0 {
				c = 1
			}
			invalid := math.IsNaN(c) || c < 0 || c > most
			switch op {
			case 0, 1: // Limit or Check
				r := Request{Name: "s", Key: key, Count: count, Reserve: reserve}
				var st Status
				var err error
				if op == 0 {
					st, err = l.Limit(ctx, r)
				} else {
					st, err = l.Check(ctx, r)
				}
				if invalid {
					if !errors.Is(err, ErrInvalidCount) {
						t.Fatalf("%s: %v, want ErrInvalidCount", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				} else if st.OK && op == 0 {
					want[key] -= c
				} else if !st.OK && st.RetryAfter <= 0 {
					t.Fatalf("%s: denied with RetryAfter %v", ctxt, st.RetryAfter)
				}
			case 2: // LimitAll over both keys
				c2 := counts[int(rd.byte())%len(counts)]
				if c2 == 0 {
					c2 = 1
				}
				inv2 := math.IsNaN(c2) || c2 < 0 || c2 > most
				st, err := l.LimitAll(ctx, Request{Name: "s", Key: "", Count: count, Reserve: reserve}, Request{Name: "s", Key: "k", Count: c2, Reserve: reserve})
				if invalid || inv2 {
					if !errors.Is(err, ErrInvalidCount) {
						t.Fatalf("%s c2 %v: %v, want ErrInvalidCount", ctxt, c2, err)
					}
				} else if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				} else if st.OK {
					want[""] -= c
					want["k"] -= c2
				}
			case 3: // LimitMany, same key twice
				ds := l.LimitMany(ctx, []Request{{Name: "s", Key: key, Count: count, Reserve: reserve}, {Name: "s", Key: key, Count: 1}}, nil)
				for i, d := range ds {
					ci, inv := c, invalid
					if i == 1 {
						ci, inv = 1, false
					}
					if inv {
						if !errors.Is(d.Err, ErrInvalidCount) {
							t.Fatalf("%s: decision %d %+v", ctxt, i, d)
						}
						continue
					}
					if d.Err != nil {
						t.Fatalf("%s: decision %d %+v", ctxt, i, d)
					}
					if d.OK {
						want[key] -= ci
					}
				}
			case 4: // Credit
				err := l.Credit(ctx, "s", key, count)
				if math.IsNaN(count) || count < 0 {
					if !errors.Is(err, ErrInvalidCount) {
						t.Fatalf("%s: credit %v", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: credit %v", ctxt, err)
				} else {
					want[key] = math.Min(want[key]+count, capacity)
				}
			case 5: // Reset
				if err := l.Reset(ctx, "s", key); err != nil {
					t.Fatal(err)
				}
				want[key] = capacity
			default: // move the clock; the value may only rise, by at most the refill
				d := time.Duration(int64(rd.byte())-64) * time.Second
				next := now.Add(d)
				for _, k := range keys {
					before := val(k)
					clk.Set(next)
					after := val(k)
					clk.Set(now)
					// Back: the projection of a state written earlier may
					// fall back into its own window or refill, never rise.
					if d <= 0 && after > before {
						t.Fatalf("%s: clock back %v raised %q: %v -> %v", ctxt, d, k, before, after)
					}
					refill := cfg.Rate * d.Minutes()
					if cfg.Kind == FixedWindow {
						refill = cfg.Rate * math.Ceil(d.Minutes())
					}
					if d > 0 && (after < before || after-before > refill+1e-9) {
						t.Fatalf("%s: clock +%v moved %q from %v to %v (refill at most %v)", ctxt, d, k, before, after, refill)
					}
				}
				if d > 0 {
					now = next
				}
				clk.Set(now)
				for _, k := range keys {
					want[k] = val(k)
				}
			}
			for _, k := range keys {
				got := val(k)
				if math.Abs(got-want[k]) > 1e-9*capacity {
					t.Fatalf("%s: Value(%q) = %v, want %v (capacity %v)", ctxt, k, got, want[k], capacity)
				}
				if got > capacity || maxRes > 0 && got < -maxRes-1e-9 {
					t.Fatalf("%s: Value(%q) = %v outside [-%v, %v]", ctxt, k, got, maxRes, capacity)
				}
			}
		}
	})
}
