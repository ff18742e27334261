package bucket

import "math"

// Kind is a bucket's algorithm. Its values match ratelimit.Kind.
type Kind uint8

const (
	TokenBucket Kind = 1
	FixedWindow Kind = 2
)

// Limit is the validated configuration of one bucket (one shard of a limit).
// It is shared, read-only, by every bucket of the limit.
type Limit struct {
	Kind        Kind
	Rate        float64 // tokens per Period, > 0
	Period      int64   // nanoseconds, > 0
	Capacity    float64 // > 0
	MaxReserved float64 // 0: unlimited debt for reservations
}

// State is a bucket's two numbers.
type State struct {
	Value float64 // tokens; negative is reserved debt
	TS    int64   // Unix nanoseconds
}

// maxWait caps every computed wait, so huge debts cannot overflow int64.
const maxWait = int64(1) << 62

// debtAllowed is the most debt a request may leave: none without a
// reservation, MaxReserved with one (infinite when MaxReserved is 0).
func (l *Limit) debtAllowed(reserve bool) float64 {
	switch {
	case !reserve:
		return 0
	case l.MaxReserved > 0:
		return l.MaxReserved
	}
	return math.Inf(1)
}

// MaxCount is about the largest count a request on one bucket can ever be
// granted (+Inf when a reservation may leave unlimited debt): the sum,
// rounded once. Fits is the exact answer.
func (l *Limit) MaxCount(reserve bool) float64 {
	return l.Capacity + l.debtAllowed(reserve)
}

// MostFitting is the largest count Fits accepts (+Inf when every finite
// count fits): a bound to compare counts with that agrees with Fits
// exactly, since Fits only turns false as the count grows.
func (l *Limit) MostFitting(reserve, two bool) float64 {
	if l.Fits(math.MaxFloat64, reserve, two) {
		return math.Inf(1)
	}
	// Positive doubles order as their bits do: search the bits.
	lo, hi := uint64(0), math.Float64bits(math.MaxFloat64) // Fits(lo), !Fits(hi)
	if !l.Fits(0, reserve, two) {
		return math.Inf(-1)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if l.Fits(math.Float64frombits(mid), reserve, two) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Float64frombits(lo)
}

// Fits reports whether a request for count tokens is ever granted: by a
// full bucket (Try), or with two, by two full shards (TakeTwo), the most a
// bucket ever holds. It decides with the same arithmetic, so it agrees
// with them where a bound such as MaxCount, rounded differently, may not.
func (l *Limit) Fits(count float64, reserve, two bool) bool {
	full := State{Value: l.Capacity}
	if two {
		return l.takeTwo(full, full, 0, count, reserve).OK
	}
	_, ok := l.Try(full, 0, count, reserve)
	return ok
}

// WindowStart returns the start of the fixed window containing now, for
// windows that begin at phase + n*Period. A start before the earliest
// int64 time is clamped to it: that window then ends later than it
// should, which can only under-admit.
func (l *Limit) WindowStart(now, phase int64) int64 {
	off := modDiff(now, phase, l.Period)
	if now < math.MinInt64+off {
		return math.MinInt64
	}
	return now - off
}

// Fresh is the state of an absent bucket at now: full, with ts = now for a
// token bucket and the current window's start for a fixed window.
func (l *Limit) Fresh(now, phase int64) State {
	if l.Kind == FixedWindow {
		return State{Value: l.Capacity, TS: l.WindowStart(now, phase)}
	}
	return State{Value: l.Capacity, TS: now}
}

// Project refills s up to now and caps it at Capacity.
func (l *Limit) Project(s State, now int64) State {
	d := elapsed(s.TS, now)
	if l.Kind == FixedWindow {
		if d < uint64(l.Period) { // also covers now < s.TS: no time passed
			return State{Value: min(s.Value, l.Capacity), TS: s.TS}
		}
		k := d / uint64(l.Period)
		// The explicit conversion rounds the product before the sum: Go
		// may otherwise fuse them into one multiply-add on some
		// processors, and a store that mirrors this arithmetic elsewhere
		// (a Redis script) rounds twice.
		refill := float64(l.Rate * float64(k))
		return State{Value: min(s.Value+refill, l.Capacity), TS: now - int64(d%uint64(l.Period))}
	}
	if d == 0 {
		return State{Value: min(s.Value, l.Capacity), TS: s.TS}
	}
	return State{Value: min(s.Value+l.tokens(d), l.Capacity), TS: now}
}

// elapsed is the time from ts to now, 0 when now is not after ts. It is
// exact for any two int64 times: a difference over 292 years does not fit
// an int64 but does fit a uint64.
func elapsed(ts, now int64) uint64 {
	if now <= ts {
		return 0
	}
	return uint64(now) - uint64(ts)
}

// modDiff is (a - b) mod m, in [0, m), exact for any two int64 times.
func modDiff(a, b, m int64) int64 {
	if a >= b {
		return int64((uint64(a) - uint64(b)) % uint64(m))
	}
	r := int64((uint64(b) - uint64(a)) % uint64(m))
	if r == 0 {
		return 0
	}
	return m - r
}

// after is the time d >= 0 after now, saturating at the latest int64 time.
func after(now, d int64) int64 {
	if now > math.MaxInt64-d {
		return math.MaxInt64
	}
	return now + d
}

// until is the time from now to t, 0 when t is not after now, capped at
// maxWait.
func until(now, t int64) int64 {
	return int64(min(elapsed(now, t), uint64(maxWait)))
}

// Full reports whether s has refilled to capacity by now, i.e. whether it is
// indistinguishable from an absent bucket.
func (l *Limit) Full(s State, now int64) bool {
	return l.Project(s, now).Value >= l.Capacity
}

// Credit returns s at now with count tokens given back, capped at Capacity.
func (l *Limit) Credit(s State, now int64, count float64) State {
	p := l.Project(s, now)
	p.Value = min(p.Value+count, l.Capacity)
	return p
}

// tokens is what a token bucket gains in d nanoseconds.
func (l *Limit) tokens(d uint64) float64 {
	return float64(d) * l.Rate / float64(l.Period)
}

// durationFor is the (real-valued, rounded up) time a token bucket needs to
// gain n tokens, capped at maxWait.
func (l *Limit) durationFor(n float64) int64 {
	return ceilNanos(n * float64(l.Period) / l.Rate)
}

// windowsFor is the number of whole windows needed to gain n tokens.
func (l *Limit) windowsFor(n float64) int64 {
	return ceilNanos(n / l.Rate)
}

func ceilNanos(x float64) int64 {
	if !(x > 0) { // also NaN
		return 0
	}
	if x >= float64(maxWait) {
		return maxWait
	}
	return int64(math.Ceil(x))
}

// UntilFull is how long s needs, from now, to refill to Capacity.
func (l *Limit) UntilFull(s State, now int64) int64 {
	return l.UntilFullProjected(l.Project(s, now), now)
}

// UntilFullProjected is UntilFull of p, a state already projected to now:
// Project's result at now, or Try's next state at now (granted or not). It
// skips projecting p again, which would change nothing (Project at one
// reading is idempotent, and a take only lowers a projected value). Take's
// Decision.Next on a denial is its input, not projected: not such a state.
func (l *Limit) UntilFullProjected(p State, now int64) int64 {
	return l.waitFor(p, now, l.Capacity)
}
