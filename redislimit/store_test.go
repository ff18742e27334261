package redislimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/httplimit"
	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
)

// step is one request of a worked case, at t0+at on a fake clock.
type step struct {
	at      time.Duration
	count   float64
	reserve bool
	check   bool
	ok      bool
	retry   time.Duration
	value   float64 // the bucket's value afterwards
	err     error
	credit  float64 // a Credit of this many instead of a request
}

// TestWorkedCases runs the worked cases of the semantics on Redis, single
// server and cluster.
func TestWorkedCases(t *testing.T) {
	cases := []struct {
		name  string
		cfg   ratelimit.Config
		steps []step
	}{
		{"token bucket", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: M}, []step{
			{at: 0, count: 5, ok: true, value: 5},
			{at: 6 * S, count: 6, ok: true, value: 0},
			{at: 6 * S, count: 10, ok: false, retry: 60 * S, value: 0},
		}},
		{"reservations", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: M}, []step{
			{at: 0, count: 5, ok: true, value: 5},
			{at: 6 * S, count: 16, reserve: true, ok: true, retry: 60 * S, value: -10},
			{at: 36 * S, count: 5, reserve: true, ok: true, retry: 60 * S, value: -10},
		}},
		{"fixed window", ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 10, Period: M, Start: t0}, []step{
			{at: 0, count: 5, ok: true, value: 5},
			{at: 60 * S, count: 16, reserve: true, ok: true, retry: 60 * S, value: -6},
			{at: 90 * S, count: 5, reserve: true, ok: true, retry: 90 * S, value: -11},
		}},
		{"maxReserved", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1, Period: H, MaxReserved: 1}, []step{
			{at: 0, count: 2, reserve: true, ok: true, retry: H, value: -1},
			{at: 0, count: 1, ok: false, retry: 2 * H, value: -1},
		}},
		{"count over capacity", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1, Period: S}, []step{
			{at: 0, count: 2, err: ratelimit.ErrInvalidCount, value: 1},
		}},
		{"check writes nothing", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: M}, []step{
			{at: 0, count: 4, check: true, ok: true, value: 10},
			{at: 0, count: 11, reserve: true, check: true, ok: true, retry: 6 * S, value: 10},
			{at: 0, count: 7, ok: true, value: 3},
			{at: 0, count: 7, check: true, ok: false, retry: 24 * S, value: 3},
		}},
		{"clock going back", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: M}, []step{
			{at: 60 * S, count: 10, ok: true, value: 0},
			{at: 30 * S, count: 1, ok: false, retry: 36 * S, value: 0}, // refills from 60s on only
			{at: 66 * S, count: 1, ok: true, value: 0},
		}},
		{"credit after the clock went back", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 10, Period: M}, []step{
			{at: 60 * S, count: 10, ok: true, value: 0},
			{at: 0, credit: 10, value: 10}, // full as of 60s, so deleted
			{at: 0, count: 10, ok: true, value: 0},
			{at: 60 * S, count: 1, ok: false, retry: 6 * S, value: 0}, // no refill before 60s
		}},
	}
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				clk := newFakeClock(t0)
				l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{"l": tc.cfg}})
				ctx := context.Background()
				for i, st := range tc.steps {
					clk.Set(t0.Add(st.at))
					if st.credit > 0 {
						if err := l.Credit(ctx, "l", "k", st.credit); err != nil {
							t.Fatalf("step %d: Credit: %v", i, err)
						}
					} else if err := decide(l, st); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					v, err := l.Value(ctx, "l", "k")
					if err != nil || v.Value != st.value {
						t.Fatalf("step %d: value %v (%v), want %v", i, v.Value, err, st.value)
					}
				}
			})
		}
	})
}

// decide makes st's request and compares the outcome with st's.
func decide(l *ratelimit.Limiter, st step) error {
	r := ratelimit.Request{Name: "l", Key: "k", Count: st.count, Reserve: st.reserve, CheckOnly: st.check}
	got, err := l.Limit(context.Background(), r)
	switch {
	case st.err != nil:
		if !errors.Is(err, st.err) {
			return fmt.Errorf("error %v, want %v", err, st.err)
		}
	case err != nil || got.OK != st.ok || got.RetryAfter != st.retry:
		return fmt.Errorf("%+v, %v; want ok %v retry %v", got, err, st.ok, st.retry)
	}
	return nil
}

// TestServerClock decides on the servers' clock (no Options.Now): a
// bucket refills with the server's time, and Value reports that time.
func TestServerClock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		l := open(t, client, ratelimit.Options{Limits: map[string]ratelimit.Config{
			// Full a second after emptying: the second call comes well
			// within it, even after a slow fsync.
			"l": {Kind: ratelimit.TokenBucket, Rate: 10, Period: S, Capacity: 10},
		}})
		ctx := context.Background()
		before := time.Now()
		st, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 10})
		if err != nil || !st.OK || st.ResetAfter != time.Second {
			t.Fatal(st, err)
		}
		st, err = l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 10})
		if err != nil || st.OK || st.RetryAfter <= 0 || st.RetryAfter > time.Second {
			t.Fatal(st, err)
		}
		v, err := l.Value(ctx, "l", "k")
		if err != nil {
			t.Fatal(err)
		}
		// The servers run on this machine: their clock is this one.
		if d := v.TS.Sub(before); d < -time.Second || d > 10*time.Second {
			t.Fatalf("Value.TS %v is not the server's time (now %v)", v.TS, before)
		}
		if v.Value < 0 || v.Value > 10 {
			t.Fatalf("value %v", v.Value)
		}
	})
}

// TestResetCreditValue covers Reset (every shard), Credit (capped) and
// Value of a sharded limit.
func TestResetCreditValue(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk := newFakeClock(t0)
		l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"one":     {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
			"sharded": {Kind: ratelimit.TokenBucket, Rate: 40, Period: M, Shards: 4},
		}})
		ctx := context.Background()
		for range 5 {
			if st, err := l.Limit(ctx, ratelimit.Request{Name: "sharded", Key: "k", Count: 3}); err != nil || !st.OK {
				t.Fatal(st, err)
			}
		}
		if v, err := l.Value(ctx, "sharded", "k"); err != nil || v.Value != 25 {
			t.Fatalf("sharded value %v (%v), want 25", v.Value, err)
		}
		if err := l.Credit(ctx, "sharded", "k", 100); err != nil {
			t.Fatal(err)
		}
		if v, _ := l.Value(ctx, "sharded", "k"); v.Value != 40 {
			t.Fatalf("after a credit over capacity: %v, want 40", v.Value)
		}
		l.Limit(ctx, ratelimit.Request{Name: "one", Key: "k", Count: 7})
		if err := l.Credit(ctx, "one", "k", 2); err != nil {
			t.Fatal(err)
		}
		if v, _ := l.Value(ctx, "one", "k"); v.Value != 5 {
			t.Fatalf("after a credit of 2: %v, want 5", v.Value)
		}
		if err := l.Reset(ctx, "one", "k"); err != nil {
			t.Fatal(err)
		}
		if v, _ := l.Value(ctx, "one", "k"); v.Value != 10 {
			t.Fatalf("after Reset: %v, want 10", v.Value)
		}
	})
}

// TestStats counts decisions as the partitions do: a LimitAll is one, a
// Check none, a reservation that must wait is also a reservation.
func TestStats(t *testing.T) {
	redistest.Need(t)
	clk := newFakeClock(t0)
	l := open(t, topologies[0].client(t), ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
		"l": {Kind: ratelimit.TokenBucket, Rate: 2, Period: M},
	}})
	ctx := context.Background()
	l.Limit(ctx, ratelimit.Request{Name: "l", Key: "a"})
	l.Limit(ctx, ratelimit.Request{Name: "l", Key: "a", Count: 2, Reserve: true})
	l.Limit(ctx, ratelimit.Request{Name: "l", Key: "a"})
	l.Check(ctx, ratelimit.Request{Name: "l", Key: "a"})
	l.LimitAll(ctx, ratelimit.Request{Name: "l", Key: "b"}, ratelimit.Request{Name: "l", Key: "c"})
	l.LimitMany(ctx, []ratelimit.Request{{Name: "l", Key: "d"}, {Name: "l", Key: "d", Count: 2}}, nil)
	s := l.Stats()
	if s.Grants != 4 || s.Denials != 2 || s.Reservations != 1 || s.Partitions != Slots {
		t.Fatalf("%+v", s)
	}
}

// TestCancel: a request whose context has ended is not decided, and a
// call abandoned while in flight is recycled by the store (the race
// detector and a later Close see to that).
func TestCancel(t *testing.T) {
	redistest.Need(t)
	l := open(t, topologies[0].client(t), ratelimit.Options{Limits: map[string]ratelimit.Config{
		"l": {Kind: ratelimit.TokenBucket, Rate: 100, Period: S},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k"}); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%20)*20*time.Microsecond)
		_, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k"})
		out := l.LimitMany(ctx, []ratelimit.Request{{Name: "l", Key: "a"}, {Name: "l", Key: "b"}, {Name: "l", Key: "c"}}, nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		for _, d := range out {
			if d.Err != nil && !errors.Is(d.Err, context.DeadlineExceeded) {
				t.Fatal(d.Err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Limit(context.Background(), ratelimit.Request{Name: "l", Key: "k"}); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatal(err)
	}
}

// A caller whose context ends while the server does not answer gets the
// context's error then, not the answer (or the client's read timeout)
// later: it never waits inside a round it must finish.
func TestCancelWhileTheServerDoesNotAnswer(t *testing.T) {
	srv := ownServer(t)
	l := open(t, srv.client(), ratelimit.Options{Limits: map[string]ratelimit.Config{
		"l": {Kind: ratelimit.TokenBucket, Rate: 100, Period: S},
	}})
	ctx := context.Background()
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "warm"}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	admin := srv.client()
	defer admin.Close()
	// The function writes, so a write pause holds every call of the store.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			admin.Do(ctx, "CLIENT", "UNPAUSE")
		}
	}()
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"Limit", func(ctx context.Context) error {
			_, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k"})
			return err
		}},
		{"LimitMany", func(ctx context.Context) error {
			return l.LimitMany(ctx, []ratelimit.Request{{Name: "l", Key: "a"}, {Name: "l", Key: "b"}}, nil)[0].Err
		}},
		{"Check", func(ctx context.Context) error {
			_, err := l.Check(ctx, ratelimit.Request{Name: "l", Key: "k"})
			return err
		}},
	}
	for _, c := range calls {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err := c.call(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s while the server is paused: %v, want the context's error", c.name, err)
		}
	}
	if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	paused = false
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "after"}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
}

// TestBadInputNeverReachesRedis: bad requests fail with the local
// limiter's sentinels before anything is sent, even with the server gone,
// and a bad part of a LimitAll takes nothing from the others.
func TestBadInputNeverReachesRedis(t *testing.T) {
	srv := ownServer(t)
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	clk := newFakeClock(t0)
	l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
		"l": {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
	}})
	ctx := context.Background()
	long := string(make([]byte, ratelimit.MaxKeyLen+1))
	bad := []struct {
		r    ratelimit.Request
		want error
	}{
		{ratelimit.Request{Name: "l", Key: long}, ratelimit.ErrInvalidKey},
		{ratelimit.Request{Name: "nope"}, ratelimit.ErrUnknownLimit},
		{ratelimit.Request{Name: "l", Count: -1}, ratelimit.ErrInvalidCount},
		{ratelimit.Request{Name: "l", Count: 11}, ratelimit.ErrInvalidCount},
		{ratelimit.Request{Name: "x", Config: &ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: -1, Period: S}}, ratelimit.ErrInvalidConfig},
	}
	tooLarge := make([]ratelimit.Request, 1<<15+1)
	for i := range tooLarge {
		tooLarge[i] = ratelimit.Request{Name: "l", Key: "big", CheckOnly: true}
	}
	check := func(phase string) {
		for i, b := range bad {
			if _, err := l.Limit(ctx, b.r); !errors.Is(err, b.want) || errors.Is(err, ratelimit.ErrUnavailable) {
				t.Fatalf("%s: Limit %d: %v, want %v", phase, i, err, b.want)
			}
			if _, err := l.LimitAll(ctx, ratelimit.Request{Name: "l", Key: "ok", Count: 5}, b.r); !errors.Is(err, b.want) {
				t.Fatalf("%s: LimitAll %d: %v, want %v", phase, i, err, b.want)
			}
		}
		if err := l.Reset(ctx, "l", long); !errors.Is(err, ratelimit.ErrInvalidKey) {
			t.Fatalf("%s: Reset: %v", phase, err)
		}
		// More than one function call can take on a slot, all or none.
		if _, err := l.LimitAll(ctx, tooLarge...); !errors.Is(err, ratelimit.ErrTooLarge) || errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("%s: LimitAll of %d requests on one bucket: %v, want ErrTooLarge", phase, len(tooLarge), err)
		}
		if err := l.Credit(ctx, "l", "k", -1); !errors.Is(err, ratelimit.ErrInvalidCount) {
			t.Fatalf("%s: Credit: %v", phase, err)
		}
	}
	check("server up")
	if st, err := l.LimitAll(ctx, tooLarge[1:]...); err != nil || !st.OK {
		t.Fatalf("LimitAll of %d requests on one bucket: %+v, %v; want granted", len(tooLarge)-1, st, err)
	}
	if v, _ := l.Value(ctx, "l", "ok"); v.Value != 10 {
		t.Fatalf("a bad LimitAll took from its good part: %v", v.Value)
	}
	srv.Kill()
	check("server gone")
}

// TestHTTPMiddleware: package httplimit works on a Redis limiter
// unchanged (a per-client and a global limit, taken all or none).
func TestHTTPMiddleware(t *testing.T) {
	client := topologies[0].client(t)
	l := open(t, client, ratelimit.Options{Now: newFakeClock(t0).Now, Limits: map[string]ratelimit.Config{
		"perClient": {Kind: ratelimit.TokenBucket, Rate: 3, Period: M},
		"global":    {Kind: ratelimit.TokenBucket, Rate: 100, Period: M},
	}})
	mw, err := httplimit.Middleware(l, httplimit.Options{Limits: []string{"perClient"}, GlobalLimits: []string{"global"},
		Key: httplimit.Header("X-Client")})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	var codes []int
	for range 4 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Client", "c1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Fatalf("codes %v", codes)
	}
	if v, _ := l.Value(context.Background(), "global", ""); v.Value != 97 {
		t.Fatalf("global holds %v, want 97", v.Value)
	}
}
