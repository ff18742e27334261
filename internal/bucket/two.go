package bucket

import "math"

// Pair is the outcome of a request served by two shards of a limit.
type Pair struct {
	A, B           State // the states to store for the two shards
	WriteA, WriteB bool  // which of A and B changed
	OK             bool
	RetryAfter     int64 // as in Decision
}

// TakeTwo decides a request for count tokens from two shards a and b of one
// limit (power of two choices). If one shard can serve it alone, it does
// (if both can, the one left with more tokens). Otherwise the request is
// split so that both end with the same value, and it is granted only if
// both halves are. A denial writes nothing.
func (l *Limit) TakeTwo(a, b State, now int64, count float64, reserve bool) Pair {
	p := l.takeTwo(a, b, now, count, reserve)
	if p.OK {
		switch {
		case p.WriteA && p.WriteB:
			p.RetryAfter = max(l.untilRepaid(p.A, now), l.untilRepaid(p.B, now))
		case p.WriteA:
			p.RetryAfter = l.untilRepaid(p.A, now)
		default:
			p.RetryAfter = l.untilRepaid(p.B, now)
		}
		return p
	}
	// Earliest of: a alone, b alone, or the two halves.
	allowed := l.debtAllowed(reserve)
	pa, pb := l.Project(a, now), l.Project(b, now)
	guess := min(l.waitFor(pa, now, count-allowed), l.waitFor(pb, now, count-allowed))
	// Both shards refill alike, so the split needs half the shortfall of
	// the pair from each.
	half := State{Value: (pa.Value + pb.Value) / 2, TS: max(pa.TS, pb.TS)}
	guess = min(guess, l.waitFor(half, now, count/2-allowed))
	p.RetryAfter = l.settle(guess, a.TS, now, func(d int64) bool {
		return l.takeTwo(a, b, after(now, d), count, reserve).OK
	})
	return p
}

func (l *Limit) takeTwo(a, b State, now int64, count float64, reserve bool) Pair {
	na, okA := l.Try(a, now, count, reserve)
	nb, okB := l.Try(b, now, count, reserve)
	switch {
	case okA && (!okB || na.Value >= nb.Value):
		return Pair{A: na, B: b, WriteA: true, OK: true}
	case okB:
		return Pair{A: a, B: nb, WriteB: true, OK: true}
	}
	pa, pb := l.Project(a, now), l.Project(b, now)
	half := (pa.Value + pb.Value - count) / 2
	if math.IsInf(half, -1) { // the sum overflowed; halving first is exact
		half = pa.Value/2 + pb.Value/2 - count/2
	}
	// Each shard must give a non-negative part: a negative part would mint
	// tokens on one shard to pay for the other. A debt beyond float64 is
	// refused as in Try.
	if half < -l.debtAllowed(reserve) || math.IsInf(half, -1) || pa.Value < half || pb.Value < half {
		return Pair{A: a, B: b}
	}
	return Pair{A: State{half, pa.TS}, B: State{half, pb.TS}, WriteA: true, WriteB: true, OK: true}
}
