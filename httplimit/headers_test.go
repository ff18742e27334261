package httplimit

// The RateLimit, RateLimit-Policy and Retry-After fields (headers.go):
// valid Structured Field Integers whatever the config, never promising
// more than the limit grants, never early.

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func TestPolicyItem(t *testing.T) {
	for _, tc := range []struct {
		rate   float64
		period time.Duration
		want   string
	}{
		{10, time.Minute, `"p";q=10;w=60`},
		{100, time.Second, `"p";q=100;w=1`},
		{10, 500 * time.Millisecond, `"p";q=20;w=1`}, // sub-second period: scaled to 1 s
		{1, 1500 * time.Millisecond, `"p";q=1;w=2`},  // 1.33 tokens in 2 s: rounded down
		{0.5, time.Second, `"p";q=1;w=2`},            // less than a token per period
		{2.5, time.Minute, `"p";q=2;w=60`},           // fractional rate: rounded down
		{40000, time.Minute, `"p";q=40000;w=60`},
		{1, 24 * time.Hour, `"p";q=1;w=86400`},
	} {
		c := ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: tc.rate, Period: tc.period}
		if got := policyItem("p", c); got != tc.want {
			t.Errorf("rate %v per %v: %s, want %s", tc.rate, tc.period, got, tc.want)
		}
	}
}

func TestLimitItem(t *testing.T) {
	for _, tc := range []struct {
		remaining float64
		t         time.Duration
		want      string
	}{
		{0, 0, `"l";r=0;t=0`},
		{2.99, time.Second, `"l";r=2;t=1`},
		{-3, 1500 * time.Millisecond, `"l";r=0;t=2`},       // reserved debt: r is never negative
		{5, time.Nanosecond, `"l";r=5;t=1`},                // never early
		{1e300, time.Hour, `"l";r=999999999999999;t=3600`}, // 15 digits at most (RFC 9651)
	} {
		if got := limitItem("l", tc.remaining, tc.t); got != tc.want {
			t.Errorf("limitItem(%v, %v) = %s, want %s", tc.remaining, tc.t, got, tc.want)
		}
	}
	if got := sfString(`a"b\c`); got != `"a\"b\\c"` {
		t.Errorf("sfString: %s", got)
	}
	for _, d := range []struct {
		d    time.Duration
		want string
	}{{0, "0"}, {time.Nanosecond, "1"}, {time.Second, "1"}, {time.Second + 1, "2"}, {-time.Second, "0"}} {
		if got := retryAfter(d.d); got != d.want {
			t.Errorf("retryAfter(%v) = %s, want %s", d.d, got, d.want)
		}
	}
}

// sfInteger matches an RFC 9651 §3.3.1 Integer: at most 15 digits.
var sfInteger = regexp.MustCompile(`^-?[0-9]{1,15}$`)

// fieldParam matches one parameter of a RateLimit / RateLimit-Policy item.
var fieldParam = regexp.MustCompile(`;([a-z]+)=([^;,]*)`)

// checkItem reports what is wrong with the integer parameters of one
// field item (q, w, r, t must be non-negative SF Integers; w > 0).
func checkItem(item string) []string {
	var bad []string
	for _, m := range fieldParam.FindAllStringSubmatch(item, -1) {
		k, v := m[1], m[2]
		switch {
		case !sfInteger.MatchString(v):
			bad = append(bad, fmt.Sprintf("%s=%s is not an SF Integer (RFC 9651 §3.3.1: at most 15 digits)", k, v))
		case strings.HasPrefix(v, "-"):
			bad = append(bad, fmt.Sprintf("%s=%s is negative (the draft: non-negative Integer)", k, v))
		case k == "w" && v == "0":
			bad = append(bad, "w=0")
		}
	}
	return bad
}

// r is capped at 999,999,999,999,999, the largest Structured Field Integer
// (RFC 9651 §3.3.1); it was capped at 1e15, 16 digits, and a malformed
// RateLimit field MUST be ignored by clients (draft §5).
func TestRemainingIsAnSFInteger(t *testing.T) {
	if bad := checkItem(limitItem("l", 1e300, time.Hour)); len(bad) > 0 {
		t.Errorf("limitItem(1e300 left): %v", bad)
	}
	// End to end: a valid limit with a large burst.
	e := newEnv(t, map[string]ratelimit.Config{"bytes": tb(1e6, time.Second, 5e15)}, Options{Limits: []string{"bytes"}})
	got := e.get(t)
	if got.code != 200 {
		t.Fatalf("%+v", got)
	}
	if bad := checkItem(got.limit); len(bad) > 0 {
		t.Errorf("RateLimit: %s: %v", got.limit, bad)
	}
}

// Valid configs (finite Rate > 0, Period > 0) whose q or w did not fit a
// Structured Field Integer (16+ digits, or an int64 conversion that
// overflowed to a negative number) now stay within it. One bad item makes
// the whole RateLimit-Policy List malformed (RFC 9651 §4.2), hiding every
// limit's policy.
func TestPolicyNumbersAreSFIntegers(t *testing.T) {
	for _, tc := range []struct {
		what string
		c    ratelimit.Config
	}{
		{"rate 1e16 per second (q 17 digits)", tb(1e16, time.Second, 1)},
		{"rate 1e19 per second (q overflows int64)", tb(1e19, time.Second, 1)},
		{"rate 1e-15 per second (w 16 digits)", tb(1e-15, time.Second, 1)},
		{"rate 1e-30 per hour (w overflows int64)", tb(1e-30, time.Hour, 1)},
	} {
		item := policyItem("p", tc.c)
		if bad := checkItem(item); len(bad) > 0 {
			t.Errorf("%s: %s: %v", tc.what, item, bad)
		}
	}
}

// A fixed window refills Rate tokens per window "up to Capacity", so with
// Capacity < Rate a window never grants more than Capacity; the policy
// said q=Rate, more than the limit grants (the draft's q is "the quota
// allocated" per window w).
func TestFixedWindowPolicyAdvertisesCapacity(t *testing.T) {
	fw := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 10, Period: time.Minute, Capacity: 3, Start: t0}
	e := newEnv(t, map[string]ratelimit.Config{"win": fw}, Options{Limits: []string{"win"}})
	granted := 0
	var policy string
	for range 10 { // the advertised quota, all in one window
		r := e.get(t)
		policy = r.policy
		if r.code == 200 {
			granted++
		}
	}
	if granted != 3 {
		t.Fatalf("granted %d in one window, want 3 (Capacity)", granted)
	}
	if want := `"win";q=3;w=60`; policy != want {
		t.Errorf("policy %s, but a %v window grants at most %d: want %s", policy, fw.Period, granted, want)
	}
}

// policyItem rounds w up exactly: a Period a nanosecond over a whole
// number of seconds is advertised as the next one (1 token per 2 s + 1 ns
// is q=1;w=3), since a client following w=2 (one request every 2 s) would
// be denied on its second request.
func TestPolicyNeverRoundsUp(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"p": tb(1, 2*time.Second+time.Nanosecond, 0)}, Options{Limits: []string{"p"}})
	first := e.get(t)
	if want := `"p";q=1;w=3`; first.policy != want {
		t.Fatalf("policy %s, want %s", first.policy, want)
	}
	e.clock.Advance(3 * time.Second) // what q=1;w=3 allows
	if second := e.get(t); second.code != 200 {
		t.Errorf("policy %s, yet a request 3 s after the first is refused: %+v", first.policy, second)
	}
	for _, tc := range []struct {
		rate   float64
		period time.Duration
		want   string
	}{
		{0.1, time.Second, `"p";q=1;w=10`},          // 1/0.1 is 10.000000000000002 in floats
		{3, 1500 * time.Millisecond, `"p";q=4;w=2`}, // 3 per 1.5 s: 4 in 2 s
		{1, time.Second - time.Nanosecond, `"p";q=1;w=1`},
	} {
		if got := policyItem("p", tb(tc.rate, tc.period, 0)); got != tc.want {
			t.Errorf("rate %v per %v: %s, want %s", tc.rate, tc.period, got, tc.want)
		}
	}
}

// TestHeaderSyntax: every header a decision writes is valid SF / delay-
// seconds, over configs with fractional rates, sub-second periods and
// several limits; t on a denial equals Retry-After.
func TestHeaderSyntax(t *testing.T) {
	limits := map[string]ratelimit.Config{
		`a"b\c`: tb(0.3, 700*time.Millisecond, 1),
		"win":   {Kind: ratelimit.FixedWindow, Rate: 2, Period: 1500 * time.Millisecond},
		"big":   tb(1e9, time.Hour, 0),
	}
	e := newEnv(t, limits, Options{Limits: []string{`a"b\c`, "win"}, GlobalLimits: []string{"big"}})
	for i := range 8 {
		e.clock.Advance(333 * time.Millisecond)
		r := e.get(t)
		for _, item := range append(strings.Split(r.policy, ", "), r.limit) {
			if bad := checkItem(item); len(bad) > 0 {
				t.Errorf("step %d: %s: %v", i, item, bad)
			}
		}
		if r.code == 429 && !strings.HasSuffix(r.limit, ";t="+r.retryAfter) {
			t.Errorf("step %d: t differs from Retry-After: %+v", i, r)
		}
	}
	if p := policyItem(`a"b\c`, limits[`a"b\c`]); p != `"a\"b\\c";q=1;w=3` {
		t.Errorf("policy %s", p)
	}
}

// TestHugeWait: a wait at the library's cap (2^62 ns) gives a positive,
// never-early Retry-After equal to t, in range.
func TestHugeWait(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"slow": tb(1e-30, time.Hour, 1)}, Options{Limits: []string{"slow"}})
	if r := e.get(t); r.code != 200 || checkItem(r.limit) != nil {
		t.Fatalf("first: %+v", r)
	}
	r := e.get(t)
	if r.code != 429 || !sfInteger.MatchString(r.retryAfter) || strings.HasPrefix(r.retryAfter, "-") ||
		r.limit != `"slow";r=0;t=`+r.retryAfter || r.retryAfter != "4611686019" {
		t.Fatalf("huge wait: %+v", r)
	}
	if got := ceilSeconds(time.Duration(1) << 62); got != 4611686019 {
		t.Errorf("ceilSeconds(2^62) = %d", got)
	}
}

// ceilSeconds rounds up without overflow within 1 s of the largest
// Duration (where d + time.Second - 1 would wrap negative); unreachable
// from the limiter, whose waits are capped at 2^62 ns.
func TestCeilSecondsNearMax(t *testing.T) {
	want := int64(math.MaxInt64/int64(time.Second)) + 1
	if got := ceilSeconds(math.MaxInt64); got != want {
		t.Errorf("ceilSeconds(MaxInt64) = %d, want %d", got, want)
	}
}
