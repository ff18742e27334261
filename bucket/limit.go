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

// MaxCount is the largest count a request on one bucket can ever be granted
// (+Inf when a reservation may leave unlimited debt).
func (l *Limit) MaxCount(reserve bool) float64 {
	return l.Capacity + l.debtAllowed(reserve)
}

// WindowStart returns the start of the fixed window containing now, for
// windows that begin at phase + n*Period.
func (l *Limit) WindowStart(now, phase int64) int64 {
	return now - floorMod(now-phase, l.Period)
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
	if l.Kind == FixedWindow {
		if now-s.TS < l.Period { // also covers now < s.TS: no time passed
			return State{Value: min(s.Value, l.Capacity), TS: s.TS}
		}
		k := (now - s.TS) / l.Period
		return State{Value: min(s.Value+l.Rate*float64(k), l.Capacity), TS: s.TS + k*l.Period}
	}
	if now <= s.TS {
		return State{Value: min(s.Value, l.Capacity), TS: s.TS}
	}
	return State{Value: min(s.Value+l.tokens(now-s.TS), l.Capacity), TS: now}
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
func (l *Limit) tokens(d int64) float64 {
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

func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// UntilFull is how long s needs, from now, to refill to Capacity.
func (l *Limit) UntilFull(s State, now int64) int64 {
	p := l.Project(s, now)
	return l.waitFor(p, now, l.Capacity)
}
