package httplimit

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// Header field names (draft-ietf-httpapi-ratelimit-headers).
const (
	fieldPolicy = "RateLimit-Policy"
	fieldLimit  = "RateLimit"
)

// sfMaxInt is the largest Structured Field Integer (RFC 9651 §3.3.1: at
// most 15 digits).
const sfMaxInt = 999_999_999_999_999

// policyItem is a limit's RateLimit-Policy item, "name";q=Q;w=W. The draft
// wants w in whole seconds (> 0) and q an Integer: for a period that is not
// a whole number of seconds (or a rate below one token per period), w is the
// smallest whole number of seconds at least the period that holds at least
// one token, and q the tokens granted in w, rounded down, so the policy
// never promises more than the limit grants. A fixed window grants at most
// its capacity per window, so its rate counts as at most that. The
// arithmetic is exact (rationals); both numbers stay within Structured
// Field Integers (a w capped there may leave q at 0: nothing promised).
func policyItem(name string, c ratelimit.Config) string {
	rate := c.Rate
	if c.Kind == ratelimit.FixedWindow && c.Capacity > 0 {
		rate = min(rate, c.Capacity)
	}
	r := new(big.Rat).SetFloat64(rate) // tokens per period; finite, > 0
	if r == nil || r.Sign() <= 0 {
		r = new(big.Rat) // unreachable for a validated config
	}
	perNanos := new(big.Rat).SetInt64(int64(c.Period))
	nanos := new(big.Rat).SetInt64(int64(time.Second))
	// w >= the period, and w * rate / period >= 1 token.
	w := ceilRat(new(big.Rat).Quo(perNanos, nanos))
	if r.Sign() > 0 {
		w = max(w, ceilRat(new(big.Rat).Quo(perNanos, new(big.Rat).Mul(r, nanos))))
	}
	w = min(max(w, 1), sfMaxInt)
	// q = floor(rate * w seconds / period).
	q := new(big.Rat).Mul(r, new(big.Rat).SetInt64(w))
	q.Mul(q, nanos).Quo(q, perNanos)
	return fmt.Sprintf("%s;q=%d;w=%d", sfString(name), min(floorRat(q), sfMaxInt), w)
}

// ceilRat and floorRat round x (>= 0) to an integer, saturating at
// sfMaxInt+1.
func ceilRat(x *big.Rat) int64 {
	n := floorRat(x)
	if n <= sfMaxInt && new(big.Rat).SetInt64(n).Cmp(x) < 0 {
		n++
	}
	return n
}

func floorRat(x *big.Rat) int64 {
	q := new(big.Int).Quo(x.Num(), x.Denom()) // x >= 0: truncation is floor
	if !q.IsInt64() || q.Int64() > sfMaxInt {
		return sfMaxInt + 1
	}
	return q.Int64()
}

// limitItem is the RateLimit item of a decision, "name";r=R;t=T: r the
// tokens left, rounded down, never negative; t in seconds, rounded up.
func limitItem(name string, remaining float64, t time.Duration) string {
	r := int64(0)
	if remaining > 0 {
		r = int64(math.Floor(min(remaining, sfMaxInt)))
	}
	return fmt.Sprintf("%s;r=%d;t=%d", sfString(name), r, ceilSeconds(t))
}

// ceilSeconds is d in whole seconds, rounded up (a wait is never early);
// negative durations are 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// sfString is s as a Structured Field String (RFC 9651 §3.3.3). validName
// ensures s is printable ASCII.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// validName reports whether s can be a Structured Field String.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// retryAfter is the Retry-After value of a denial.
func retryAfter(d time.Duration) string { return strconv.FormatInt(ceilSeconds(d), 10) }
