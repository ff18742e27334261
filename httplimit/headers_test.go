package httplimit

import (
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
