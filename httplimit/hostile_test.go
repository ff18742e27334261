package httplimit

// Hostile input against the HTTP layer (from an independent review; its
// helpers start with hx). The first tests pin bugs that review found,
// fixed; the rest pin behaviour it checked: spoofing, IPv6 grouping, huge
// waits, header syntax, reservations abandoned at any moment.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// hxSFInt matches an RFC 9651 §3.3.1 Integer: at most 15 digits.
var hxSFInt = regexp.MustCompile(`^-?[0-9]{1,15}$`)

// hxParam matches one parameter of a RateLimit / RateLimit-Policy item.
var hxParam = regexp.MustCompile(`;([a-z]+)=([^;,]*)`)

// hxCheckItem reports what is wrong with the integer parameters of one
// field item (q, w, r, t must be non-negative SF Integers; w > 0).
func hxCheckItem(item string) []string {
	var bad []string
	for _, m := range hxParam.FindAllStringSubmatch(item, -1) {
		k, v := m[1], m[2]
		switch {
		case !hxSFInt.MatchString(v):
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
	if bad := hxCheckItem(limitItem("l", 1e300, time.Hour)); len(bad) > 0 {
		t.Errorf("limitItem(1e300 left): %v", bad)
	}
	// End to end: a valid limit with a large burst.
	e := newEnv(t, map[string]ratelimit.Config{"bytes": tb(1e6, time.Second, 5e15)}, Options{Limits: []string{"bytes"}})
	got := e.get(t)
	if got.code != 200 {
		t.Fatalf("%+v", got)
	}
	if bad := hxCheckItem(got.limit); len(bad) > 0 {
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
		if bad := hxCheckItem(item); len(bad) > 0 {
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

// ClientIP unmaps addresses, so an IPv4-mapped IPv6 trusted prefix
// (::ffff:10.0.0.0/104) matched nothing: every client behind that proxy
// shared the proxy's bucket. Addresses are now also checked in their
// mapped form.
func TestMappedTrustedPrefix(t *testing.T) {
	p := netip.MustParsePrefix("::ffff:10.0.0.0/104")
	if !p.Contains(netip.MustParseAddr("::ffff:10.1.2.3")) {
		t.Fatal("netip: prefix should contain the address")
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[::ffff:10.1.2.3]:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	got, err := ClientIP(p)(r)
	if err != nil || got != "198.51.100.1" {
		t.Errorf("RemoteAddr %s in trusted %s: key %q, %v; want 198.51.100.1", r.RemoteAddr, p, got, err)
	}
}

// TestHostileClientIPSpoofing: the rightmost-untrusted rule over odd input.
func TestHostileClientIPSpoofing(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, tc := range []struct {
		name   string
		remote string
		xff    []string
		fwd    string
		want   string // "" = error
	}{
		{"whitespace and tabs", "10.1.2.3:80", []string{" 6.6.6.6 ,\t198.51.100.1\t"}, "", "198.51.100.1"},
		{"empty entries", "10.1.2.3:80", []string{"6.6.6.6,, 198.51.100.1 ,"}, "", "198.51.100.1"},
		{"only commas: the proxy", "10.1.2.3:80", []string{" , ,"}, "", "10.1.2.3"},
		{"client's own header line first", "10.1.2.3:80", []string{"6.6.6.6", "198.51.100.1"}, "", "198.51.100.1"},
		{"garbage left of the client is never parsed", "10.1.2.3:80", []string{"<script>, 198.51.100.1"}, "", "198.51.100.1"},
		{"garbage between proxies", "10.1.2.3:80", []string{"198.51.100.1, bogus, 10.0.0.2"}, "", ""},
		{"client claims a trusted hop", "10.1.2.3:80", []string{"10.6.6.6, 198.51.100.1"}, "", "198.51.100.1"},
		{"mapped hop unmapped", "10.1.2.3:80", []string{"::ffff:198.51.100.1"}, "", "198.51.100.1"},
		{"mapped bracketed hop with port", "10.1.2.3:80", []string{"[::ffff:198.51.100.1]:9"}, "", "198.51.100.1"},
		{"mapped trusted hop is trusted", "10.1.2.3:80", []string{"198.51.100.1, ::ffff:10.0.0.9"}, "", "198.51.100.1"},
		{"mapped remote trusted", "[::ffff:10.1.2.3]:80", []string{"198.51.100.1"}, "", "198.51.100.1"},
		{"zone stripped", "10.1.2.3:80", []string{"fe80::1%eth0"}, "", "fe80::/64"},
		{"zone with port", "10.1.2.3:80", []string{"[fe80::1%eth0]:80"}, "", "fe80::/64"},
		{"octal-looking IPv4 refused", "10.1.2.3:80", []string{"010.1.2.3"}, "", ""},
		{"quoted hop refused", "10.1.2.3:80", []string{`"198.51.100.1"`}, "", ""},
		{"space-separated hops refused", "10.1.2.3:80", []string{"6.6.6.6 198.51.100.1"}, "", ""},
		{"port without address refused", "10.1.2.3:80", []string{":80"}, "", ""},
		{"Forwarded is not read", "10.1.2.3:80", nil, `for="198.51.100.1"`, "10.1.2.3"},
		{"XFF of an untrusted peer ignored even if garbage", "203.0.113.7:1", []string{"bogus"}, "", "203.0.113.7"},
		{"trusted IPv6 proxy chain", "[2001:db8:ffff::1]:443", []string{"2001:db8:1:2::7, 2001:db8:ffff:1::1"}, "", "2001:db8:1:2::/64"},
		{"remote without port", "203.0.113.7", nil, "", "203.0.113.7"},
		{"remote empty", "", nil, "", ""},
		{"remote unix socket", "@", nil, "", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if tc.fwd != "" {
			r.Header.Set("Forwarded", tc.fwd)
		}
		expectKey(t, tc.name, ClientIP(proxies...), r, tc.want)
	}
}

// TestHostileIPv6Grouping: one key per /64, whatever the low bits or zone.
func TestHostileIPv6Grouping(t *testing.T) {
	key := func(remote string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		k, err := ClientIP()(r)
		if err != nil {
			t.Fatalf("%s: %v", remote, err)
		}
		return k
	}
	a := key("[2001:db8:1:2::]:1")
	for _, s := range []string{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:2", "[2001:0db8:0001:0002:0:0:0:9]:3", "[2001:DB8:1:2::1]:4"} {
		if k := key(s); k != a {
			t.Errorf("%s: %q, want %q", s, k, a)
		}
	}
	if k := key("[2001:db8:1:3::]:1"); k == a {
		t.Errorf("next /64 shares the key %q", k)
	}
	if k := key("[fe80::1%eth0]:1"); k != key("[fe80::2%eth1]:1") || k != "fe80::/64" {
		t.Errorf("zones: %q", k)
	}
	if k := key("[::ffff:1.2.3.4]:1"); k != "1.2.3.4" {
		t.Errorf("mapped: %q", k)
	}
}

// TestHostileHugeWait: a wait at the library's cap (2^62 ns) gives a positive,
// never-early Retry-After equal to t, in range.
func TestHostileHugeWait(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"slow": tb(1e-30, time.Hour, 1)}, Options{Limits: []string{"slow"}})
	if r := e.get(t); r.code != 200 || hxCheckItem(r.limit) != nil {
		t.Fatalf("first: %+v", r)
	}
	r := e.get(t)
	if r.code != 429 || !hxSFInt.MatchString(r.retryAfter) || strings.HasPrefix(r.retryAfter, "-") ||
		r.limit != `"slow";r=0;t=`+r.retryAfter || r.retryAfter != "4611686019" {
		t.Fatalf("huge wait: %+v", r)
	}
	if got := ceilSeconds(time.Duration(1) << 62); got != 4611686019 {
		t.Errorf("ceilSeconds(2^62) = %d", got)
	}
}

// ceilSeconds wrapped negative within 1 s of the largest Duration (d +
// time.Second - 1 overflowed); unreachable from the limiter, whose waits
// are capped at 2^62 ns, but it rounds up without overflow now.
func TestHostileCeilSecondsNearMax(t *testing.T) {
	want := int64(math.MaxInt64/int64(time.Second)) + 1
	if got := ceilSeconds(math.MaxInt64); got != want {
		t.Errorf("ceilSeconds(MaxInt64) = %d, want %d", got, want)
	}
}

// hxServer is the middleware behind a real server with the real sleep,
// reporting when a request waits and when serve returns.
type hxServer struct {
	srv     *httptest.Server
	waiting chan struct{}
	done    chan int // status written by serve (0 if none)
	served  atomic.Int32
}

type hxRecorder struct {
	http.ResponseWriter
	code int
}

func (w *hxRecorder) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }

func hxNewServer(t *testing.T, m *middleware) *hxServer {
	s := &hxServer{waiting: make(chan struct{}, 16), done: make(chan int, 16)}
	m.sleep = func(ctx context.Context, d time.Duration) error {
		s.waiting <- struct{}{}
		return sleep(ctx, d) // d is real time here: the client leaves first
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.served.Add(1); io.WriteString(w, "ok") })
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &hxRecorder{ResponseWriter: w}
		m.serve(rec, r, next)
		s.done <- rec.code
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// TestHostileDisconnectDuringReservation: a real client that goes away while
// its reservation waits has its tokens credited to every limit (per-key
// and global), and the handler never runs.
func TestHostileDisconnectDuringReservation(t *testing.T) {
	user, global := tb(1, time.Hour, 1), tb(10, time.Hour, 2)
	user.MaxReserved, global.MaxReserved = 5, 5
	e := newEnv(t, map[string]ratelimit.Config{"user": user, "global": global},
		Options{Limits: []string{"user"}, GlobalLimits: []string{"global"}, Reserve: true, Key: Header("X-Key")})
	s := hxNewServer(t, e.mw)
	do := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL, nil)
		req.Header.Set("X-Key", "k")
		return s.srv.Client().Do(req)
	}
	resp, err := do(context.Background()) // takes user's only token
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v %v", resp, err)
	}
	resp.Body.Close()
	<-s.done

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := do(ctx)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-s.waiting // reserved: user -1, global 0
	bg := context.Background()
	if v, _ := e.l.Value(bg, "user", "k"); v.Value != -1 {
		t.Fatalf("user during the wait: %v", v.Value)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	if code := <-s.done; code != 503 {
		t.Errorf("abandoned reservation answered %d, want 503 (unseen)", code)
	}
	if v, _ := e.l.Value(bg, "user", "k"); v.Value != 0 {
		t.Errorf("user after the credit: %v, want 0", v.Value)
	}
	if v, _ := e.l.Value(bg, "global", ""); v.Value != 1 {
		t.Errorf("global after the credit: %v, want 1", v.Value)
	}
	if n := s.served.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// TestHostileReservationDeadline: a request context that ends (not the client
// leaving) during the wait is a visible 503; the tokens are credited back.
// The 503 still carries the grant's RateLimit fields (set before the wait):
// noted, harmless (r is a lower bound).
func TestHostileReservationDeadline(t *testing.T) {
	c := tb(1, time.Second, 1)
	c.MaxReserved = 3
	e := newEnv(t, map[string]ratelimit.Config{"jobs": c}, Options{Limits: []string{"jobs"}, Reserve: true})
	e.get(t)
	e.wait = func() error { return context.DeadlineExceeded }
	r := e.get(t)
	if r.code != 503 || e.served != 1 {
		t.Fatalf("%+v served %d", r, e.served)
	}
	t.Logf("503 after an abandoned reservation carries RateLimit %q, RateLimit-Policy %q", r.limit, r.policy)
	if v, _ := e.l.Value(context.Background(), "jobs", "127.0.0.1"); v.Value != 0 {
		t.Fatalf("value %v, want 0 (credited)", v.Value)
	}
}

// TestHostileConcurrentReservations: under -race, concurrent reservations of
// which every other one is abandoned; with a frozen clock the bucket ends
// at capacity minus what reached the handler (nothing leaked or minted).
func TestHostileConcurrentReservations(t *testing.T) {
	c := tb(1, time.Second, 5)
	c.MaxReserved = 1000
	g := tb(1, time.Second, 50)
	g.MaxReserved = 1000
	e := newEnv(t, map[string]ratelimit.Config{"jobs": c, "g": g},
		Options{Limits: []string{"jobs"}, GlobalLimits: []string{"g"}, Reserve: true, Key: Header("X-Key")})
	var n atomic.Int64
	e.wait = func() error {
		if n.Add(1)%2 == 0 {
			return context.Canceled
		}
		return nil
	}
	var wg sync.WaitGroup
	codes := make(chan int, 64)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				req, _ := http.NewRequest("GET", e.srv.URL, nil)
				req.Header.Set("X-Key", fmt.Sprint(i%2))
				resp, err := e.srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes <- resp.StatusCode
			}
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for code := range codes {
		count[code]++
	}
	bg := context.Background()
	e.mu.Lock()
	served := e.served
	e.mu.Unlock()
	if count[200] != served || count[200]+count[503] != 40 {
		t.Fatalf("codes %v, served %d", count, served)
	}
	total := 0.0
	for _, k := range []string{"0", "1"} {
		v, err := e.l.Value(bg, "jobs", k)
		if err != nil {
			t.Fatal(err)
		}
		total += 5 - v.Value
	}
	gv, _ := e.l.Value(bg, "g", "")
	if total != float64(served) || 50-gv.Value != float64(served) {
		t.Fatalf("taken per key %v, global %v, served %d", total, 50-gv.Value, served)
	}
}

// TestHostileRefusalCodes: the documented status of each refusal, and that
// nothing writes a second response.
func TestHostileRefusalCodes(t *testing.T) {
	limits := map[string]ratelimit.Config{"api": tb(10, time.Minute, 0)}
	for _, tc := range []struct {
		name string
		opts Options
		code int
	}{
		{"key error", Options{Key: func(*http.Request) (string, error) { return "", errors.New("x") }}, 400},
		{"empty key", Options{Key: func(*http.Request) (string, error) { return "", nil }}, 400},
		{"NaN cost", Options{Cost: func(*http.Request) float64 { return math.NaN() }}, 500},
		{"+Inf cost", Options{Cost: func(*http.Request) float64 { return math.Inf(1) }}, 500},
		{"-0 cost passes unmetered", Options{Cost: func(*http.Request) float64 { return math.Copysign(0, -1) }}, 200},
		{"tiny cost", Options{Cost: func(*http.Request) float64 { return 5e-324 }}, 200},
		{"cost over capacity", Options{Cost: func(*http.Request) float64 { return 10.5 }}, 413},
		{"cost over capacity, FailOpen", Options{FailOpen: true, Cost: func(*http.Request) float64 { return 11 }}, 413},
	} {
		tc.opts.Limits = []string{"api"}
		e := newEnv(t, limits, tc.opts)
		if r := e.get(t); r.code != tc.code {
			t.Errorf("%s: %+v, want %d", tc.name, r, tc.code)
		}
	}
	// A request whose context already ended: 503 even with FailOpen.
	e := newEnv(t, limits, Options{Limits: []string{"api"}, FailOpen: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	served := false
	e.mw.serve(rec, req, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
	if rec.Code != 503 || served {
		t.Errorf("ended context, FailOpen: %d, served %v", rec.Code, served)
	}
	if v, _ := e.l.Value(context.Background(), "api", "192.0.2.1"); v.Value != 10 {
		t.Errorf("ended context took tokens: %v", v.Value)
	}
}

// TestHostileHeaderSyntax: every header a decision writes is valid SF / delay-
// seconds, over configs with fractional rates, sub-second periods and
// several limits; t on a denial equals Retry-After.
func TestHostileHeaderSyntax(t *testing.T) {
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
			if bad := hxCheckItem(item); len(bad) > 0 {
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

// policyItem subtracted 1e-9 s before rounding w up, so a Period a
// nanosecond over a whole number of seconds was advertised as that whole
// number: 1 token per 2 s + 1 ns became q=1;w=2, and a client following it
// (one request every 2 s) was denied on its second request. The
// arithmetic is now exact: w=3.
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
