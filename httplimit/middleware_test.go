package httplimit

// The middleware (middleware.go): grants, denials, reservations that wait
// (and clients that leave while they wait), refusals and their codes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

func TestGrantedHeaders(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"api": tb(10, 10*time.Second, 0)}, Options{Limits: []string{"api"}})
	e.run(t, []step{
		{0, response{code: 200, policy: `"api";q=10;w=10`, limit: `"api";r=9;t=1`, body: "ok"}},
		{0, response{code: 200, limit: `"api";r=8;t=2`}},
		{1500 * time.Millisecond, response{code: 200, limit: `"api";r=8;t=2`}}, // 8.5 left: 1.5 s to full
	})
	if e.last.Limit != "api" || !e.last.OK {
		t.Fatalf("StatusFromContext: %+v", e.last)
	}
}

// TestExactlyZeroLeft pins the edge: the grant that leaves 0 says r=0, and
// the next request is a 429 whose t equals Retry-After.
func TestExactlyZeroLeft(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"api": tb(10, time.Minute, 3)}, Options{Limits: []string{"api"}})
	e.run(t, []step{
		{0, response{code: 200, policy: `"api";q=10;w=60`, limit: `"api";r=2;t=6`}},
		{0, response{code: 200, limit: `"api";r=1;t=12`}},
		{0, response{code: 200, limit: `"api";r=0;t=18`}},
		{0, response{code: 429, policy: `"api";q=10;w=60`, limit: `"api";r=0;t=6`, retryAfter: "6",
			body: `{"error":"rate limited","limit":"api","retry_after_seconds":6}`}},
		{6 * time.Second, response{code: 200, limit: `"api";r=0;t=18`}},
	})
	if e.served != 4 {
		t.Fatalf("handler ran %d times, want 4", e.served)
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"api": tb(7, time.Minute, 1)}, Options{Limits: []string{"api"}})
	e.run(t, []step{
		{0, response{code: 200, policy: `"api";q=7;w=60`, limit: `"api";r=0;t=9`}},
		{0, response{code: 429, limit: `"api";r=0;t=9`, retryAfter: "9"}},                       // 8.571 s
		{8500 * time.Millisecond, response{code: 429, limit: `"api";r=0;t=1`, retryAfter: "1"}}, // 71 ms
		{72 * time.Millisecond, response{code: 200, limit: `"api";r=0;t=9`}},
	})

	start := time.Unix(1_700_000_000, 0)
	fw := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 2, Period: time.Minute, Start: start}
	e = newEnv(t, map[string]ratelimit.Config{"win": fw}, Options{Limits: []string{"win"}})
	e.run(t, []step{
		{0, response{code: 200, policy: `"win";q=2;w=60`, limit: `"win";r=1;t=60`}},
		{0, response{code: 200, limit: `"win";r=0;t=60`}},
		{0, response{code: 429, limit: `"win";r=0;t=60`, retryAfter: "60"}},
		{59*time.Second + 500*time.Millisecond, response{code: 429, limit: `"win";r=0;t=1`, retryAfter: "1"}},
		{500 * time.Millisecond, response{code: 200, limit: `"win";r=1;t=60`}},
	})
}

// TestReservation: with Reserve, a request over the limit waits its turn
// (the sleep hook sees RetryAfter) instead of a 429, up to MaxReserved; a
// client that leaves while waiting gets its tokens credited back.
func TestReservation(t *testing.T) {
	c := tb(1, time.Second, 1)
	c.MaxReserved = 2
	e := newEnv(t, map[string]ratelimit.Config{"jobs": c}, Options{Limits: []string{"jobs"}, Reserve: true})
	e.run(t, []step{
		{0, response{code: 200, policy: `"jobs";q=1;w=1`, limit: `"jobs";r=0;t=1`}},
		{0, response{code: 200, limit: `"jobs";r=0;t=2`}}, // value -1: waits 1 s
		{0, response{code: 200, limit: `"jobs";r=0;t=3`}}, // value -2: waits 2 s
		{0, response{code: 429, limit: `"jobs";r=0;t=1`, retryAfter: "1"}},
	})
	if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(e.waits, want) {
		t.Fatalf("waits %v, want %v", e.waits, want)
	}
	if e.last.RetryAfter != 2*time.Second {
		t.Fatalf("handler saw %+v, want RetryAfter 2s", e.last)
	}

	// The client goes away while waiting: 503 (unseen), the handler does not
	// run, and the reservation is credited back.
	e.clock.Advance(time.Second) // value -1
	e.wait = func() error { return context.Canceled }
	if got := e.get(t); got.code != 503 {
		t.Fatalf("abandoned reservation: %+v", got)
	}
	v, err := e.l.Value(context.Background(), "jobs", "127.0.0.1")
	if err != nil || v.Value != -1 {
		t.Fatalf("after the credit: value %v, %v; want -1", v.Value, err)
	}
	if e.served != 3 {
		t.Fatalf("handler ran %d times, want 3", e.served)
	}
}

// TestMultiLimitDenial: two limits go through LimitAll; the 429 names the
// limit that denied, and the policy lists both.
func TestMultiLimitDenial(t *testing.T) {
	global := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 2, Period: time.Hour, Start: t0}
	e := newEnv(t, map[string]ratelimit.Config{"user": tb(100, time.Minute, 0), "global": global},
		Options{Limits: []string{"user", "global"}})
	policy := `"user";q=100;w=60, "global";q=2;w=3600`
	e.run(t, []step{
		{0, response{code: 200, policy: policy, limit: `"global";r=1;t=3600`}},
		{0, response{code: 200, policy: policy, limit: `"global";r=0;t=3600`}},
		{time.Minute, response{code: 429, policy: policy, limit: `"global";r=0;t=3540`, retryAfter: "3540",
			body: `{"error":"rate limited","limit":"global","retry_after_seconds":3540}`}},
	})
	// Nothing was taken from "user" by the denial: 98 left after 1 min of refill is capped at 100.
	v, err := e.l.Value(context.Background(), "user", "127.0.0.1")
	if err != nil || v.Value != 100 {
		t.Fatalf("user value %v, %v; want 100", v.Value, err)
	}
}

// TestMultiLimitDenierRemaining: a denial's r is the denying limit's own
// tokens, not what another member would have had left had the request been
// granted.
func TestMultiLimitDenierRemaining(t *testing.T) {
	cost := func(r *http.Request) float64 {
		if r.Header.Get("X-Cost") == "6" {
			return 6
		}
		return 5
	}
	e := newEnv(t, map[string]ratelimit.Config{"d": tb(10, time.Hour, 0), "n": tb(11, time.Hour, 0)},
		Options{Limits: []string{"d", "n"}, Cost: cost})
	if got := e.get(t, "X-Cost", "6"); got.code != 200 || got.limit != `"d";r=4;t=2160` {
		t.Fatalf("cost 6: %+v", got)
	}
	if got := e.get(t); got.code != 429 || got.limit != `"d";r=4;t=360` || got.retryAfter != "360" {
		t.Fatalf("cost 5, denied by d with 4 left: %+v", got)
	}
}

func TestClosedLimiter(t *testing.T) {
	limits := map[string]ratelimit.Config{"api": tb(10, time.Minute, 0)}
	e := newEnv(t, limits, Options{Limits: []string{"api"}})
	e.l.Close()
	got := e.get(t)
	if got.code != 503 || got.body != `{"error":"rate limiter unavailable"}` || got.limit != "" || e.served != 0 {
		t.Fatalf("closed limiter: %+v, served %d", got, e.served)
	}

	e = newEnv(t, limits, Options{Limits: []string{"api"}, FailOpen: true})
	e.l.Close()
	if got := e.get(t); got.code != 200 || got.body != "ok" || got.limit != "" || e.served != 1 {
		t.Fatalf("closed limiter, FailOpen: %+v, served %d", got, e.served)
	}
}

// FailOpen does not let through a new key the limiter refuses at its
// MaxBuckets: a flood of keys must not turn limiting off.
func TestFailOpenRefusesKeysBeyondMaxBuckets(t *testing.T) {
	l, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{"api": tb(1, time.Hour, 0)},
		Partitions: 1, MaxBuckets: 1, Now: ratelimittest.NewClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mw, err := Middleware(l, Options{Limits: []string{"api"}, Key: Header("X-Key"), FailOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	for i, want := range []int{200, 429, 503, 503} { // a's grant and denial, then new keys
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", []string{"a", "a", "b", "c"}[i])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Fatalf("request %d: %d, want %d", i, w.Code, want)
		}
	}
	if served != 1 {
		t.Fatalf("%d requests served, want 1", served)
	}
}

func TestOnError(t *testing.T) {
	var got []error
	var mu sync.Mutex
	e := newEnv(t, map[string]ratelimit.Config{"api": tb(10, time.Minute, 0)}, Options{
		Limits: []string{"api"},
		Key:    Header("X-API-Key"),
		OnError: func(w http.ResponseWriter, r *http.Request, err error) {
			mu.Lock()
			got = append(got, err)
			mu.Unlock()
			http.Error(w, "custom", http.StatusTeapot)
		},
	})
	if r := e.get(t); r.code != http.StatusTeapot {
		t.Fatalf("missing key: %+v", r)
	}
	e.l.Close()
	if r := e.get(t, "X-API-Key", "k"); r.code != http.StatusTeapot {
		t.Fatalf("closed: %+v", r)
	}
	if len(got) != 2 || !errors.Is(got[0], ErrKey) || !errors.Is(got[1], ratelimit.ErrClosed) {
		t.Fatalf("OnError saw %v", got)
	}
}

func TestHeaderKey(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"api": tb(1, time.Minute, 0)}, Options{Limits: []string{"api"}, Key: Header("X-API-Key")})
	if r := e.get(t); r.code != 400 || r.body != `{"error":"no rate-limit key"}` {
		t.Fatalf("no key: %+v", r)
	}
	if r := e.get(t, "X-API-Key", " "); r.code != 400 {
		t.Fatalf("blank key: %+v", r)
	}
	for _, k := range []string{"a", "b"} {
		if r := e.get(t, "X-API-Key", k); r.code != 200 {
			t.Fatalf("key %s: %+v", k, r)
		}
	}
	if r := e.get(t, "X-API-Key", "a"); r.code != 429 {
		t.Fatalf("key a again: %+v", r)
	}
}

func TestCost(t *testing.T) {
	cost := func(r *http.Request) float64 {
		switch r.Header.Get("X-Cost") {
		case "0":
			return 0
		case "-1":
			return -1
		case "big":
			return 11
		}
		return 4
	}
	e := newEnv(t, map[string]ratelimit.Config{"api": tb(10, time.Minute, 0)}, Options{Limits: []string{"api"}, Cost: cost})
	if r := e.get(t); r.code != 200 || r.limit != `"api";r=6;t=24` {
		t.Fatalf("cost 4: %+v", r)
	}
	if r := e.get(t, "X-Cost", "0"); r.code != 200 || r.limit != "" || r.policy != "" {
		t.Fatalf("cost 0: %+v", r)
	}
	if r := e.get(t, "X-Cost", "-1"); r.code != 500 {
		t.Fatalf("cost -1: %+v", r)
	}
	if r := e.get(t, "X-Cost", "big"); r.code != 413 {
		t.Fatalf("cost over capacity: %+v", r)
	}
	// FailOpen does not let through what the limit can never grant.
	e.mw.opts.FailOpen = true
	if r := e.get(t, "X-Cost", "big"); r.code != 413 {
		t.Fatalf("cost over capacity, FailOpen: %+v", r)
	}
	if r := e.get(t); r.code != 200 || r.limit != `"api";r=2;t=48` {
		t.Fatalf("cost 4 with 6 left: %+v", r)
	}
	if r := e.get(t); r.code != 429 || r.limit != `"api";r=2;t=12` || r.retryAfter != "12" {
		t.Fatalf("cost 4 with 2 left: %+v", r)
	}
}

func TestMiddlewareOptions(t *testing.T) {
	l, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{
		"api": tb(1, time.Second, 0), "bad\nname": tb(1, time.Second, 0),
		"tiny": tb(10, time.Second, 0.5), "sharded": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Second, Capacity: 1.5, Shards: 4},
		"sharded ok":    {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Second, Capacity: 2, Shards: 4},
		"tiny reserved": {Kind: ratelimit.TokenBucket, Rate: 0.5, Period: time.Second, MaxReserved: 10},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		name string
		l    *ratelimit.Limiter
		opts Options
		want error
	}{
		{"nil limiter", nil, Options{Limits: []string{"api"}}, ErrOptions},
		{"no limits", l, Options{}, ErrOptions},
		{"unknown", l, Options{Limits: []string{"api", "nope"}}, ratelimit.ErrUnknownLimit},
		{"twice", l, Options{Limits: []string{"api", "api"}}, ErrOptions},
		{"not ASCII", l, Options{Limits: []string{"bad\nname"}}, ErrOptions},
		{"capacity below one request", l, Options{Limits: []string{"tiny"}}, ErrOptions},
		{"two shards below one request", l, Options{GlobalLimits: []string{"sharded"}}, ErrOptions},
		{"two shards make one request", l, Options{GlobalLimits: []string{"sharded ok"}}, nil},
		{"a Cost may ask for less", l, Options{Limits: []string{"tiny"}, Cost: func(*http.Request) float64 { return 0.5 }}, nil},
		{"a reservation may go into debt", l, Options{Limits: []string{"tiny reserved"}, Reserve: true}, nil},
	} {
		if _, err := Middleware(tc.l, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := Middleware(l, Options{Limits: []string{"api"}}); err != nil {
		t.Fatal(err)
	}
}

func TestDenialBodyIsJSON(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{`we"ird`: tb(1, time.Hour, 0)}, Options{Limits: []string{`we"ird`}})
	e.get(t)
	req, _ := http.NewRequest("GET", e.srv.URL, nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error      string `json:"error"`
		Limit      string `json:"limit"`
		RetryAfter int    `json:"retry_after_seconds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/json" ||
		body.Limit != `we"ird` || body.RetryAfter != 3600 || body.Error != "rate limited" {
		t.Fatalf("%d %v %+v", resp.StatusCode, resp.Header, body)
	}
	if got := resp.Header.Get("RateLimit"); got != `"we\"ird";r=0;t=3600` {
		t.Fatalf("RateLimit %s", got)
	}
}

// GlobalLimits take from the limit's one shared bucket: clients with
// different keys share it, while Limits stay per client.
func TestGlobalLimits(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"user": tb(100, time.Minute, 0), "global": tb(3, time.Hour, 0)},
		Options{Limits: []string{"user"}, GlobalLimits: []string{"global"}, Key: Header("X-Key")})
	for i, key := range []string{"a", "b", "c", "d"} {
		r := e.get(t, "X-Key", key)
		if want := 200; i == 3 {
			want = 429
			if r.code != want || !strings.Contains(r.body, `"limit":"global"`) {
				t.Fatalf("request %d (key %s): %+v, want 429 from global", i, key, r)
			}
		} else if r.code != want {
			t.Fatalf("request %d (key %s): %+v", i, key, r)
		}
	}
	ctx := context.Background()
	if v, err := e.l.Value(ctx, "global", ""); err != nil || v.Value != 0 {
		t.Fatalf("global bucket %v, %v; want 0", v.Value, err)
	}
	if v, err := e.l.Value(ctx, "user", "d"); err != nil || v.Value != 100 {
		t.Fatalf("user d %v, %v; want 100 (the denial took nothing)", v.Value, err)
	}
	if _, err := Middleware(e.l, Options{Limits: []string{"user"}, GlobalLimits: []string{"user"}}); !errors.Is(err, ErrOptions) {
		t.Fatalf("a limit both per client and global: %v", err)
	}
}

func TestReserveNeedsMaxReserved(t *testing.T) {
	l, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{"u": tb(10, time.Minute, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Middleware(l, Options{Limits: []string{"u"}, Reserve: true}); !errors.Is(err, ErrOptions) {
		t.Fatalf("Reserve with unlimited MaxReserved: %v, want ErrOptions", err)
	}
}

// The middleware follows SetLimits: RateLimit-Policy describes the
// limits' configs of the moment, and a limit that loses its MaxReserved
// under Reserve refuses requests (503) until it has one again.
func TestMiddlewareFollowsSetLimits(t *testing.T) {
	api := tb(100, time.Minute, 0)
	api.MaxReserved = 10
	e := newEnv(t, map[string]ratelimit.Config{"api": api}, Options{Limits: []string{"api"}, Reserve: true})
	if got := e.get(t); got.code != http.StatusOK || got.policy != `"api";q=100;w=60` {
		t.Fatalf("before SetLimits: %+v", got)
	}
	faster := tb(5, time.Second, 0)
	faster.MaxReserved = 1
	if err := e.l.SetLimits(map[string]ratelimit.Config{"api": faster}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t); got.code != http.StatusOK || got.policy != `"api";q=5;w=1` {
		t.Fatalf("after SetLimits to 5/s: %+v, want the policy q=5;w=1", got)
	}
	if err := e.l.SetLimits(map[string]ratelimit.Config{"api": tb(5, time.Second, 0)}); err != nil {
		t.Fatal(err)
	}
	served := e.served
	if got := e.get(t); got.code != http.StatusServiceUnavailable || e.served != served {
		t.Fatalf("Reserve after SetLimits made MaxReserved 0 (unlimited): %+v, want 503, not served", got)
	}
	if err := e.l.SetLimits(map[string]ratelimit.Config{"api": faster}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t); got.code != http.StatusOK {
		t.Fatalf("after MaxReserved is back: %+v", got)
	}

	// FailOpen does not let such requests through: the limiter has not
	// failed, and every request would go unlimited.
	e = newEnv(t, map[string]ratelimit.Config{"api": api}, Options{Limits: []string{"api"}, Reserve: true, FailOpen: true})
	if err := e.l.SetLimits(map[string]ratelimit.Config{"api": tb(5, time.Second, 0)}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t); got.code != http.StatusServiceUnavailable || e.served != 0 {
		t.Fatalf("FailOpen, Reserve after SetLimits made MaxReserved 0: %+v, served %d, want 503, not served", got, e.served)
	}
	// Nor requests on a limit SetLimits removed.
	e = newEnv(t, map[string]ratelimit.Config{"api": api}, Options{Limits: []string{"api"}, FailOpen: true})
	if got := e.get(t); got.code != http.StatusOK || e.served != 1 {
		t.Fatalf("FailOpen, before the limit is removed: %+v, served %d", got, e.served)
	}
	if err := e.l.SetLimits(map[string]ratelimit.Config{"other": faster}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := e.get(t); got.code != http.StatusServiceUnavailable || e.served != 1 {
			t.Fatalf("FailOpen, the limit removed: %+v, served %d, want 503, not served", got, e.served)
		}
	}
}

// A key longer than ratelimit.MaxKeyLen is the client's doing: 400 with
// ErrKey (wrapping ratelimit.ErrInvalidKey), never a 503, and never let
// through by FailOpen.
func TestOverlongKey(t *testing.T) {
	long := strings.Repeat("k", ratelimit.MaxKeyLen+1)
	for _, failOpen := range []bool{false, true} {
		var seen error
		e := newEnv(t, map[string]ratelimit.Config{"api": tb(10, time.Minute, 0)}, Options{
			Limits:   []string{"api"},
			Key:      func(*http.Request) (string, error) { return long, nil },
			FailOpen: failOpen,
		})
		if r := e.get(t); r.code != 400 || r.body != `{"error":"no rate-limit key"}` || e.served != 0 {
			t.Fatalf("FailOpen=%v: %+v, served %d", failOpen, r, e.served)
		}
		e.mw.opts.OnError = func(w http.ResponseWriter, r *http.Request, err error) { seen = err; w.WriteHeader(400) }
		e.get(t)
		if !errors.Is(seen, ErrKey) || !errors.Is(seen, ratelimit.ErrInvalidKey) {
			t.Fatalf("FailOpen=%v: OnError got %v", failOpen, seen)
		}
	}
}

// TestRefusalCodes: the documented status of each refusal, and that
// nothing writes a second response.
func TestRefusalCodes(t *testing.T) {
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

// TestReservationDeadline: a request context that ends (not the client
// leaving) during the wait is a visible 503; the tokens are credited back.
// The 503 still carries the grant's RateLimit fields (set before the wait):
// noted, harmless (r is a lower bound).
func TestReservationDeadline(t *testing.T) {
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

// realServer is the middleware behind a real server with the real sleep,
// reporting when a request waits and when serve returns.
type realServer struct {
	srv     *httptest.Server
	waiting chan struct{}
	done    chan int // status written by serve (0 if none)
	served  atomic.Int32
}

type codeRecorder struct {
	http.ResponseWriter
	code int
}

func (w *codeRecorder) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }

func newRealServer(t *testing.T, m *middleware) *realServer {
	s := &realServer{waiting: make(chan struct{}, 16), done: make(chan int, 16)}
	m.sleep = func(ctx context.Context, d time.Duration) error {
		s.waiting <- struct{}{}
		return sleep(ctx, d) // d is real time here: the client leaves first
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.served.Add(1); io.WriteString(w, "ok") })
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &codeRecorder{ResponseWriter: w}
		m.serve(rec, r, next)
		s.done <- rec.code
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// TestDisconnectDuringReservation: a real client that goes away while
// its reservation waits has its tokens credited to every limit (per-key
// and global), and the handler never runs.
func TestDisconnectDuringReservation(t *testing.T) {
	user, global := tb(1, time.Hour, 1), tb(10, time.Hour, 2)
	user.MaxReserved, global.MaxReserved = 5, 5
	e := newEnv(t, map[string]ratelimit.Config{"user": user, "global": global},
		Options{Limits: []string{"user"}, GlobalLimits: []string{"global"}, Reserve: true, Key: Header("X-Key")})
	s := newRealServer(t, e.mw)
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

// TestConcurrentReservations: under -race, concurrent reservations of
// which every other one is abandoned; with a frozen clock the bucket ends
// at capacity minus what reached the handler (nothing leaked or minted).
func TestConcurrentReservations(t *testing.T) {
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

// WriteDenied writes the same 429 as the middleware's denial: status,
// Retry-After, RateLimit, RateLimit-Policy and body.
func TestWriteDeniedMatchesTheMiddleware(t *testing.T) {
	e := newEnv(t, map[string]ratelimit.Config{"api": tb(2, time.Minute, 0)}, Options{Limits: []string{"api"}})
	e.get(t)
	e.get(t)
	mwResp := e.get(t)
	if mwResp.code != 429 {
		t.Fatalf("the third request got %d, want 429", mwResp.code)
	}
	st, err := e.l.Check(context.Background(), ratelimit.Request{Name: "api", Key: "127.0.0.1"})
	if err != nil || st.OK {
		t.Fatalf("Check = %+v, %v; want a denial", st, err)
	}
	rec := httptest.NewRecorder()
	WriteDenied(rec, e.l, st)
	got := response{code: rec.Code, policy: rec.Header().Get("RateLimit-Policy"), limit: rec.Header().Get("RateLimit"),
		retryAfter: rec.Header().Get("Retry-After"), body: strings.TrimSpace(rec.Body.String())}
	if got != mwResp {
		t.Fatalf("WriteDenied wrote %+v, the middleware %+v", got, mwResp)
	}
	rec = httptest.NewRecorder()
	WriteDenied(rec, nil, st)
	if rec.Code != 429 || rec.Header().Get("RateLimit-Policy") != "" || rec.Header().Get("Retry-After") != mwResp.retryAfter {
		t.Fatalf("WriteDenied without a limiter: %d %v", rec.Code, rec.Header())
	}
}
