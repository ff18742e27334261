package httplimit

import (
	"fmt"
	"math"
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

// policyItem is a limit's RateLimit-Policy item, "name";q=Q;w=W. The draft
// wants w in whole seconds (> 0) and q an Integer: for a period that is not
// a whole number of seconds (or a rate below one token per period), w is the
// smallest whole number of seconds at least the period that holds at least
// one token, and q the tokens granted in w, rounded down, so the policy
// never promises more than the limit grants.
func policyItem(name string, c ratelimit.Config) string {
	per := c.Period.Seconds()
	w := math.Ceil(max(per, per/c.Rate) - 1e-9)
	w = max(w, 1)
	q := math.Floor(c.Rate*w/per + 1e-9)
	return fmt.Sprintf("%s;q=%d;w=%d", sfString(name), int64(q), int64(w))
}

// limitItem is the RateLimit item of a decision, "name";r=R;t=T: r the
// tokens left, rounded down, never negative; t in seconds, rounded up.
func limitItem(name string, remaining float64, t time.Duration) string {
	r := int64(0)
	if remaining > 0 {
		r = int64(math.Floor(min(remaining, 1e15)))
	}
	return fmt.Sprintf("%s;r=%d;t=%d", sfString(name), r, ceilSeconds(t))
}

// ceilSeconds is d in whole seconds, rounded up (a wait is never early);
// negative durations are 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
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
