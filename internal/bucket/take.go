package bucket

import "math"

// Decision is the outcome of asking a bucket for tokens.
type Decision struct {
	Next State // the state to store when OK; the unchanged input when not
	OK   bool
	// RetryAfter (ns): when denied, the earliest wait after which the same
	// request is granted if nothing else changes the bucket; when granted
	// with debt, the wait until the debt is repaid (when to run the work).
	RetryAfter int64
}

// Take decides a request for count tokens from bucket s at now. Denials
// leave s unchanged; grants return the state to store. It is Try, then
// Wait.
func (l *Limit) Take(s State, now int64, count float64, reserve bool) Decision {
	next, ok := l.Try(s, now, count, reserve)
	if !ok {
		return Decision{Next: s, RetryAfter: l.Wait(s, l.Project(s, now), false, now, count, reserve)}
	}
	return Decision{Next: next, OK: true, RetryAfter: l.Wait(s, next, true, now, count, reserve)}
}

// Try is the decision of Take without its wait: the state after taking
// count tokens from s at now, and whether the request is granted. A debt
// beyond the float64 range (-Inf, only possible with unlimited
// reservations of astronomical counts) is refused: it could never be
// repaid (-Inf + Inf is NaN), so granting it would disable the bucket for
// good.
func (l *Limit) Try(s State, now int64, count float64, reserve bool) (next State, ok bool) {
	next = l.Project(s, now)
	next.Value -= count
	return next, next.Value >= -l.debtAllowed(reserve) && !math.IsInf(next.Value, -1)
}

// Wait is Take's RetryAfter for the request Try decided: s is the bucket
// before, ok what Try returned, and at the state after, Try's next when
// granted or Project(s, now) when denied. It is arithmetic on values only,
// so a caller may run it after releasing whatever guards s. A grant's wait
// is positive exactly when next is in debt.
func (l *Limit) Wait(s, at State, ok bool, now int64, count float64, reserve bool) int64 {
	if ok {
		return l.untilRepaid(at, now)
	}
	guess := l.waitFor(at, now, count-l.debtAllowed(reserve))
	return l.settle(guess, s.TS, now, func(d int64) bool {
		_, ok := l.Try(s, after(now, d), count, reserve)
		return ok
	})
}

// GrantAt is the clock reading from which a request that Try denies on s
// at now is granted, as long as s does not change: for every reading t
// from now until then, Wait(s, Project(s, t), false, t, count, reserve)
// is the difference, since Wait is exact and Try's answer on an unchanged
// state changes once as the clock moves on. ok is false, and there is no
// such reading, when Try grants the request at now, when it can never be
// granted, or when the wait saturates.
func (l *Limit) GrantAt(s State, now int64, count float64, reserve bool) (at int64, ok bool) {
	if _, granted := l.Try(s, now, count, reserve); granted || !l.Fits(count, reserve, false) {
		return 0, false
	}
	w := l.Wait(s, l.Project(s, now), false, now, count, reserve)
	if w >= maxWait || now > math.MaxInt64-w {
		return 0, false
	}
	return now + w, true
}

// waitFor estimates how long projected state p needs until it holds need
// tokens. The estimate is exact in real arithmetic; settle corrects rounding.
func (l *Limit) waitFor(p State, now int64, need float64) int64 {
	short := need - p.Value
	if !(short > 0) {
		return 0
	}
	if l.Kind == FixedWindow {
		k := l.windowsFor(short)
		if k >= maxWait/l.Period {
			return maxWait
		}
		return until(now, after(p.TS, k*l.Period))
	}
	// A token bucket refills from ts on: when the clock went back, the
	// time until ts comes first.
	return addWaits(until(now, p.TS), l.durationFor(short))
}

// untilRepaid is how long a granted state with debt needs to get back to
// zero tokens; 0 when it has no debt.
func (l *Limit) untilRepaid(next State, now int64) int64 {
	if next.Value >= 0 {
		return 0
	}
	return l.settle(l.waitFor(next, now, 0), next.TS, now, func(d int64) bool {
		return l.Project(next, after(now, d)).Value >= 0
	})
}

// settle is the package's settle for a bucket whose windows (if it is a
// fixed window) begin where ts does, with d measured from now. A fixed
// window's answer can only change where a window begins, so before the
// search the estimate is moved back to the start of its window, and then
// a window earlier while that also holds: the estimate divides the
// shortfall by the rate, which rounding can push just past a whole number
// of windows (1 - 0.7 is 0.30000000000000004, so at rate 0.3 two windows
// where one gives 0.7 + 0.3 == 1). The search finds the least wait from
// any estimate; these steps only start it where it ends at once, rather
// than a window or more away.
func (l *Limit) settle(guess, ts, now int64, ok func(int64) bool) int64 {
	if l.Kind == FixedWindow && guess > 0 && guess < maxWait {
		t := after(now, guess)
		if off := modDiff(t, ts, l.Period); off != 0 && t-off > now && ok(t-off-now) {
			guess = t - off - now // two shards' windows need not line up
		}
		for i := 0; i < 2 && guess >= l.Period && ok(guess-l.Period); i++ {
			guess -= l.Period
		}
	}
	return settle(guess, ok)
}

// Settle returns the least d >= 0 (at most the largest wait) for which
// ok(d) holds, given that ok is monotone (false, then true forever) and
// that guess is an estimate of it: the search that makes Wait exact, for
// a caller that checks more than one request.
func Settle(guess int64, ok func(int64) bool) int64 { return settle(guess, ok) }

// After is the clock reading d after now, saturating at the largest.
func After(now, d int64) int64 { return after(now, d) }

// settle returns the least d >= 0 for which ok(d) holds, assuming ok is
// monotone (false, then true forever). guess is an estimate that is exact up
// to rounding, so ok(guess) normally holds and ok(guess-1) does not: two
// calls. Otherwise it searches from guess, downward (a nanosecond at a
// time at first) or upward, doubling its steps, then bisects. Results are
// capped at maxWait.
func settle(guess int64, ok func(int64) bool) int64 {
	guess = min(max(guess, 0), maxWait)
	if ok(guess) {
		hi := guess // ok(hi)
		for i := 0; hi > 0; i++ {
			step := int64(1) // a nanosecond at a time, four times
			if i >= 4 {
				step <<= min(i-3, 62)
			}
			lo := max(hi-step, 0)
			if !ok(lo) {
				return bisect(lo, hi, ok)
			}
			hi = lo
		}
		return 0
	}
	lo, step := guess, int64(1) // ok(lo) is false
	for {
		hi := lo + step
		if hi >= maxWait {
			return maxWait
		}
		if ok(hi) {
			return bisect(lo, hi, ok)
		}
		lo, step = hi, step*2
	}
}

// bisect returns the least d in (lo, hi] for which ok(d) holds, given
// that ok(lo) does not, ok(hi) does, and ok is monotone.
func bisect(lo, hi int64, ok func(int64) bool) int64 {
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// addWaits is a + b for two waits in [0, maxWait], capped at maxWait:
// their plain sum can pass the int64 range and wrap negative.
func addWaits(a, b int64) int64 {
	if a > maxWait-b {
		return maxWait
	}
	return a + b
}
